"""Exports that appear whole or not at all: written into a hidden staging folder beside where
they go (same filesystem), moved into place only once complete.

The staging folder is ``DEST/.NAME.partial-PID-HEX`` (the naming of ``core/snapshot/
export_dir.py``'s leftovers): a reader never takes it for a run (its files carry no
reader's name until moved), an export killed mid-way leaves only it, and the next export of
the same ``NAME`` into ``DEST`` removes the ones whose process is gone. A full disk or an
unwritable folder is a one-line UserError; an interrupt removes the staging folder and goes on.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot.export_dir import LEFTOVER, process_alive


def remove_dead_staging(directory: Path, name: str) -> list[Path]:
    """Remove ``directory``'s staging folders for ``name`` whose writer process is gone."""
    removed = []
    for path in directory.iterdir() if directory.is_dir() else []:
        match = LEFTOVER.match(path.name)
        if (match is None or match.group("name") != name or match.group("kind") != "partial"
                or match.group("pid") is None or not path.is_dir()):
            continue
        if int(match.group("pid")) != os.getpid() and process_alive(int(match.group("pid"))):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


@contextlib.contextmanager
def staged_folder(directory: str | os.PathLike, name: str, what: str) -> Iterator[Path]:
    """A fresh staging folder in ``directory`` for the export ``name``; the block moves its
    finished files into place. Removed when the block ends, however it ends; an OSError in
    the block becomes ``cannot write WHAT to DIRECTORY: REASON``."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"cannot write {what} to {str(directory)!r}: a file is in the way")
    staging = directory / f".{name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        remove_dead_staging(directory, name)
        staging.mkdir()
        yield staging
    except OSError as exc:
        raise UserError(f"cannot write {what} to {str(directory)!r}: "
                        f"{exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
