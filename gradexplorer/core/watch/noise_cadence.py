"""``watch(..., noise_every=N)``: the noise scale on one recorded step in ``N`` (docs/noise.md,
"Cost"), and ``noise_every="auto"``: the smallest ``N`` that keeps its cost within ``TARGET`` of
the loop's step, measured as the run goes.

The capture (``core/steps/micro_batches.py``) is on only for the steps it records: its hooks are
put on after the step before one (its last recorded step, or the one before it) and taken off
after it; a step it does not record has none, and the probe's end-of-backward call skips it.
A recorded step's figures are exactly that step's; the EMAs and their band run over the
recorded steps only (``beta`` a recorded step).

``"auto"`` measures, as ``core/watch/budget.py`` does (its ``choose_every``, ``MARGIN``,
``CHANGE``): the training thread's CPU from the end of one recorded step's figures to the next
(``time.thread_time``), split by whether the capture was on. Its cost a step is the median of
the last steps with it less the median of those without (the hooks inside the engine, the held
gradients, the pass and the figures at the step; the step before one pays the hooks' putting
on); the loop's bare step is the budget's (``overhead=`` given) or else the median of the steps
without the capture (watch's other figures in it: the share is then of a somewhat larger
step). It starts at ``START`` (both kinds measured), then, once ``MIN_SAMPLES`` of each are,
takes the smallest ``N`` with cost/N ≤ (1 − MARGIN)·TARGET·bare: rarer as soon as the ``N`` in
force is measured over TARGET, more frequent only where that ``N`` is ``1 + CHANGE`` times or
more, and at most once in ``LIGHT_SAMPLES`` steps (the step's CPU moves by ±10% from step to
step on a loaded machine: no flapping on noise); at 1 the last steps without it
stay the measure of the bare step. Every change is kept (``changes``) and told (``on_change``).
"""

from __future__ import annotations

import statistics
import time
from collections import deque

from gradexplorer.core.watch.budget import CHANGE, LIGHT_SAMPLES, MARGIN, choose_every

TARGET = 0.05  # "auto": the capture's cost a step, at most this share of the loop's step
START = 2  # "auto"'s first cadence: steps with and without the capture, both measured
MIN_SAMPLES = 4  # steps of each kind measured before a first choice


class NoiseCadence:
    """Which recorded steps the capture is on for (``every``), chosen (``auto``) or given."""

    def __init__(self, every: int | str, stats_every: int = 1, bare=None,
                 clock=time.thread_time) -> None:
        self.auto = every == "auto"
        self.every = START if self.auto else int(every)
        self.stats_every, self.bare_of, self.clock = stats_every, bare, clock
        self.changes: list[list[int]] = []  # [step, every] where "auto" changed it
        self.on_change = None  # called with (step, every)
        self.now = True  # the capture is on for the step under way (the first recorded one)
        self._last: int | None = None  # the last step it was on for
        self._on: deque = deque(maxlen=LIGHT_SAMPLES)  # CPU a step with the capture
        self._off: deque = deque(maxlen=LIGHT_SAMPLES)  # and without
        self._mark: tuple | None = None  # (step, CPU) at the end of the last recorded step
        self._spans = 0
        self._hold = 0  # no change before this step (one a LIGHT_SAMPLES steps at most)

    @property
    def costs(self) -> tuple[float, float] | None:
        """``(capture, bare)`` CPU seconds a step as now measured, None until both are."""
        if len(self._on) < MIN_SAMPLES or len(self._off) < MIN_SAMPLES:
            return None
        off = statistics.median(self._off)
        bare = self.bare_of() if self.bare_of is not None else None
        return max(statistics.median(self._on) - off, 0.0), bare or off

    def close(self, step: int) -> bool:
        """At the end of recorded ``step``'s figures: its CPU measured (``auto``), the cadence
        chosen, and whether the next recorded step has the capture on (``now``)."""
        if self.now:
            self._last = step
        if self.auto:
            t = self.clock()
            if self._mark is not None:
                self._spans += 1
                if self._spans > 1:  # the first span holds one-off work
                    (self._on if self.now else self._off).append(
                        (t - self._mark[1]) / max(step - self._mark[0], 1))
            self._mark = (step, t)
            self._choose(step)
        self.now = self._last is None or step + self.stats_every - self._last >= self.every
        return self.now

    def _choose(self, step: int) -> None:
        costs = self.costs
        if costs is None or step < self._hold:
            return
        every = choose_every(0.0, costs[0], costs[1], TARGET * (1 - MARGIN))
        over = costs[0] / self.every > TARGET * costs[1]  # the cadence in force, over TARGET
        if (over and every > self.every) or every * (1 + CHANGE) < self.every:
            self._change(step, every)

    def _change(self, step: int, every: int) -> None:
        """``every`` in force after ``step`` (under DDP this rank's proposal instead, the ranks'
        largest made so on every rank: ``noise_ranks.py``'s ``RankCadence``)."""
        self.every, self._hold = every, step + LIGHT_SAMPLES
        self.changes.append([step, every])
        if self.on_change is not None:
            self.on_change(step, every)


def cadence_for(recorder, every: int | str, kind=NoiseCadence) -> NoiseCadence | None:
    """``recorder``'s NoiseCadence (or ``kind``, one of its subclasses) for ``noise_every`` (None
    at 1: every recorded step), its choice kept in the run's settings (``noise_every``;
    ``noise_cadence``: "auto"'s changes)."""
    if every == 1:
        return None
    budget = recorder.budget
    bare = None if budget is None else (lambda: (budget.costs or (0.0, 0.0, None))[2])
    cadence = kind(every, recorder.stats_every, bare)
    if recorder.writer is not None:
        settings = recorder._settings  # shared with the budget's (budget.py)

        def announce(step: int, now: int) -> None:
            settings["noise_cadence"] = cadence.changes[-100:]
            recorder.writer.set_meta({"settings": dict(settings)})
        settings["noise_every"] = every
        cadence.on_change = announce
        recorder.writer.set_meta({"settings": dict(settings)})
    return cadence
