"""The session stack's measuring phases driven by a watched loop's step boundaries (no
TrainingSession), and its one snapshot call for a watched run."""

from __future__ import annotations

from gradexplorer.core.messages.errors import measured
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.core.stats.records import StepGradients


class MonitorMeasure:
    """The stack's monitor measuring ``named`` (the model's ``(name, parameter)`` pairs, kept
    from step to step) at the optimizer's step boundaries: ``begin`` before it steps (the
    stack's phase 1), ``end`` after (its phase 2, ``measure``)."""

    def __init__(self, stack: SessionStack, named) -> None:
        self.stack, self.named = stack, named
        self.warned: set = set()  # one warning per cause (errors.measured)
        self._step = 0

    def begin(self, optimizer, step: int) -> None:
        self._step = step
        measured("a step", lambda: self.stack.begin(self.named, optimizer, step), self.warned)

    def end(self, optimizer) -> StepGradients | None:
        record, _ = measured("a step", lambda: self.stack.measure(optimizer, self._step),
                             self.warned)
        return record

    def latest(self) -> StepGradients | None:
        return self.stack.monitor.latest()


def measure_for(plan, stack: SessionStack, model, bins: int, report):
    """How ``watch`` measures under ``plan`` (its RankPlan): sharded (DTensor) gradients
    combined across ranks (``sharded.ShardedMeasure``), else the stack's monitor on the
    parameters, named once (as the accumulation probe's)."""
    update_ratio = stack.monitor.update_ratio
    if plan.sharded:
        from gradexplorer.core.watch.sharded import ShardedMeasure

        return ShardedMeasure(model, plan.names, bins, update_ratio, report)
    return MonitorMeasure(stack, list(plan.stats_model.named_parameters()))


def probe_for(plan, measure, wanted, report):
    """The accumulation probe of the ranks that measure (``wanted()``: whether the next step is
    recorded): under sharding each rank's parts, made whole by ``measure``'s collective."""
    if not plan.active:
        return None
    named, model = list(plan.stats_model.named_parameters()), plan.stats_model
    if plan.sharded:
        from gradexplorer.core.watch.sharded_probe import ShardedProbe

        measure.probe = ShardedProbe(named, wanted, model, report)
        return measure.probe
    from gradexplorer.core.steps.probe import AccumulationProbe

    return AccumulationProbe(named, wanted, model, report)
