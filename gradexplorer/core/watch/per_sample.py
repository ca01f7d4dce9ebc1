"""``watch(per_sample_norms=True)``: every recorded step's per-sample gradient norms
(``core/persample``), kept as ``rec.per_sample`` and written to the run's ``per_sample_norms``
table with the step's largest samples and the ids ``note_batch`` gave.

A failure here is reported once and ends the per-sample norms; recording goes on.
"""

from __future__ import annotations

import json
from typing import Any

from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.persample.record import PerSampleStep
from gradexplorer.core.persample.tracker import PerSampleNorms, check_reduction
from gradexplorer.core.runs.per_sample_rows import row
from gradexplorer.core.watch.ranks import clean_name


def unsupported_line(unsupported: dict[str, str]) -> str:
    """One line naming every module without per-sample norms, and why."""
    return ("gradexplorer: per-sample gradient norms leave out " + "; ".join(
        f"{name}: {why}" for name, why in unsupported.items()))


class PerSampleWatch:
    """The recorder's per-sample norms: ``finish(step, scale, ids)`` once a recorded step's
    gradients are complete; ``latest``: that step's PerSampleStep (or None)."""

    def __init__(self, plan, reduction: str, active, writer, report) -> None:
        if plan.sharded:
            raise UserError("watch: per_sample_norms needs each module's whole weight; FSDP2 and "
                            "tensor parallelism shard them: record such runs without "
                            "per_sample_norms")
        self.tracker = PerSampleNorms(plan.model, check_reduction(reduction), active)
        self._report, self.writer = report, writer
        self.latest: PerSampleStep | None = None
        self.latest_step: int | None = None
        self.failed = False
        self._said: set[str] = set()
        unsupported = {clean_name(n): why for n, why in self.tracker.unsupported.items()}
        if unsupported:
            report(unsupported_line(unsupported))
        if writer is not None:
            writer.set_meta({"per_sample": {
                "reduction": reduction, "unsupported": unsupported,
                "modules": [clean_name(n) for n in self.tracker.modules]}})

    @classmethod
    def of(cls, recorder, reduction: str) -> PerSampleWatch:
        """A Recorder's: the steps it records, its writer and its report."""
        return cls(recorder.plan, reduction, lambda: recorder._records(recorder._next_step()),
                   recorder.writer, recorder._report)

    def finish(self, step: int, scale: float | None, ids_json: str | None) -> None:
        """Take the step's figures (a GradScaler's ``scale`` divided out) and keep them."""
        if self.failed:
            self.tracker.discard()
            return
        try:
            figures = self.tracker.take(scale)
            self.latest, self.latest_step = figures, step
            if figures is None:
                return
            figures.modules = {clean_name(n): v for n, v in figures.modules.items()}
            self._say_once(figures, step)
            if self.writer is not None:
                ids: Any = None if ids_json is None else json.loads(ids_json)
                self.writer.write_per_sample(row(step, figures, ids))
        except Exception as exc:  # noqa: BLE001 - never break the loop being watched
            self.failed = True
            self._report(f"gradexplorer: per-sample gradient norms stopped at step {step}: "
                         f"{first_line(exc)}; recording goes on")

    def _say_once(self, figures: PerSampleStep, step: int) -> None:
        for name in figures.mixing:
            if name not in self._said:
                self._said.add(name)
                self._report(f"gradexplorer: step {step}: {name} mixes samples in train mode: "
                             "per-sample gradient norms are not per-sample gradients (use "
                             "eval-mode BatchNorm, or GroupNorm/LayerNorm)")
        for name, why in figures.failed.items():
            if name not in self._said:
                self._said.add(name)
                self._report(f"gradexplorer: step {step}: no per-sample norm for {name}: {why}")

    def top_of(self, step: int, ids: Any = None) -> list[dict[str, Any]] | None:
        """``step``'s samples of largest gradient norm (named by ``ids``), if it is the last."""
        if self.latest is None or self.latest_step != step:
            return None
        return self.latest.top(ids)

    def discard(self) -> None:
        self.tracker.discard()

    def remove(self) -> None:
        self.tracker.remove()
