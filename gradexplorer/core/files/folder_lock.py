"""A folder owned by one writing process at a time: an advisory ``flock`` on the folder itself.

The kernel releases the lock however its owner ends (``kill -9`` included) and it leaves no
file behind, so a folder is never wrongly "busy" after a crash. The snapshot export folder
(``core/snapshot/export_dir.py``) and the run directory (``core/runs/writer.py``) both use
it; a reader asks ``writer_present`` whether the folder still has a live writer.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from gradexplorer.core.messages.errors import UserError

# A reader's probe holds a shared lock for microseconds; a writer starting at that moment
# tries again for this long before calling the folder busy.
PROBE_GRACE_S = 0.5
BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class FolderLock:
    """An exclusive lock on ``directory`` (which must exist) while held."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, busy: str, what: str = "use") -> FolderLock:
        """Take the lock; a one-line UserError ``busy`` when another process holds it
        (``what``: the verb of the message when the folder cannot be opened at all)."""
        try:
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise UserError(f"cannot {what} {str(self.directory)!r}: {exc.strerror or exc}") from None
        deadline = time.monotonic() + PROBE_GRACE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno in BUSY and time.monotonic() < deadline:
                    time.sleep(0.01)  # a reader's probe ends within microseconds
                    continue
                os.close(fd)
                raise UserError(busy) from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the lock


def writer_present(directory: str | os.PathLike) -> bool:
    """Whether a live process holds ``directory``'s FolderLock (True when it cannot be told)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False  # the folder is gone: nobody writes it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True  # held, or a file system without flock: assume a writer
    finally:
        os.close(fd)  # releases the shared lock at once
    return False
