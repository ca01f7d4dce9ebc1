"""This process's open run writers, by run directory: a reader in the same process flushes the
writer of the run it opens, and every open writer commits what it was given at interpreter exit.

Kept apart from the writer (``writer.py``) so the reader (``run.py``) needs only this registry,
not the writer: no import circle between the reader and the writer."""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any

OPEN: dict[Path, Any] = {}  # resolved run directory -> its RunWriter (anything with flush())


@atexit.register
def _flush_open_writers() -> None:
    """At interpreter exit, commit what open writers were given (a script that never called
    ``rec.close()`` keeps every step, as when each step was committed at once)."""
    for writer in list(OPEN.values()):
        writer.flush()


def flush_writer_of(run_dir: str | Path) -> None:
    """Wait until this process's writer of ``run_dir`` (if any) has committed what it was
    given, so a reader in the same process sees every step written so far."""
    writer = OPEN.get(Path(run_dir).resolve())
    if writer is not None:
        writer.flush()
