"""Run deep recursive work (autograd graphs of tens of thousands of nodes) on a large stack.

Building, walking and freeing a very deep autograd graph recurses in native code; on the
main thread's 8 MB stack a 15,000-block residual MLP overflows it and the process dies with
a segmentation fault. A thread with an explicit, large stack (address space only: pages are
touched as they are used) removes that limit for every size the examples accept.
"""

from __future__ import annotations

import ctypes
import threading
import warnings
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEEP_STACK_BYTES = 2 << 30  # 2 GiB of address space: enough for example:deep's 200,000 blocks
INTERRUPT_GRACE_S = 10.0  # how long an interrupted worker gets to clean up


def _raise_in(thread: threading.Thread, kind: type[BaseException]) -> None:
    """Raise ``kind`` in ``thread`` at its next Python instruction."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(kind))


def stack_that_starts(preferred: int = DEEP_STACK_BYTES) -> int | None:
    """The stack size a new thread can have now: ``preferred``, else 0 (the default), else None.

    Under an address-space limit (``ulimit -v``) a thread with a 2 GiB stack cannot be created,
    and a thread pool asked for one waits forever for a thread that never started. A short-lived
    probe thread tells which size starts (an address-space reservation, freed when it ends).
    """
    previous = threading.stack_size()
    try:
        for size in (preferred, 0):
            try:
                threading.stack_size(size)
                probe = threading.Thread(target=lambda: None, name="gradexplorer-stack-probe")
                probe.start()
            except (RuntimeError, ValueError, MemoryError):
                continue
            probe.join()
            return size
        return None
    finally:
        threading.stack_size(previous)


def run_with_deep_stack(fn: Callable[[], T], stack_bytes: int = DEEP_STACK_BYTES) -> T:
    """``fn()`` on a thread with a ``stack_bytes`` stack; its result, or its exception re-raised.

    The caller waits in short slices so that Ctrl+C (or a signal handler's exception) still
    reaches it; that exception is passed on into the worker, whose ``finally`` blocks (a
    half-written snapshot removed, a folder lock released) run before the caller re-raises.
    """
    outcome: dict[str, object] = {}
    done = threading.Event()  # not Thread.join: an interrupted join can misreport is_alive

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
            outcome["error"] = exc
        finally:
            done.set()

    previous = threading.stack_size()
    threading.stack_size(stack_bytes)
    try:
        worker = threading.Thread(target=target, name="gradexplorer-deep-stack", daemon=True)
        worker.start()
    except RuntimeError as exc:  # "can't start new thread": no room for the big stack
        warnings.warn(f"gradexplorer: cannot start a thread with a {stack_bytes >> 20} MB stack "
                      f"({exc}); working on this thread (a very deep graph may not fit its "
                      "stack)", RuntimeWarning, stacklevel=2)
        return fn()
    finally:
        threading.stack_size(previous)
    try:
        while not done.wait(0.2):
            pass
    except BaseException as exc:
        if not done.is_set():
            _raise_in(worker, type(exc))
            done.wait(INTERRUPT_GRACE_S)
        raise
    if "error" in outcome:
        error = outcome["error"]
        assert isinstance(error, BaseException)
        raise error.with_traceback(error.__traceback__)
    return outcome["value"]  # type: ignore[return-value]
