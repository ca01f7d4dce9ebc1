"""How every view writes a number: compact significant digits, exact zero as plain ``0``."""

from __future__ import annotations


def format_number(value: float | None, digits: int = 4) -> str:
    """``digits`` significant digits; "" for None; 0 (and -0) as ``0``, never ``0e+00``/``-0``."""
    if value is None:
        return ""
    return "0" if value == 0 else f"{value:.{digits}g}"


def update_ratio_text(value: float | None, digits: int = 4) -> str:
    """‖Δθ‖/‖θ‖: ``new (θ was 0)`` where the weight was all zeros before the step (the ratio is
    infinite there; a bare ``inf`` reads as an explosion)."""
    if value is not None and value == float("inf"):
        return "new (θ was 0)"
    return format_number(value, digits)
