"""Where a command may write: never over what the user owns unless asked, never into a run.

Every output a command names (``report --out``, ``export … DEST``, ``graph --out``,
``--screenshot``, ``run --export DIR``) passes one of these checks before any work starts:

- it is not, and does not lie inside, a run directory (a folder holding ``run.sqlite``) or a
  snapshot folder (``step-NNNNNN`` holding ``manifest.json``): a report written over
  ``RUN/run.sqlite`` would destroy the run;
- an output file that exists must be a regular file (a device such as ``/dev/full``, a
  folder or a fifo is refused: the atomic rename would replace it), and is replaced only with
  ``overwrite`` (``--overwrite``);
- its folder exists and is writable (``core.files.atomic_file.check_writable_file``).

Each refusal is one line (a ``UserError``: exit status 2).
"""

from __future__ import annotations

import os
from pathlib import Path

from gradexplorer.core.files.atomic_file import check_replaceable, check_writable_file
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.schema import is_run_dir
from gradexplorer.core.snapshot.format import MANIFEST_FILE, SNAPSHOT_PREFIX


def is_snapshot_dir(path: Path) -> bool:
    """True when ``path`` is a snapshot folder (``step-…`` holding its manifest)."""
    return path.name.startswith(SNAPSHOT_PREFIX) and (path / MANIFEST_FILE).is_file()


def owning_folder(path: str | os.PathLike) -> tuple[str, Path] | None:
    """The run directory or snapshot folder that ``path`` is or lies inside, with its kind
    ("run directory" or "snapshot folder"); None when there is none. Links are followed."""
    resolved = Path(os.path.realpath(path))
    for folder in (resolved, *resolved.parents):
        if folder.is_dir() and is_run_dir(folder):
            return "run directory", folder
        if folder.is_dir() and is_snapshot_dir(folder):
            return "snapshot folder", folder
    return None


def refuse_inside_runs(path: str | os.PathLike, what: str = "write") -> None:
    """A one-line UserError when ``path`` is or lies inside a run directory or snapshot folder."""
    owner = owning_folder(path)
    if owner is None:
        return
    kind, folder = owner
    where = f"is the {kind}" if Path(os.path.realpath(path)) == folder else \
        f"lies inside the {kind} {str(folder)!r}"
    raise UserError(f"cannot {what} {str(path)!r}: it {where}, which it would damage; "
                    "give a path outside it")


def check_output_file(path: str | os.PathLike, *, overwrite: bool = False,
                      make_folders: bool = False) -> Path:
    """``path`` as a Path when a command may write its file there (see the module docstring);
    else a one-line UserError. ``make_folders``: missing folders will be created."""
    path = Path(path)
    refuse_inside_runs(path)
    if check_replaceable(path) and not overwrite:
        raise UserError(f"{str(path)!r} already exists; --overwrite replaces it")
    return check_writable_file(path, make_folders=make_folders)


def check_output_folder(path: str | os.PathLike) -> Path:
    """``path`` as a Path when a command may write into that folder: not a run directory or
    snapshot folder nor inside one, and not a file; else a one-line UserError."""
    path = Path(path)
    refuse_inside_runs(path, "write into")
    if path.exists() and not path.is_dir():
        raise UserError(f"cannot write into {str(path)!r}: it is a file, not a folder")
    return path
