"""How every view writes a number: ``format_number`` (the one formatter, ``core/messages/number_text.py``),
and the words for a gradient holding NaN/Inf and for a weight that was zero."""

from __future__ import annotations

from gradexplorer.core.messages.number_text import format_number

__all__ = ["WIDEST_FIGURES", "format_number", "gradient_number", "nonfinite_word", "update_ratio_text"]

WIDEST_FIGURES = ("1.23e-05", "0.000123")  # a 3-digit figure at its widest: columns fit both


def nonfinite_word(stats) -> str | None:
    """What a gradient holding NaN or ±Inf really has as its norm and max |g|: ``NaN`` when any
    element is NaN, else ``inf``; None for a finite gradient (or none). ParamStats figures
    cover the finite elements only, so a NaN gradient's own ``norm`` may be 0."""
    if stats is None:
        return None
    if getattr(stats, "nan_count", None):
        return "NaN"
    return "inf" if getattr(stats, "inf_count", None) else None


def gradient_number(stats, value: float | None, digits: int = 4) -> str:
    """A norm or max |g| of ``stats`` as every view writes it: ``NaN``/``inf`` for a gradient
    holding them (never the finite part's figure), else ``format_number``."""
    return nonfinite_word(stats) or format_number(value, digits)


def update_ratio_text(value: float | None, digits: int = 4) -> str:
    """‖Δθ‖/‖θ‖: ``new (θ was 0)`` where the weight was all zeros before the step (the ratio is
    infinite there; a bare ``inf`` reads as an explosion)."""
    if value is not None and value == float("inf"):
        return "new (θ was 0)"
    return format_number(value, digits)
