"""``gc_paused()``: Python's cyclic garbage collector paused around work that makes many
objects and keeps them a while (a graph's nodes; a whole run's rows read in bulk), so that the
collector's passes over everything alive (a full one walks torch's objects too) are not run
again and again inside it. Nothing such work makes needs the cycle collector: its objects are
freed by their counts as usual."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (re-enabled only if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
