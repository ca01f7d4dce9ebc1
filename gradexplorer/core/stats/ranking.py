"""Parameters in the order a user asks for: model order, largest norm, largest max |g|, largest
update ratio, NaN/Inf first (the small-multiples grid, tables and reports share it). A
gradient holding NaN or Inf is the largest under every "largest" order: its norm is NaN/inf,
not the finite part's figure."""

from __future__ import annotations

import math
from collections.abc import Mapping

from gradexplorer.core.stats.records import ParamStats

RANKINGS = {"model order": None, "largest norm": "norm", "largest max |g|": "abs_max",
            "largest update ratio": "update_ratio", "NaN/Inf first": "nonfinite"}


def _value(s: ParamStats, field: str) -> float:
    """The figure to sort on: a NaN/Inf gradient's norm and max |g| (and any NaN or inf figure)
    as the largest, no gradient or no value last."""
    if field == "nonfinite":
        return float((s.nan_count or 0) + (s.inf_count or 0))
    v = s.whole(field)
    if v is None or not s.has_grad:
        return -math.inf
    return math.inf if math.isnan(v) else float(v)


def rank_parameters(params: Mapping[str, ParamStats], ranking: str = "model order",
                    text: str = "") -> list[str]:
    """Names of ``params`` whose name holds ``text`` (any case), in ``ranking`` order (one of
    RANKINGS; ties keep model order). ``NaN/Inf first`` then goes by largest norm."""
    if ranking not in RANKINGS:
        raise ValueError(f"unknown ranking {ranking!r}; one of {', '.join(RANKINGS)}")
    needle = text.strip().lower()
    names = [n for n in params if needle in n.lower()]
    field = RANKINGS[ranking]
    if field is None:
        return names
    if field == "nonfinite":
        return sorted(names, key=lambda n: (-_value(params[n], field), -_value(params[n], "norm")))
    return sorted(names, key=lambda n: -_value(params[n], field))
