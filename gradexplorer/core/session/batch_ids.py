"""A session step's batch identity (``StepResult.batch``: ``{"make_batch": N}``, or the list
of its micro-batches' indices) in words, for the lines and views that name it (no torch)."""

from __future__ import annotations

from typing import Any


def batch_text(batch: Any) -> str | None:
    """``make_batch(7)``, ``make_batch(8–11)`` (a step's consecutive micro-batches) or
    ``make_batch(3, 9)``: a session's batch identity (``StepResult.batch``) in words; None for
    another identity (the ids ``watch`` noted)."""
    index = batch.get("make_batch") if isinstance(batch, dict) else None
    if isinstance(index, int):
        return f"make_batch({index})"
    if isinstance(index, list) and index and all(isinstance(i, int) for i in index):
        run = index == list(range(index[0], index[0] + len(index))) and len(index) > 2
        return f"make_batch({index[0]}–{index[-1]})" if run else \
            f"make_batch({', '.join(map(str, index))})"
    return None
