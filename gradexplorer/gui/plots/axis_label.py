"""Axis labels that fit their axis: a label longer than the axis loses words, never its scale.

pyqtgraph centres an axis label on its axis and lets it run past both ends: in a 100 px tall
plot "gradient value (x0.001)" shows as "gradient value", the scale that says what the tick
figures mean cut off. ``fitted_label`` picks the longest of ever shorter forms that fits
(``gradient value (×1e-3)``, ``value (×1e-3)``), then a smaller font, then the scale alone
(``(×1e-3)``); a count axis ``log10(1+count) auto`` becomes ``log10(1+n) auto``, then
``lg(1+n) auto``; the axis puts the full label in its tooltip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

SMALLEST_PX = 7  # a label's font is never made smaller than this


def compact_scale(units: str) -> str:
    """``(x0.001)`` → ``(×1e-3)``; other units (``(mV)``) as they are."""
    match = re.fullmatch(r"\(x([0-9.eE+-]+)\)", units)
    if not match:
        return units
    value = float(match.group(1))
    if value <= 0 or not math.isfinite(value):
        return units
    exponent = round(math.log10(value))
    if not math.isclose(10.0 ** exponent, value, rel_tol=1e-9):
        return units.replace("(x", "(×")
    return f"(×1e{exponent})"


def label_forms(text: str, units: str) -> list[str]:
    """Ever shorter forms of the label ``text units``, the full one first; the units (the scale
    of the tick figures) are in every form."""
    short = compact_scale(units)
    squeezed = text.replace(" + ", "+")
    words = squeezed.split(" ")
    forms = [f"{text} {units}", f"{text} {short}", f"{squeezed} {short}"]
    if "(" not in squeezed:  # "gradient value" → "value"; never a piece of "log10(1+count)"
        forms += [f"{' '.join(words[i:])} {short}" for i in range(1, len(words))]
    elif "log10(1+count)" in squeezed:  # the count axes: "lg(1+n) auto" still says all of it
        forms += [f"{squeezed.replace('(1+count)', '(1+n)')} {short}",  # (lg: ISO 80000-2's log10)
                  f"{squeezed.replace('log10(1+count)', 'lg(1+n)')} {short}"]
    forms.append(short if short else squeezed)
    out: list[str] = []
    for form in (f.strip() for f in forms):
        if form and form not in out:
            out.append(form)
    return out


def fitted_label(text: str, units: str, width: Callable[[str, float], float], room: float,
                 size_px: float) -> tuple[str, float]:
    """``(form, font px)``: the longest form of the label whose ``width(form, px)`` fits in
    ``room`` at ``size_px``; else its shortest form that still has words ("‖g‖ (×1e-3)") in a
    smaller font (down to SMALLEST_PX); else the scale alone, made smaller as needed."""
    forms = label_forms(text, units) or [""]
    with_words = forms[:-1] if units and len(forms) > 1 else forms
    for form in with_words:
        if width(form, size_px) <= room:
            return form, size_px
    worded = with_words[-1]
    for px in range(int(size_px) - 1, SMALLEST_PX - 1, -1):
        if width(worded, px) <= room:
            return worded, px
    px = size_px
    while px > SMALLEST_PX and width(forms[-1], px) > room:
        px = max(SMALLEST_PX, px - 1)
    return forms[-1], px
