"""Where two runs part: the first common step at which a figure differs beyond a tolerance.

Steps are aligned by number (``watch`` numbers optimizer steps), so runs of different lengths
or recording strides (``every``) are compared on the steps both recorded. At each step every
parameter's magnitude figures (FIGURES) and the global norm are compared by relative gap
``|a - b| / max(|a|, |b|)`` (0 when both are 0 or both NaN; 1 when only one is NaN or Inf);
the loss too when both runs recorded it over the same number of ranks (a DDP rank's loss is
its own shard's). The first step with a gap above ``tol`` is the divergence; its parameters
are ranked by their largest gap (equal to 3 digits: in the model's order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradexplorer.core.messages.errors import UserError

if TYPE_CHECKING:
    from gradexplorer.core.runs.run import Run

DEFAULT_TOL = 1e-3  # 0.1%: far above float64/float32 reduction-order noise, far below a real change
FIGURES = ("norm", "std", "abs_max", "update_ratio")  # magnitudes: mean/min/max cross zero
SIGNALS = ("loss", "global_norm")


def relative_gap(a: float | None, b: float | None) -> float:
    """``|a - b| / max(|a|, |b|)``; 0 for equal values (NaN = NaN), 1 when one side is
    missing, NaN or Inf and the other not."""
    if a is None and b is None:
        return 0.0
    if a is None or b is None:
        return 1.0
    if math.isnan(a) or math.isnan(b):
        return 0.0 if math.isnan(a) and math.isnan(b) else 1.0
    if a == b:
        return 0.0
    if math.isinf(a) or math.isinf(b):
        return 1.0
    return abs(a - b) / max(abs(a), abs(b))


@dataclass
class Divergence:
    """The result: ``step`` None when the runs stayed within ``tol`` on every common step."""

    step: int | None
    tol: float
    compared: list[int]
    ranking: list[dict[str, Any]] = field(default_factory=list)  # {name, figure, a, b, gap}
    signals: dict[str, dict[str, Any]] = field(default_factory=dict)  # loss, global_norm

    @property
    def diverged(self) -> bool:
        return self.step is not None


def _as_run(run: Run | str | Path) -> Run:
    from gradexplorer.core.runs.run import Run, open_run  # (numpy: not for DEFAULT_TOL)

    return run if isinstance(run, Run) else open_run(run)


def _gaps(a: Run, b: Run, step: int, with_loss: bool) -> tuple[list, dict]:
    """(per-parameter worst figure, signal gaps) at ``step``."""
    stats_a, stats_b = a.figures(step), b.figures(step)
    rows = []
    for name in list(stats_a) + [n for n in stats_b if n not in stats_a]:
        sa, sb = stats_a.get(name, {}), stats_b.get(name, {})
        worst = max(({"name": name, "figure": f, "a": sa.get(f), "b": sb.get(f),
                      "gap": relative_gap(sa.get(f), sb.get(f))} for f in FIGURES),
                    key=lambda r: r["gap"])
        rows.append(worst)
    info_a, info_b = a.step_info(step), b.step_info(step)
    signals = {s: {"a": info_a[s], "b": info_b[s], "gap": relative_gap(info_a[s], info_b[s])}
               for s in SIGNALS if s != "loss" or with_loss}
    return rows, signals


def find_divergence(run_a: Run | str | Path, run_b: Run | str | Path,
                    tol: float = DEFAULT_TOL) -> Divergence:
    """The first step both runs recorded at which any figure's relative gap exceeds ``tol``,
    with the parameters ranked by their gap there (largest first)."""
    if not isinstance(tol, (int, float)) or not math.isfinite(tol) or tol < 0:
        raise UserError(f"diverge: the tolerance must be a number at least 0, got {tol!r}")
    a, b = _as_run(run_a), _as_run(run_b)
    common = sorted(set(a.steps) & set(b.steps))
    if not common:
        raise UserError(f"runs {str(a.path)!r} and {str(b.path)!r} recorded no step in common")
    compared = []
    for step in common:
        info_a, info_b = a.step_info(step), b.step_info(step)
        with_loss = info_a["ranks"] == info_b["ranks"] and \
            info_a["loss"] is not None and info_b["loss"] is not None
        rows, signals = _gaps(a, b, step, with_loss)
        compared.append(step)
        worst = max([r["gap"] for r in rows] + [s["gap"] for s in signals.values()])
        if worst > tol:
            # gaps equal to 3 digits are ties (one change seen through float32 rounding): model order
            ranking = sorted(rows, key=lambda r: -float(f"{r['gap']:.3g}"))
            return Divergence(step, tol, compared, [r for r in ranking if r["gap"] > 0], signals)
    return Divergence(None, tol, compared)
