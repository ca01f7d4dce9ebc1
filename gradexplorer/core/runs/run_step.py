"""``RunStep``: one step of a run as one record (``Run.step(n)``): its figures, histograms,
ledger and optimizer state together, each part read from the run's database when first asked
for and then kept (a committed step never changes)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from gradexplorer.core.runs import schema as S
from gradexplorer.core.stats.optimizer_fields import STATE_FIELDS, ParamOptimState, state_from_row
from gradexplorer.core.stats.records import Histogram, ParamStats, StepGradients

if TYPE_CHECKING:
    from gradexplorer.core.runs.run import Run
    from gradexplorer.core.steps.ledger import StepLedger


class RunStep:
    """Step ``step`` of ``run`` (checked to be there): ``info``, ``ledger``, ``params`` (every
    parameter's ParamStats, what it could not measure attached), ``stats`` (those with a
    gradient), ``figures`` (one flat row per parameter with a gradient, for tables and exports),
    ``histograms``, ``optimizer_state``, ``not_recorded`` and ``gradients`` (the StepGradients
    the app's views draw)."""

    def __init__(self, run: Run, step: int) -> None:
        run._check_step(step)
        self.run, self.step = run, step

    def __repr__(self) -> str:
        return f"RunStep({self.step} of {self.run.path})"

    @cached_property
    def info(self) -> dict[str, Any]:
        """``Run.step_info``: the step's totals and its ledger's fields."""
        return self.run.step_info(self.step)

    @cached_property
    def ledger(self) -> StepLedger:
        return self.run.step_ledger(self.step)

    @cached_property
    def not_recorded(self) -> dict[str, str]:
        return self.run.not_recorded(self.step)

    @cached_property
    def params(self) -> dict[str, ParamStats]:
        return self.run._param_stats(self.step, None, self.not_recorded)

    @property
    def stats(self) -> dict[str, ParamStats]:
        """``params`` of the parameters with a gradient (the gradient as applied)."""
        return {n: s for n, s in self.params.items() if s.has_grad}

    @cached_property
    def _param_rows(self) -> dict[str, dict[str, Any]]:
        return self.run._param_steps(self.step)

    @cached_property
    def optimizer_state(self) -> dict[str, ParamOptimState]:
        """``{name: ParamOptimState}`` after the step ({} when not recorded)."""
        return {n: state_from_row(n, row) for n, row in self._param_rows.items()
                if any(row.get(f) is not None for f in STATE_FIELDS)}

    @property
    def figures(self) -> dict[str, dict[str, Any]]:
        """``Run.figures``: every per-parameter figure of the step as one flat row (new rows
        each time: a table may change its own)."""
        rows, extra = self.run._stat_rows(self.step), self._param_rows
        empty = dict.fromkeys(S.PARAM_STEP_FIELDS)
        return {name: {**values, **extra.get(name, empty)}
                for name, (_, has_grad, values) in rows.items() if has_grad}

    @cached_property
    def histograms(self) -> dict[str, Histogram]:
        return self.run.histograms(self.step)

    @cached_property
    def gradients(self) -> StepGradients:
        """The step as the monitor reported it (what the app's views draw)."""
        info = self.info
        return StepGradients(self.step, info["global_norm"], info["total_numel"] or 0,
                             self.params, self.histograms, self.run.settings.get("bins", 64),
                             "auto", info["seconds"] or 0.0, not_recorded=self.not_recorded)
