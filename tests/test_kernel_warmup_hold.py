"""Warm-ups held back while the app starts (kernel_warmup.hold_warmups, app.collect_after_first_graph):
asked for meanwhile, they answer False (the caller's exact fallback) and start once released."""

from __future__ import annotations

import threading

from gradexplorer.core.stats.backends.kernel_warmup import KernelWarmup, hold_warmups, release_warmups

CALLS: list[str] = []


def compile_kernels() -> str:
    """What the warm-up thread runs (this module stands in for a kernels module)."""
    CALLS.append(threading.current_thread().name)
    return "kernels"


def running(name: str) -> bool:
    return any(t.name == name for t in threading.enumerate())


def test_a_held_warm_up_starts_only_once_every_holder_lets_go(monkeypatch):
    monkeypatch.delenv("GRADEXPLORER_KERNELS")  # (the tests' conftest waits for warm-ups)
    warmup = KernelWarmup(__name__, "test", lambda: True, "gx-held-kernels", "the fallback measures")
    first, second = object(), object()
    hold_warmups(first)
    hold_warmups(second)
    assert warmup.ready() is False and warmup.ready() is False
    assert not running("gx-held-kernels") and CALLS == []
    release_warmups(first)
    assert warmup.ready() is False and not running("gx-held-kernels") and CALLS == []
    release_warmups(second)  # the last holder: the warm-up asked for meanwhile starts now
    assert warmup.wait(30)
    assert warmup.ready() is True and warmup.kernels == "kernels" and CALLS == ["gx-held-kernels"]
