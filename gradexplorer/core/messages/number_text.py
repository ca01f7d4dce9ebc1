"""How gradexplorer writes a figure for people, wherever it is shown (the app, the command
line's tables, the HTML report): compact significant digits, exact zero as plain ``0``, NaN as
``NaN``, ±infinity as ``inf``/``-inf``. Files meant for programs (CSV, JSON) keep their own
spelling of these."""

from __future__ import annotations


def format_number(value: float | None, digits: int = 4, none: str = "") -> str:
    """``digits`` significant digits; ``none`` for None; 0 (and -0) as ``0``, never
    ``0e+00``/``-0``; NaN as ``NaN``, ±inf as ``inf``/``-inf``."""
    if value is None:
        return none
    if value != value:
        return "NaN"
    return "0" if value == 0 else f"{value:.{digits}g}"
