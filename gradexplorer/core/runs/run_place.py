"""Is the run directory still the one a writer opened? Checked once a step on the writer thread
(and before each snapshot), so a run deleted or replaced mid-training stops its recording in
one line instead of writing on into a database nobody will see, or creating folders anew.

The writer keeps the database file open (``RunPlace``), so its inode cannot be reused while it
lives: ``RUN/run.sqlite`` naming another file (or none) means the directory was deleted or
replaced. A ``snapshots`` that is a symbolic link is refused: snapshots are written into a
folder of the run's own, never through a link into someone else's.
"""

from __future__ import annotations

import os
from pathlib import Path

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs import schema as S


class RunDirectoryGone(Exception):
    """The run directory was deleted or replaced; ``step`` is the step that noticed."""

    def __init__(self, step: int | None) -> None:
        super().__init__(f"the run directory was deleted or replaced at step {step}")
        self.step = step


def refuse_linked_snapshots(run_dir: Path) -> None:
    """A one-line UserError when ``RUN/snapshots`` is a symbolic link."""
    link = run_dir / S.SNAPSHOTS
    if link.is_symlink():
        raise UserError(f"{str(link)!r} is a symbolic link; gradexplorer writes snapshots into a "
                        "folder of the run's own: remove the link, or record into another run_dir")


class RunPlace:
    """The identity of an open run's database file, held open until ``close()``."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._path = os.fspath(S.database_path(run_dir))  # stat()ed once a transaction: no Path built
        self._fd: int | None = os.open(self._path, os.O_RDONLY)
        st = os.fstat(self._fd)
        self._identity = (st.st_dev, st.st_ino)

    def check(self, step: int | None) -> None:
        """Raise RunDirectoryGone unless ``RUN/run.sqlite`` is still the file opened."""
        try:
            st = os.stat(self._path)
        except OSError:
            raise RunDirectoryGone(step) from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise RunDirectoryGone(step)

    def snapshot_dir(self, step: int | None) -> Path:
        """``RUN/snapshots`` once checked: the run still in place, the folder no link."""
        self.check(step)
        refuse_linked_snapshots(self.run_dir)
        return self.run_dir / S.SNAPSHOTS

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
