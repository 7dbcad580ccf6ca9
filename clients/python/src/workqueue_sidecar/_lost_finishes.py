"""The Finishes of lost leases a Work stream still expects the sidecar to refuse."""

from __future__ import annotations


class LostFinishes:
    """Tokens of lost leases whose Finish was sent, with when it was sent (loop.time()).

    The sidecar's refusal of such a Finish is expected, not worth a warning, and
    answering it removes the token. On a stream that hears only of failed
    Finishes (``Opened.ack_failures_only``), a lost lease the sidecar still held
    (the local deadline passed first) has its Finish applied and never answered:
    ``forget_after`` is then set, and ``prune`` drops a token that long after its
    Finish went out. While it is None (a sidecar that answers every Finish) a
    token stays until its answer, as every Finish gets one.
    """

    __slots__ = ("_sent", "forget_after")

    def __init__(self) -> None:
        #: In the order the Finishes went out, so the oldest come first.
        self._sent: dict[int, float] = {}
        #: Seconds after which an unanswered token is dropped; None keeps it until answered.
        self.forget_after: float | None = None

    def add(self, token: int, now: float) -> None:
        self._sent.pop(token, None)  # keeps the dict in sending order
        self._sent[token] = now

    def answered(self, token: int) -> bool:
        """Removes ``token``; True if it was a lost lease's Finish (its refusal was expected)."""
        return self._sent.pop(token, None) is not None

    def prune(self, now: float) -> None:
        """Drops the tokens whose Finish went out ``forget_after`` ago or more."""
        after = self.forget_after
        if after is None:
            return
        sent = self._sent
        while sent:
            token, at = next(iter(sent.items()))
            if now - at < after:
                return
            del sent[token]

    def tokens(self) -> set[int]:
        return set(self._sent)

    def __len__(self) -> int:
        return len(self._sent)
