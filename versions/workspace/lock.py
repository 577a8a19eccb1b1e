"""The lock that keeps two rollbacks of one changes log from running at once."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from versions.errors import Conflict

BUSY = "A rollback of this changes log is already running. Wait for it to end, then reload."


@contextmanager
def changes_log_lock(*, path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the changes log at ``path``; ``Conflict(BUSY)`` if one is held."""
    # flock, not a lock file: the kernel drops it when the holder dies, so no stale lock remains.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Conflict(BUSY) from None
        yield
    finally:
        os.close(fd)
