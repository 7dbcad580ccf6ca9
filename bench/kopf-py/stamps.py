"""The one record both of bench/kopf's Python reconcilers keep: a line per reconcile.

Each call appends ``NAME RECONCILED_UNIX_NS [QUEUED_UNIX_NS]`` to the file the
script names, with one write(2) on a descriptor opened with O_APPEND (atomic
for lines this short), so bench/remote-go's stamps mode can follow the file
while the run goes on. Both sides pay the same: one clock read, one format,
one system call per reconcile.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


class Stamps:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def reconciled(self, name: str, queued_at: datetime | None = None) -> None:
        """Records that ``name`` is being reconciled now; ``queued_at`` is when its side queued it, if known."""
        now = time.time_ns()
        if queued_at is None:
            line = f"{name} {now}\n"
        else:
            queued = (queued_at - _EPOCH) // _MICROSECOND * 1000
            line = f"{name} {now} {queued}\n"
        os.write(self._fd, line.encode())

