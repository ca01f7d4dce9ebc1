"""Loading torch's main native library on a thread of its own while the window shows.

``import torch`` spends about a fifth of its time in ``dlopen`` of ``libtorch_cpu`` (a 400 MB
library: mapping, relocations, static constructors), which holds Python's interpreter lock
when the import does it. Called through ``ctypes`` as a foreign function, ``dlopen`` runs
without that lock, so the library can be loaded on the second core while the GUI thread shows
and paints the window; the training thread's ``import torch`` then finds it loaded. Nothing of
torch's Python side runs early.

The loader holds its own lock through a ``dlopen`` (the library's static constructors: most
of the time), and the GUI thread takes it too, not only to open a library (a module with a
native extension, a Qt plugin) but the first time a thread-local object of Qt's is made (its
destructor registered: building the window does, for its animations' timer). So this starts
once the window is built, before it is shown and painted, which takes that lock no more.
It only pays with a core to spare: on a machine whose cores are all busy (load average) the
thread would take its CPU time from the window's, so then it is not started.
"""

from __future__ import annotations

import os
import sys
import threading
from importlib.machinery import PathFinder
from pathlib import Path

LIBRARY = {"linux": "libtorch_cpu.so", "darwin": "libtorch_cpu.dylib"}  # (dlopen: not Windows)


def torch_library() -> Path | None:
    """The path of torch's main native library, or None: found on ``sys.path`` by the path
    finder alone (no import hook is asked, as for an import: torch is not being imported)."""
    name = next((lib for prefix, lib in LIBRARY.items() if sys.platform.startswith(prefix)), None)
    try:
        spec = PathFinder.find_spec("torch")
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    paths = [Path(folder) / "lib" / name for folder in folders if name]
    return next((path for path in paths if path.is_file()), None)


def core_to_spare() -> bool:
    """Whether a core is likely idle besides the one the GUI thread uses: two cores or more,
    and the last minute's load average under the cores less a half (where the system tells
    no load average, e.g. Windows: two cores or more)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return cores >= 2 and load < cores - 0.5


def preload_torch_library() -> threading.Thread | None:
    """Start loading torch's main native library on a daemon thread (unless torch is imported
    already, its library is not found, or no core is to spare); returns the thread, or None."""
    if "torch" in sys.modules or not core_to_spare():
        return None
    path = torch_library()
    if path is None:
        return None
    thread = threading.Thread(target=_load, args=(path,), name="torch-preload", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # "can't start new thread": torch's own import loads it, later
        return None
    return thread


def _load(path: Path) -> None:
    """``dlopen`` the library, kept loaded (torch's own import opens the same file). Called as
    a foreign function: ``ctypes`` releases the interpreter lock around the call (its own
    ``ctypes.CDLL`` holds it while the library loads, which would stall the GUI thread)."""
    import ctypes

    try:
        dlopen = ctypes.CDLL(None).dlopen
    except (AttributeError, OSError):
        return
    dlopen.restype, dlopen.argtypes = ctypes.c_void_p, (ctypes.c_char_p, ctypes.c_int)
    dlopen(os.fsencode(path), os.RTLD_NOW | os.RTLD_LOCAL)  # NULL when it fails: torch says why
