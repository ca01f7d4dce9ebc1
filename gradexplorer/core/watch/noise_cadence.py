"""``watch(..., noise_every=N)``: the noise scale on one recorded step in ``N`` (docs/noise.md,
"Cost"), and ``noise_every="auto"``: the smallest ``N`` that keeps its cost within ``TARGET`` of
the loop's step, measured as the run goes.

The capture (``core/steps/micro_batches.py``) is on only for the steps it records: its hooks are
put on after the step before one (its last recorded step, or the one before it) and taken off
after it; a step it does not record has none, and the probe's end-of-backward call skips it.
A recorded step's figures are exactly that step's; the EMAs and their band run over the
recorded steps only (``beta`` a recorded step).

``"auto"`` (``watch``'s default) measures the training thread's CPU (``time.thread_time``)
from the end of one recorded step's figures to the next, on the steps with the capture and
on the step just before each (without it): the capture's cost a step is the median of the
last ``LIGHT_SAMPLES`` differences of such pairs (a machine whose load drifts moves both
alike) plus its standard error (``upper_median``: a loaded machine's steps move by ±10%, and a
plain median is low half the time); the loop's own step is the steps without it less watch's
CPU in its optimizer hooks (``budget.py``'s ``HookClock``), or the budget's (``overhead=``
given). It starts at ``START``, then, once ``MIN_SAMPLES`` pairs are measured, takes the
smallest ``N`` with cost/N ≤ (1 − MARGIN)·TARGET·bare, the planned share (``budget.py``'s
``choose_every`` and ``CHANGE``; a wider ``MARGIN`` than the budget's, for what this measure
misses: the loop's step taken as watch's step less its optimizer hooks still holds watch's
per-backward work, and taking the hooks off after a recorded step falls in a step it does not
measure, so on a 64×256 MLP at 2, 4 and 8 micro-batches the capture's share was measured 0% / 8%
/ 21% below the bench's, bench/noise_scale.py): rarer as soon as the ``N`` in force is measured
over the planned share (over TARGET, as before, a capture of 9% of the step stayed at ``START``:
digits at k = 4 then cost 5.0% a step), more frequent only on ``LIGHT_SAMPLES`` pairs and where
that ``N`` is ``1+CHANGE`` times or more, at most once in ``LIGHT_SAMPLES`` steps (no flapping
on noise); at 1 nothing more is measured (no step without the capture to compare with), so every
step is taken only where the capture is measured within ``ONE_SHARE`` of the planned share
(LeNet at k = 4: measured within 3%, chosen 1, it then cost 4.4–5.1%). Its clocks are read only
around the steps it measures (a step it does not record costs a check). Every change is kept
(``changes``) and told (``on_change``), from the first step with figures.
"""

from __future__ import annotations

import statistics
import time
from collections import deque

from gradexplorer.core.runs.settings_text import cadence_changes
from gradexplorer.core.watch.budget import LIGHT_SAMPLES, changed_cadence, choose_every, upper_median

TARGET = 0.05  # "auto": the capture's cost a step, at most this share of the loop's step
MARGIN = 0.4  # of TARGET, kept for what the measure misses (see the module): planned within 3%
ONE_SHARE = 0.5  # every step (N = 1) only where the capture is within this share of that plan
START = 2  # "auto"'s first cadence: steps with and without the capture, both measured
MIN_SAMPLES = 4  # steps of each kind measured before a first choice


class NoiseCadence:
    """Which recorded steps the capture is on for (``every``), chosen (``auto``) or given."""

    def __init__(self, every: int | str, stats_every: int = 1, bare=None,
                 clock=time.thread_time, hooks=None) -> None:
        self.auto = every == "auto"
        self.every = START if self.auto else int(every)
        self.hooks = hooks  # a HookClock: watch's CPU in its optimizer hooks (budget.py)
        if hooks is not None:
            hooks.active = self.auto  # from the first step (then around the steps measured)
        self.stats_every, self.bare_of, self.clock = stats_every, bare, clock
        self.changes: list[list[int]] = []  # [step, every] where "auto" changed it
        self.on_change = None  # called with (step, every): from the first figures, each change
        self.shown = False  # whether a recorded step has had figures (the run's settings say it)
        self.now = True  # the capture is on for the step under way (the first recorded one)
        self._last: int | None = None  # the last step it was on for
        self._on: deque = deque(maxlen=LIGHT_SAMPLES)  # a step with it less the one before
        self._off: deque = deque(maxlen=LIGHT_SAMPLES)  # CPU a step without it
        self._loop: deque = deque(maxlen=LIGHT_SAMPLES)  # the same less watch's hooks: the loop's
        self._before: tuple | None = None  # (step, CPU) of the last step measured without it
        self._mark: tuple | None = None  # (step, CPU, hooks' CPU) at the last recorded step's end
        self._spans = 0
        self._hold = 0  # no change before this step (one a LIGHT_SAMPLES steps at most)

    @property
    def clock(self):
        """The training thread's CPU clock (a bench's arm clock, a test's made-up one): the
        hooks' clock too."""
        return self._clock

    @clock.setter
    def clock(self, clock) -> None:
        self._clock = clock
        if self.hooks is not None:
            self.hooks.clock = clock

    def go_on(self, last: int | None, every: int | None = None, changes=(), step: int = 0) -> None:
        """A resumed run's cadence, counted on from ``last``, its last step with a noise scale
        (None: none), the recorder at ``step``; "auto" from ``every``, the ``N`` last in force
        (None: ``START``), its ``changes`` kept (its measures start again, as the EMAs do)."""
        if self.auto:
            self.every, self.changes = every or self.every, [list(c) for c in changes]
        if last is not None and last <= step:  # on for the next recorded step N steps on or more
            self._last = last  # (a trainer gone back to an earlier checkpoint: counted anew)
            self.now = (step // self.stats_every + 1) * self.stats_every - last >= self.every

    @property
    def costs(self) -> tuple[float, float] | None:
        """``(capture, bare)`` CPU seconds a step as now measured, None until both are."""
        if len(self._on) < MIN_SAMPLES or len(self._off) < MIN_SAMPLES:
            return None
        bare = (self.bare_of() if self.bare_of is not None else None) or \
            statistics.median(self._loop) or statistics.median(self._off)
        return max(upper_median(self._on), 0.0), bare

    def close(self, step: int, figures: bool = True) -> bool:
        """At the end of recorded ``step``'s figures (``figures``: whether it had some): its CPU
        measured (``auto``), the cadence chosen, and whether the next recorded step has the
        capture on (``now``)."""
        if self.now:
            self._last = step
        if figures and self.now and not self.shown:  # a loop of one backward a step never is
            self.shown = True
            if self.on_change is not None:
                self.on_change(step, self.every)
        if self.auto:
            self._measure(step)
        else:
            self.now = self._last is None or step + self.stats_every - self._last >= self.every
        return self.now

    def _measure(self, step: int) -> None:
        """``auto``: the span since the last recorded step measured where it is the step with
        the capture or the one before it, and the clocks read only around those."""
        se, mark = self.stats_every, self._mark
        if self.every == 1:  # every recorded step: no step without it to measure against
            self.now, self._mark, self._before = True, None, None
            if self.hooks is not None:
                self.hooks.active = False
            return
        if mark is not None or step + 2 * se - self._last >= self.every:
            t = self._clock()
            hooks = self.hooks.seconds(t) if self.hooks is not None else 0.0
            self._spans += 1
            if mark is not None and step - mark[0] == se and self._spans > 2:  # (the first
                took, before = (t - mark[1]) / se, self._before  # span holds one-off work)
                self._before = None if self.now else (step, took)
                if not self.now:
                    self._off.append(took)
                    self._loop.append((t - mark[1] - hooks + mark[2]) / se)
                elif before is not None and before[0] == step - se:  # with the step before
                    self._on.append(took - before[1])
                    self._choose(step)  # (only here: a step it does not record costs least)
            self._mark = (step, t, hooks) if step + 2 * se - self._last >= self.every else None
        self.now = step + se - self._last >= self.every
        if self.hooks is not None:  # watch's hooks timed from the step before the one before
            self.hooks.active = step + 3 * se - self._last >= self.every

    def _choose(self, step: int) -> None:
        costs = self.costs
        if costs is None or step < self._hold:
            return
        plan = TARGET * (1 - MARGIN)  # the share planned for
        every = choose_every(0.0, costs[0], costs[1], plan)
        if every == 1 and costs[0] > ONE_SHARE * plan * costs[1]:
            every = 2  # every step only well within: at 1 nothing more is measured
        over = costs[0] / self.every > plan * costs[1]  # the cadence in force, over the plan
        every = changed_cadence(self.every, every, over, len(self._on) == LIGHT_SAMPLES)
        if every is not None:
            self._change(step, every)

    def _change(self, step: int, every: int) -> None:
        """``every`` in force after ``step`` (under DDP this rank's proposal instead, the ranks'
        largest made so on every rank: ``noise_ranks.py``'s ``RankCadence``)."""
        self.every, self._hold = every, step + LIGHT_SAMPLES
        self.changes.append([step, every])
        if self.on_change is not None and self.shown:
            self.on_change(step, every)


def in_force(settings: dict) -> tuple[int | None, list]:
    """"auto"'s ``N`` last in force in a run's ``settings`` (None: none kept, or another
    ``noise_every``) and its changes, ``[step, N]`` each."""
    changes = cadence_changes(settings, "noise_cadence") if settings.get("noise_every") == "auto" \
        else []
    return (changes[-1][1] if changes else None), changes


def cadence_for(recorder, every: int | str, kind=NoiseCadence) -> NoiseCadence | None:
    """``recorder``'s NoiseCadence (or ``kind``, one of its subclasses) for ``noise_every`` (None
    at 1: every recorded step), its choice kept in the run's settings (``noise_every``;
    ``noise_cadence``: "auto"'s changes) from the first step with figures: a run without a noise
    scale (one backward a step, the default "auto" in force) says nothing of one."""
    if every == 1:
        return None
    budget = recorder.budget
    bare = None if budget is None else (lambda: (budget.costs or (0.0, 0.0, None))[2])
    cadence = kind(every, recorder.stats_every, bare,  # budget.py's hook_timing
                   hooks=getattr(recorder, "hook_clock", None))  # ("auto" only)
    if recorder.writer is not None and recorder.writer.resumed:  # resume=True: counted on
        resumed = recorder.writer.resumed  # (runs/writer.py's resume_point)
        cadence.go_on(resumed["noise_step"], *in_force(resumed["settings"]),
                      step=recorder._next_step() - 1)  # (an integration's: its trainer's step)
    if recorder.writer is not None:
        settings = recorder._settings  # shared with the budget's (budget.py)

        def announce(step: int, now: int) -> None:
            settings["noise_every"] = every
            if cadence.auto:
                settings["noise_cadence"] = cadence.changes[-100:]
            recorder.writer.set_meta({"settings": dict(settings)})
        cadence.on_change = announce
    return cadence

