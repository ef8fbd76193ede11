"""The cross-process write lock of a store directory (``DIR/lock``, ``fcntl.flock``).

Several processes may open one store directory and absorb into it.  Every step that
reads or writes the shared files -- opening (log replay, torn-tail repair, index cache),
catching up on batches other processes logged, appending a batch to the write-ahead
log and publishing it, the compaction swap, checkpoints -- runs while holding this
exclusive lock, so the log never holds interleaved records and a checkpoint never drops
batches it has not seen.

The lock is advisory and released by the kernel when its holder dies (no stale lock
files).  It is re-entrant within one :class:`StoreLock` object; two objects conflict
even within one process (``flock`` locks belong to open file descriptions), which is
what two stores opened on one directory need.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

LOCK_NAME = "lock"


class StoreLockedError(TimeoutError):
    """Another process held the store directory's lock for longer than the timeout."""


class StoreLock:
    """An exclusive, re-entrant ``flock`` on ``DIR/lock``.

    Args:
        store_dir: The store directory.
        timeout: Seconds to wait for another holder (``None``: wait as long as it takes;
            ``0``: fail at once).  On expiry :class:`StoreLockedError` names the holder.
    """

    def __init__(self, store_dir: str | os.PathLike[str], timeout: float | None = 30.0) -> None:
        self.path = Path(store_dir) / LOCK_NAME
        self.timeout = timeout
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        self.waited = 0.0  # seconds spent waiting for other processes (stats, tests)

    def acquire(self, timeout: float | None = ...) -> None:  # type: ignore[assignment]  # ... stands for the lock's own timeout
        """Takes the lock (blocking other processes' holders out) or raises.

        Raises:
            StoreLockedError: The lock stayed held by another process past the timeout.
        """
        limit = self.timeout if timeout is ... else timeout
        self._thread_lock.acquire()
        if self._depth:
            self._depth += 1
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                self._lock_fd(fd, limit)
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            self._thread_lock.release()
            raise
        self._fd = fd
        self._depth = 1
        # who holds it, for the error message of the next waiter that gives up
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def _lock_fd(self, fd: int, limit: float | None) -> None:
        if limit is None:
            t0 = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.waited += time.monotonic() - t0
            return
        t0 = time.monotonic()
        delay = 0.001
        blocked = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if blocked:
                    self.waited += time.monotonic() - t0
                return
            except BlockingIOError:
                blocked = True
            left = t0 + limit - time.monotonic()
            if left <= 0:
                raise StoreLockedError(
                    f"{self.path.parent}: the store is locked by another process "
                    f"({self._holder()}) -- gave up after {limit:g}s"
                )
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)

    def _holder(self) -> str:
        try:
            pid = self.path.read_text(encoding="ascii").strip()
        except OSError:
            pid = ""
        return f"pid {pid}" if pid else "unknown holder"

    def release(self) -> None:
        """Releases one level of the lock (the file lock with the outermost level)."""
        if not self._depth:
            raise RuntimeError("release of a StoreLock that is not held")
        self._depth -= 1
        if not self._depth:
            fd, self._fd = self._fd, None
            assert fd is not None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._thread_lock.release()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock (in any thread)."""
        return self._depth > 0

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["LOCK_NAME", "StoreLock", "StoreLockedError"]
