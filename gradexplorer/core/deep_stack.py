"""Run deep recursive work (autograd graphs of tens of thousands of nodes) on a large stack.

Building, walking and freeing a very deep autograd graph recurses in native code; on the
main thread's 8 MB stack a 15,000-block residual MLP overflows it and the process dies with
a segmentation fault. A thread with an explicit, large stack (address space only: pages are
touched as they are used) removes that limit for every size the examples accept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEEP_STACK_BYTES = 2 << 30  # 2 GiB of address space: enough for example:deep's 200,000 blocks


def run_with_deep_stack(fn: Callable[[], T], stack_bytes: int = DEEP_STACK_BYTES) -> T:
    """``fn()`` on a thread with a ``stack_bytes`` stack; its result, or its exception re-raised.

    The caller waits in short slices so that Ctrl+C still reaches it as KeyboardInterrupt.
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
            outcome["error"] = exc

    previous = threading.stack_size()
    threading.stack_size(stack_bytes)
    try:
        worker = threading.Thread(target=target, name="gradexplorer-deep-stack", daemon=True)
        worker.start()
    finally:
        threading.stack_size(previous)
    while worker.is_alive():
        worker.join(0.2)
    if "error" in outcome:
        error = outcome["error"]
        assert isinstance(error, BaseException)
        raise error.with_traceback(error.__traceback__)
    return outcome["value"]  # type: ignore[return-value]
