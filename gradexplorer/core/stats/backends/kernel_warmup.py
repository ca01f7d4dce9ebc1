"""Numba kernels made ready off the training thread, with an exact fallback meanwhile.

Numba compiles a kernel on its first call and keeps it in its on-disk cache (``__pycache__``
beside the sources, or ``NUMBA_CACHE_DIR``). Where that cache is cold (a fresh installation, a
changed source) compiling takes seconds; where it is warm, importing Numba and setting up its
CPU target still costs about a second of CPU in every new process (``bench/first_step.py``).
Neither should happen inside the user's loop.

A ``KernelWarmup`` starts that work on a daemon thread the first time ``ready()`` is asked, and
answers without waiting: False until the kernels are loaded, meanwhile the caller computes with
its fallback (torch or numpy: the same figures, see each caller). A cold cache is filled first by
a helper Python process (the parent's ``sys.path`` and environment: the same cache; at a lower
priority), which holds neither this process's GIL nor Numba's compiler lock; the thread then
loads the kernels from the cache, or compiles them itself where no helper could (a frozen
application). ``compile_kernels`` (the module's function the helper and the thread call) runs
every kernel on made-up figures for the argument types real steps pass; inside it,
``ready()`` is True (``compiling``), so the callers' own code paths reach the kernels.

A warm-up that fails is told once as a warning and the fallback goes on. In a child forked
while the warm-up ran, the thread does not exist: the child keeps to the fallback.
``GRADEXPLORER_KERNELS=wait`` makes ``ready()`` wait for the warm-up instead (the figures of
every step from the kernels, the first step paying for them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from importlib import import_module

from gradexplorer.core.messages.errors import first_line

HELPER = ("import json, os, sys; sys.path[:] = json.loads(sys.argv[1]); os.nice(10); "  # yields a core
          "from importlib import import_module; import_module(sys.argv[2]).compile_kernels()")
HELPER_TIMEOUT = 600  # seconds; a helper stuck beyond is killed and the thread compiles instead
WAIT_VARIABLE = "GRADEXPLORER_KERNELS"  # "wait": ready() waits for the warm-up
_HERE = threading.local()  # .compiling: this thread runs a compile_kernels
_HELD: set = set()  # who holds every warm-up back (hold_warmups)
_WAITING: list = []  # the warm-ups asked for while held, started by release_warmups


class KernelWarmup:
    """The warm-up of the kernels ``module.compile_kernels()`` readies (it returns what the
    callers use, None where Numba cannot load) on a thread named ``thread_name``; ``cached()``,
    on that thread: whether Numba's cache already holds them (else a helper process compiles
    them first); ``fallback``: what a failed warm-up's warning says goes on instead."""

    def __init__(self, module: str, what: str, cached: Callable[[], bool], thread_name: str,
                 fallback: str) -> None:
        self.module, self.what, self.cached = module, what, cached
        self.thread_name, self.fallback = thread_name, fallback  # fallback: the warning's end
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self.kernels = None  # compile_kernels's result once done (None: the fallback for good)
        if hasattr(os, "register_at_fork"):  # POSIX
            os.register_at_fork(after_in_child=self._after_fork_in_child)

    def ready(self) -> bool:
        """True once the kernels are loaded (and on a thread running ``compile_kernels``); the
        first call starts the warm-up. Never waits, unless ``GRADEXPLORER_KERNELS=wait``."""
        if getattr(_HERE, "compiling", False):
            return True
        if self._thread is None and _HELD and os.environ.get(WAIT_VARIABLE) != "wait":
            if self not in _WAITING:
                _WAITING.append(self)
            return False
        if self._thread is None:
            self._start()
            if os.environ.get(WAIT_VARIABLE) == "wait":
                self.wait()
        return self._done.is_set() and self.kernels is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) for a started warm-up to end; True when none is
        at work."""
        thread = self._thread
        if thread is not None and thread.ident is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._warm_up, name=self.thread_name,
                                                daemon=True)
                try:
                    self._thread.start()
                except RuntimeError:  # no thread to be had: the fallback for good
                    self._done.set()

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        finished, self._done = self._done.is_set(), threading.Event()
        if self._thread is not None:
            if not finished:
                self.kernels = None
            self._done.set()

    def _warm_up(self) -> None:
        kernels = None
        try:
            if not self.cached():
                self._compile_in_helper()
            kernels = import_module(self.module).compile_kernels()
        except Exception as exc:  # noqa: BLE001 - the fallback goes on
            warnings.warn(f"gradexplorer: the {self.what} kernels could not be compiled "
                          f"({first_line(exc)}); {self.fallback}", RuntimeWarning, stacklevel=1)
        finally:
            self.kernels = kernels
            self._done.set()

    def _compile_in_helper(self) -> None:
        """``compile_kernels`` in a helper Python process (not where this process is a frozen
        application); a helper that fails leaves the work to the warm-up thread."""
        if getattr(sys, "frozen", False) or not sys.executable:
            return
        try:
            subprocess.run([sys.executable, "-c", HELPER,
                            json.dumps([p for p in sys.path if isinstance(p, str)]), self.module],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=HELPER_TIMEOUT, check=False)
        except (OSError, subprocess.SubprocessError):
            pass  # compiled on the warm-up thread instead


def hold_warmups(holder: object) -> None:
    """No warm-up starts while ``holder`` holds them (the app's start: its CPU goes to the
    window, the model, its first view and its plots; the fallback measures meanwhile)."""
    _HELD.add(id(holder))


def release_warmups(holder: object) -> None:
    """``holder`` lets go; once nobody holds them, the warm-ups asked for meanwhile start."""
    _HELD.discard(id(holder))
    while not _HELD and _WAITING:
        _WAITING.pop(0)._start()


@contextmanager
def compiling():
    """Within ``compile_kernels``: every ``ready()`` asked on this thread is True."""
    before = getattr(_HERE, "compiling", False)
    _HERE.compiling = True
    try:
        yield
    finally:
        _HERE.compiling = before


def index_files_exist(kernels) -> bool:
    """Whether Numba's cache holds an index for each of ``kernels`` (dispatchers)."""
    try:
        return all(os.path.exists(k._cache._cache_file._index_path) for k in kernels)
    except AttributeError:  # another Numba's insides: take it as cold
        return False
