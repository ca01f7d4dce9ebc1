"""A native crash (a segfault in Qt or torch) leaves every thread's Python stack in a log file.

``faulthandler`` writes there only when the process dies of a fatal signal; the About box names
the file, so that a bug report can carry it. The file lives in the app's data folder
(``$XDG_DATA_HOME/gradexplorer`` on Linux) and is started afresh once it passes ``MAX_BYTES``.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QStandardPaths

from gradexplorer._version import __version__

MAX_BYTES = 1_000_000
_file = None  # kept open for the process's lifetime: faulthandler writes to its descriptor


def crash_log_path() -> Path:
    """Where a native crash's stacks are written."""
    data = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericDataLocation)
    return Path(data or Path.home()) / "gradexplorer" / "crash.log"


def start_crash_log(path: Path | None = None) -> Path | None:
    """Send ``faulthandler``'s dump of a fatal signal to the crash log; returns its path, or
    None when the folder cannot be written (the app still starts, dumps go to stderr)."""
    global _file
    path = path or crash_log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > MAX_BYTES:
            path.replace(path.with_suffix(".log.old"))
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the whole process
        handle.write(f"-- gradexplorer {__version__} started {datetime.now():%Y-%m-%d %H:%M:%S} "
                     f"(pid {os.getpid()}); a crash's stacks follow this line --\n")
        handle.flush()
    except OSError as exc:
        print(f"gradexplorer: no crash log ({exc.strerror or exc}: {path})", file=sys.stderr)
        return None
    faulthandler.enable(file=handle, all_threads=True)
    if _file is not None:
        _file.close()
    _file = handle
    return path
