"""The Finishes of lost leases a Work stream still expects the sidecar to refuse."""

from __future__ import annotations


class LostFinishes:
    """Tokens of lost leases whose Finish was sent, each with how many Extends
    the stream had sent before it.

    The sidecar's refusal of such a Finish is expected, not worth a warning, and
    removes the token however late it comes: a sidecar that was stopped (say
    with SIGSTOP) answers when it resumes. On a stream that hears only of failed
    Finishes (``Opened.ack_failures_only``), a lost lease the sidecar still held
    (the local deadline passed first) has its Finish applied and never answered.
    The sidecar handles a stream's messages in order and answers every Extend,
    so the answer to an Extend sent after the Finish proves it was handled
    without a refusal, and the token goes. Idle, with no Extend to answer, the
    few tokens left stay until the stream ends. (Forgetting a token a TTL after
    its Finish went out, as before, turned the refusal that a stall longer than
    the TTL delays into a warning.)
    """

    __slots__ = ("_extends_before", "_extends_sent", "_extends_answered")

    def __init__(self) -> None:
        #: By token, in the order the Finishes went out: how many Extends went
        #: out before each, so the counts never decrease along the dict.
        self._extends_before: dict[int, int] = {}
        self._extends_sent = 0
        self._extends_answered = 0

    def add(self, token: int) -> None:
        """Notes a lost lease's Finish, before it is sent."""
        self._extends_before.pop(token, None)  # keeps the dict in sending order
        self._extends_before[token] = self._extends_sent

    def extend_sent(self) -> None:
        self._extends_sent += 1

    def extend_answered(self) -> None:
        """Counts an Extended answer, and forgets the Finishes sent before the
        Extend it answers: the sidecar handled them without a refusal."""
        self._extends_answered += 1
        waiting = self._extends_before
        while waiting:
            token, before = next(iter(waiting.items()))
            # The answer is to the extends_answered-th Extend; a Finish with
            # fewer Extends before it went out before that Extend.
            if before >= self._extends_answered:
                return
            del waiting[token]

    def answered(self, token: int) -> bool:
        """Removes ``token``; True if it was a lost lease's Finish (its refusal was expected)."""
        return self._extends_before.pop(token, None) is not None

    def tokens(self) -> set[int]:
        return set(self._extends_before)

    def __len__(self) -> int:
        return len(self._extends_before)
