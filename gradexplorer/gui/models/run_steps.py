"""A run's older steps as the views read them: each parameter's figures read when first asked for.

Opening a run of thousands of parameters must not read every figure and histogram of every
step it keeps in view (5,000 parameters × 256 steps are over a million rows): the views need
every parameter only for the newest step (the table, the tree, the flow chart) and one
parameter over the older ones (its curves, its heat map). ``lazy_step`` gives such a step:
its ``params`` and ``histograms`` are mappings that read one parameter with one indexed query,
and the whole step in one query only when a view walks through all of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.stats.records import StepGradients


class StepReads(Mapping):
    """``name -> value`` of one step of a run, read on demand and kept once read.

    ``read(name)`` reads ``{name: value}`` of one parameter, ``read(None)`` the whole step;
    ``has_any()`` tells whether the step holds anything (``bool()`` without a read of all).
    A step found damaged reads as empty: the follower's dialog names it when it is read whole.
    """

    def __init__(self, read: Callable[[str | None], dict], has_any: Callable[[], bool]) -> None:
        self._read, self._has_any = read, has_any
        self._one: dict[str, Any] = {}
        self._whole: dict[str, Any] | None = None
        self._any: bool | None = None

    def _quietly(self, name: str | None) -> dict:
        try:
            return self._read(name)
        except UserError:
            return {}

    def whole(self) -> dict[str, Any]:
        """Every parameter of the step (one read, kept)."""
        if self._whole is None:
            self._whole = self._quietly(None)
        return self._whole

    def __getitem__(self, name: str) -> Any:
        if self._whole is not None:
            return self._whole[name]
        if name not in self._one:
            self._one[name] = self._quietly(name).get(name)
        found = self._one[name]
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.whole())

    def __len__(self) -> int:
        return len(self.whole())

    def __bool__(self) -> bool:
        if self._whole is not None:
            return bool(self._whole)
        if self._any is None:
            try:
                self._any = self._has_any()
            except UserError:
                self._any = False
        return self._any

    def items(self):
        return self.whole().items()

    def values(self):
        return self.whole().values()


def lazy_step(run, row: dict, bins: int) -> StepGradients:
    """The StepGradients of the step of ``row`` (a ``Run.step_rows`` row), its figures and
    histograms read from ``run`` when a view asks for them."""
    step = row["step"]
    params = StepReads(lambda name: run.param_stats(step, name), lambda: True)
    histograms = StepReads(lambda name: run.histograms(step, name),
                           lambda: run.has_histograms(step))
    return StepGradients(step, row["global_norm"], row["total_numel"] or 0, params, histograms,
                         bins, "auto", row["seconds"] or 0.0)


class StepReader:
    """``step -> StepGradients`` of any step of ``run`` (lazy, as ``lazy_step``), or None for a
    step the run does not hold: what the views show of a step the timeline's history no longer
    holds (``TimelineModel.step_reader``). The last few steps read are kept."""

    KEEP = 8

    def __init__(self, run) -> None:
        self.run = run
        self._read: dict[int, StepGradients] = {}

    def __call__(self, step: int) -> StepGradients | None:
        if step in self._read:
            return self._read[step]
        try:
            info = self.run.step_info(step)
        except UserError:
            return None
        read = lazy_step(self.run, {"step": step, **info}, self.run.settings.get("bins", 64))
        if len(self._read) >= self.KEEP:
            self._read.pop(next(iter(self._read)))
        self._read[step] = read
        return read
