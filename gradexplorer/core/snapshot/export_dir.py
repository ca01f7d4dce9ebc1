"""The folder a run exports snapshots to: checked before step 1, owned by one run at a time.

``ExportFolder.claim()`` runs before training: it refuses a path under a file or not writable,
a run directory or snapshot folder or a path inside one (``core/files/output_path.py``), a folder
that holds another run's snapshots (unless ``overwrite``), and a folder another live run is
exporting to (``core/files/folder_lock.py``: an advisory ``flock`` on the folder itself, released by
the kernel however the owner dies, leaving no file behind); it removes the hidden
``.partial``/``.old`` folders that runs killed mid-write left behind. ``release()`` gives the
folder up and tidies what this process itself may have left mid-write (an interrupt can land
inside a writer's own clean-up); ``remove_own_leftovers()`` does the same for every folder this
process claimed, from the main thread once a command has ended, however it ended.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from gradexplorer.core.files.folder_lock import FolderLock
from gradexplorer.core.files.output_path import refuse_inside_runs
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot import format as F

LEFTOVER = re.compile(
    r"^\.(?P<name>.+)\.(?P<kind>partial|old)-(?:(?P<pid>\d+)-)?[0-9a-f]+$")
CLAIMED: set[Path] = set()  # every folder this process has claimed


def remove_own_leftovers(directories=None) -> None:
    """Tidy what this process left mid-write in ``directories`` (default: every folder it
    claimed): an unfinished ``.partial`` folder is removed; a snapshot moved aside to ``.old``
    goes back if its replacement never arrived, else it is removed. Nothing half-written stays
    and no finished snapshot is lost."""
    mine = str(os.getpid())
    for directory in list(CLAIMED if directories is None else directories):
        for path in directory.iterdir() if directory.is_dir() else []:
            match = LEFTOVER.match(path.name)
            if match is None or match.group("pid") != mine or not path.is_dir():
                continue
            target = directory / match.group("name")
            if match.group("kind") == "old" and not target.exists():
                os.rename(path, target)
            else:
                shutil.rmtree(path, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether a process with id ``pid`` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def snapshot_folders(directory: Path) -> list[Path]:
    """The finished snapshots (``step-*`` folders with a manifest) directly in ``directory``."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir()
                  if p.name.startswith(F.SNAPSHOT_PREFIX) and (p / F.MANIFEST_FILE).is_file())


def remove_leftovers(directory: Path) -> list[Path]:
    """Remove ``.partial``/``.old`` folders whose writer is gone; return what was removed.

    A name carries its writer's process id; one without (older versions) is removed only
    when the caller holds the folder's lock, which it does when it calls this.
    """
    removed = []
    for path in directory.iterdir() if directory.is_dir() else []:
        match = LEFTOVER.match(path.name)
        if match is None or not path.is_dir():
            continue
        pid = match.group("pid")
        if pid is not None and int(pid) != os.getpid() and process_alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


class ExportFolder:
    """One run's claim on a snapshot folder (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike, overwrite: bool = False,
                 overwrite_hint: str = "give --overwrite to replace them") -> None:
        self.directory = Path(directory)
        self.overwrite, self.overwrite_hint = overwrite, overwrite_hint
        self.removed: list[Path] = []  # leftovers and, with overwrite, earlier snapshots
        self._folder_lock: FolderLock | None = None

    def claim(self) -> ExportFolder:
        """Check, create and lock the folder; a one-line UserError when it cannot be used."""
        directory = self.directory
        refuse_inside_runs(directory, "export to")
        existing = next((f for f in (directory, *directory.parents) if f.exists()), Path("."))
        if not existing.is_dir():
            raise UserError(f"cannot export to {str(directory)!r}: {str(existing)!r} is a file, "
                            "not a folder")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create export folder {str(directory)!r}: "
                            f"{exc.strerror or exc}") from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise UserError(f"cannot export to {str(directory)!r}: the folder is not writable")
        self._lock()
        CLAIMED.add(directory)
        try:
            self._check_earlier_snapshots()
            self.removed += remove_leftovers(directory)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        """Tidy this process's own leftovers and give up the folder."""
        if self._folder_lock is not None:
            try:
                remove_own_leftovers([self.directory])
            finally:
                self._folder_lock.release()
                self._folder_lock = None

    def __enter__(self) -> ExportFolder:
        return self.claim()

    def __exit__(self, *exc) -> None:
        self.release()

    def _lock(self) -> None:
        self._folder_lock = FolderLock(self.directory).acquire(
            f"another gradexplorer run is exporting to {str(self.directory)!r}; "
            "export this one to another folder", what="export to")

    def _check_earlier_snapshots(self) -> None:
        earlier = snapshot_folders(self.directory)
        if not earlier:
            return
        if not self.overwrite:
            names = ", ".join(p.name for p in earlier[:3]) + (" …" if len(earlier) > 3 else "")
            raise UserError(
                f"{str(self.directory)!r} already holds {len(earlier)} snapshot(s) of an earlier "
                f"run ({names}); export to another folder, or {self.overwrite_hint}"
            )
        for path in earlier:
            shutil.rmtree(path)
        self.removed += earlier
