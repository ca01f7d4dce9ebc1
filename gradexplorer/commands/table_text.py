"""Plain-text tables and number formatting for snapshot commands."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gradexplorer.core.messages.number_text import format_number
from gradexplorer.core.messages.printable import printable


def number(value: float | int | None, digits: int = 4) -> str:
    """Compact figure as every view writes it (``format_number``: ``0.0123``, ``1.2e-07``,
    ``NaN``, ``inf``), ``—`` for None; a count (an int) whole, with thousands separators."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return format_number(value, digits, none="—")


def update_ratio(value: float | None) -> str:
    """‖Δθ‖/‖θ‖ for a table: ``new (θ was 0)`` where the weight was all zeros before the step
    (the ratio is infinite there, and a bare ``inf`` reads as an explosion)."""
    if value is not None and math.isinf(value):
        return "new (θ was 0)"
    return number(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """Columns padded to width; the first ``left`` columns left-aligned, the rest right.
    Control and bidi characters in a cell (a crafted parameter name) are shown escaped."""
    cells = [[printable(c) for c in r] for r in (headers, *rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        pairs = enumerate(zip(r, widths, strict=True))
        parts = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in pairs]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
