"""``watch(..., overhead=0.05)``: a cost budget, the heavy figures on a cadence chosen from what
they are measured to cost.

Every recorded step keeps its cheap figures — every parameter's gradient norm, mean, std, min,
max, zeros and NaN/Inf counts (one moments call on the training thread, no gradient copy), the
global norm, the ledger and spike detection. The *heavy* figures — the exact histograms, the
update ratio ‖Δθ‖/‖θ‖ (a copy of the weights before the step, their difference after it), the
optimizer state's norms and the gradients' copy that takes the histograms off the training
thread — are taken on one step in ``every``: the smallest ``every`` with

    light + (heavy − light) / every  ≤  (1 − MARGIN) × overhead × bare

where ``light`` and ``heavy`` are watch's CPU a step (the training thread inside its optimizer
hooks, the statistics worker and the run directory's writer thread: all of watch's threads) on
light and heavy steps, each the median of its last steps plus its standard error
(``upper_median``, as ``noise_every="auto"`` plans: a plain median is low half the time on a
loaded machine), and ``bare`` the training thread's CPU a step outside watch (the loop's own),
the median of its last steps (a step slowed by the machine's load, or by the cache misses a
heavy step's copies leave, does not move it). 30% of the share (``MARGIN``) is kept for the
estimates' noise, so that what is spent, measured afterwards, stays within the share. The
figures are measured as the run goes and re-evaluated at every recorded step; the cadence in
force changes as ``noise_every="auto"``'s does (``changed_cadence``): rarer as soon as the one
in force is measured over the share, more frequent only on ``LIGHT_SAMPLES`` light steps
measured and to one ``1 + CHANGE`` (1.5) times more frequent or more, and at most once in
``LIGHT_SAMPLES`` steps (the hold). No flapping on noise: with light figures near the budget,
the room left for heavy steps is small and the cadence it gives swings by 5-10× from step to
step (bench/watch_floor.py's ResNet-18: light 3.4% of the step against the 3.5% planned); the
cadence in force is kept while it is measured within the share. A figure is always that of the step
it is recorded at; a light step simply has no histogram, update ratio or optimizer state. The
cadence in force is ``Recorder.budget.every``; a run directory keeps it in its settings
(``histogram_every``, the overhead, and every change as ``[step, every]`` in ``cadence``), which
``inspect`` and the report print (``runs.settings_text``). Where the light figures alone cost
more than the budget, heavy steps are as rare as ``MAX_EVERY`` allows and ``over_budget`` says
so (kept in the settings too, from the step it was first seen, with the light and bare costs
then measured). A resumed run's budget (``resume=True``) goes on at the cadence last in force,
its changes kept (``CostBudget.go_on``; what the settings keep: ``resumed_settings``).
"""

from __future__ import annotations

import math
import numbers
import statistics
import time
from collections import deque

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.settings_text import cadence_changes

MAX_EVERY = 1000  # the rarest heavy steps: one in this many
MARGIN = 0.3  # of the share, kept for the estimates' noise: the cadence plans for the rest
LIGHT_SAMPLES, HEAVY_SAMPLES = 16, 3  # the estimates over the last steps of each kind
CHANGE = 0.5  # a cadence made more frequent only where this many times more so (noise)


def upper_median(values) -> float:
    """The median of ``values`` plus one standard error of it, from their spread (the median
    absolute deviation, as robust as the median): a cost planned on it is met in about 5 of 6
    runs however noisy the steps (a loaded machine's ±10% a step), not in 1 of 2."""
    mid = statistics.median(values)
    spread = 1.4826 * statistics.median(abs(v - mid) for v in values)  # a normal's σ
    return mid + 1.2533 * spread / math.sqrt(len(values))  # the median's standard error


def changed_cadence(now: int, chosen: int, over: bool, sure: bool) -> int | None:
    """The cadence to change to from ``now`` (None: keep it), ``chosen`` the one the estimates
    give: rarer at once where ``now`` is measured ``over`` its share, more frequent only on a
    full measure (``sure``) and where ``chosen`` is ``1 + CHANGE`` times more frequent or more
    (the budget's and ``noise_every="auto"``'s rule: no flapping on noise; each caller holds a
    change for ``LIGHT_SAMPLES`` steps)."""
    if (over and chosen > now) or (sure and chosen * (1 + CHANGE) < now):
        return chosen
    return None


def choose_every(light: float, heavy: float, bare: float, share: float) -> int:
    """The smallest cadence ``k`` (one heavy step in ``k``) with ``light + (heavy − light)/k ≤
    share·bare`` (``MAX_EVERY`` where none is, 1 where heavy steps cost no more than light ones)."""
    extra, room = heavy - light, share * bare - light
    if extra <= 0:
        return 1
    if room <= 0:
        return MAX_EVERY
    return min(MAX_EVERY, max(1, math.ceil(extra / room)))


def checked_overhead(overhead, histogram_every: int, optimizer) -> float | None:
    """``overhead`` as a share (0 < share ≤ 1), or None; a one-line UserError otherwise."""
    if overhead is None:
        return None
    if isinstance(overhead, bool) or not isinstance(overhead, numbers.Real) \
            or not 0 < overhead <= 1:
        raise UserError(f"watch: overhead must be a share of the step above 0 and at most 1 "
                        f"(0.05: 5%), got {overhead!r}")
    if histogram_every != 1:
        raise UserError("watch: overhead chooses when histograms are taken; give overhead "
                        "or histogram_every, not both")
    if optimizer is None:
        raise UserError("watch: overhead needs the optimizer (its steps are what is timed)")
    return float(overhead)


class CostBudget:
    """The cadence of heavy steps keeping watch within ``share`` of the loop's own CPU.
    ``timed(hook)`` wraps watch's optimizer hooks (the training thread's CPU in them);
    ``plan(step)``, called at each recorded step once the previous step's work is settled,
    closes the span since the last call, then says whether ``step`` is heavy; ``others()``
    the CPU seconds of watch's other threads so far (worker and writer); ``clock``: the
    training thread's CPU clock (a benchmark running several loops on one thread gives each
    its own; a test, made-up costs)."""

    def __init__(self, share: float, others, clock=time.thread_time) -> None:
        self.share, self.others, self.clock = share, others, clock
        self.every = 1
        self.changes: list[list[int]] = []  # [step, every] where the cadence changed
        self.heavy_now, self.heavy_steps = True, 0  # the step under way heavy; how many were
        self.on_change = None  # called with (step, every) when the cadence or over_budget changes
        self._said_over = False  # over_budget as on_change last told it
        self._light: deque = deque(maxlen=LIGHT_SAMPLES)
        self._heavy: deque = deque(maxlen=HEAVY_SAMPLES)
        self._bare: deque = deque(maxlen=LIGHT_SAMPLES)
        self._hooks, self._entered, self._inside = 0.0, 0.0, False
        self._mark: tuple | None = None  # (step, thread CPU, others' CPU, heavy) at the last plan
        self._last_heavy: int | None = None
        self._spans = 0
        self._hold = 0  # no change before this step (one a LIGHT_SAMPLES steps at most)

    def go_on(self, changes: list, over_budget: bool) -> None:
        """A resumed run's budget: the cadence last in force in its ``changes`` (kept, the resumed
        one's added to them), and whether it was over budget (told again once measured within);
        its measures start again."""
        self.changes = [list(c) for c in changes]
        self.every = self.changes[-1][1] if self.changes else 1
        self._said_over = over_budget

    def timed(self, hook):
        """``hook`` with the training thread's CPU in it counted as watch's."""
        def run(*args, **kwargs):
            self._entered, self._inside = self.clock(), True
            try:
                return hook(*args, **kwargs)
            finally:
                self._hooks += self.clock() - self._entered
                self._inside = False
        return run

    @property
    def costs(self) -> tuple[float, float, float] | None:
        """``(light, heavy, bare)`` CPU seconds a step as now estimated, None until measured."""
        if not (self._light and self._heavy and self._bare):
            return None
        return upper_median(self._light), upper_median(self._heavy), statistics.median(self._bare)

    @property
    def over_budget(self) -> bool:
        """Whether the light figures alone cost more than the budget."""
        costs = self.costs
        return costs is not None and costs[0] > self.share * costs[2]

    def plan(self, step: int) -> bool:
        """Close the span since the last recorded step and say whether ``step`` is heavy."""
        now, others = self.clock(), self.others()
        running = now - self._entered if self._inside else 0.0  # the hook under way, so far
        inside, self._hooks = self._hooks + running, -running  # its rest: the next span's
        if self._mark is not None:
            last, then, others_then, heavy = self._mark
            steps = max(step - last, 1)
            watch = max(inside + others - others_then, 0.0) / steps  # (a writer restarted: 0)
            self._spans += 1
            if self._spans > 1:  # the first span holds one-off work (a graph, first buffers)
                (self._heavy if heavy else self._light).append(watch)
                self._bare.append(max(now - then - inside, 0.0) / steps)
        self._choose(step)
        heavy = not self._heavy or self._last_heavy is None or \
            (bool(self._light) and step - self._last_heavy >= self.every)
        if heavy:
            self._last_heavy, self.heavy_steps = step, self.heavy_steps + 1
        self.heavy_now, self._mark = heavy, (step, now, others, heavy)
        if self.costs is not None and self.over_budget != self._said_over:  # light alone over, or back
            self._said_over = not self._said_over
            if self.on_change is not None:
                self.on_change(step, self.every)
        return heavy

    def _choose(self, step: int) -> None:
        costs = self.costs
        if costs is None or step < self._hold:
            return
        light, heavy, bare = costs
        every = choose_every(light, heavy, bare, self.share * (1 - MARGIN))
        over = light + (heavy - light) / self.every > self.share * bare  # the cadence in force
        every = changed_cadence(self.every, every, over, len(self._light) == LIGHT_SAMPLES)
        if every is not None:
            self.every, self._hold = every, step + LIGHT_SAMPLES
            self.changes.append([step, every])
            if self.on_change is not None:
                self.on_change(step, every)


class HookClock:
    """The training thread's CPU inside watch's optimizer hooks so far: what
    ``noise_every="auto"`` (``noise_cadence.py``) takes out of a span of steps to leave the
    loop's own step, as the budget does (``CostBudget.timed``). ``clock``: that thread's CPU."""

    def __init__(self, clock=time.thread_time) -> None:
        self.clock, self._total, self._entered = clock, 0.0, None
        self.active = False  # on while "auto" measures (noise_cadence.py): else not timed

    def timed(self, hook):
        """``hook`` with the CPU in it counted (while ``active``)."""
        def run(*args, **kwargs):
            if not self.active:
                return hook(*args, **kwargs)
            self._entered = self.clock()
            try:
                return hook(*args, **kwargs)
            finally:
                self._total += self.clock() - self._entered
                self._entered = None
        return run

    def seconds(self, now: float) -> float:
        """The CPU in the hooks up to ``now`` (its clock's), the one under way's part included."""
        return self._total + (0.0 if self._entered is None else now - self._entered)


def hook_timing(recorder):
    """How ``recorder``'s optimizer hooks are wrapped: timed by its budget (``overhead=``), by a
    ``HookClock`` (``recorder.hook_clock``) for ``noise_every="auto"``, or not at all."""
    if recorder.budget is not None:
        return recorder.budget.timed
    if recorder._noise_every == "auto":
        recorder.hook_clock = HookClock()
        return recorder.hook_clock.timed
    return lambda hook: hook


def budget_for(recorder, overhead: float | None) -> CostBudget | None:
    """``recorder``'s CostBudget for ``overhead`` (checked), None without one: watch's other
    threads' CPU read from its monitor (the worker) and its run directory's writer thread."""
    if overhead is None:
        return None
    if recorder.plan.sharded:  # its measure takes its own update ratio: not planned here yet
        raise UserError("watch: overhead is not supported under FSDP2 or tensor parallelism yet; "
                        "use stats_every and histogram_every there")
    writes = getattr(recorder.writer, "_writes", None)

    def others() -> float:
        thread = getattr(writes, "_thread", None)
        ident = None if thread is None else thread.ident
        writer = 0.0
        if ident is not None and thread.is_alive():
            try:
                writer = time.clock_gettime(time.pthread_getcpuclockid(ident))
            except (OSError, AttributeError):  # the thread ended meanwhile, or no such clock
                writer = 0.0
        return recorder.monitor.worker_seconds + writer

    budget = CostBudget(overhead, others)
    if recorder.writer is not None:
        earlier = recorder.writer.resumed.get("settings") or {}  # resume=True: goes on from it
        if "overhead" in earlier:  # (settings_text.py's resumed_settings: what the run keeps)
            budget.go_on(cadence_changes(earlier, "cadence", recorder.writer.first_step),
                         earlier.get("over_budget") is True)
        settings = recorder._settings  # shared with noise_every's (noise_cadence.py)
        settings.update(overhead=overhead, histogram_every=budget.every)
        if budget.changes:
            settings["cadence"] = budget.changes[-100:]

        def announce(step: int, every: int) -> None:
            costs = budget.costs  # (light, heavy, bare): the light figures' share of the step
            settings.update(histogram_every=every, cadence=budget.changes[-100:],
                            over_budget=budget.over_budget,
                            light_share=None if costs is None else round(costs[0] / costs[2], 4))
            recorder.writer.set_meta({"settings": dict(settings)})
        budget.on_change = announce
        recorder.writer.set_meta({"settings": dict(settings)})
    return budget


def plan_step(recorder, step: int) -> None:
    """Before ``step``'s figures are taken: its cadence (heavy or light) set on the monitor."""
    budget = recorder.budget
    if budget is None:
        return
    heavy = budget.plan(step)
    monitor = recorder.monitor
    monitor.histogram_every = 1 if heavy else 0
    monitor.update_ratio = heavy and recorder._update_ratio and recorder.optimizer is not None

