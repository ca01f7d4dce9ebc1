"""``watch``'s noise scale under DDP: each rank's own gradient is a small batch.

Under ``DistributedDataParallel`` each rank's backward first computes the gradient of its own
shard of the batch; DDP's reducer averages the ranks' gradients into ``.grad`` (buckets
all-reduced as they fill, the mean copied back in a callback at the backward's end). A step on
``R`` ranks of ``m`` backwards each (``m ≥ 2``: accumulation under ``no_sync()``) so holds the
gradient at two batch sizes, with no extra backward: each rank's micro-batch ``d_{r,i}``
(``B_small = b``) and the step's ``.grad`` (``B_big = R·m·b``). The figures are
``NoiseWatch``'s (``noise_watch.py``, ``core/stats/noise_scale.py``) over those ``R·m`` parts.

**Each rank's local gradient.** A hook on each parameter tensor (``Tensor.register_hook``: a
pre-hook of its AccumulateGrad node) receives the gradient this rank's backward is about to add
to ``.grad``, before the node adds it and before DDP's reducer (a post-hook of the same node)
copies ``.grad`` into its bucket; it keeps a reference. The first hook of a backward queues this
module's end-of-backward callback, ahead of the reducer's (queued once its last bucket is
ready), so the references are read (one float64 norm pass, ``micro_batches.squared_norms``)
before the reducer writes the ranks' mean into ``.grad`` (while a reference is held,
AccumulateGrad copies the incoming gradient rather than adopting it as ``.grad``; the read does
not rely on that). ``.grad`` itself, read at the backward's end, would be the mean: the tests
fail then. The DDP module's forward says whether its backward synchronises
(``require_backward_grad_sync`` with grad enabled: not under ``no_sync()``).

**One small all-reduce a recorded step.** At the end of a synchronising backward every rank
sends what it gathered since the last one: each parameter's Σ|d|² (float64, ``P`` numbers,
summed over the ranks) and its own row (its step, backwards, micro-batch sizes, failure, the
``noise_every`` it proposes), one SUM all-reduce of ``P + 7·R`` float64 numbers on a gloo group
of its own, never the gradients.
Rank 0 adds them to the step's sums; at the step (``take``) the figures come from them and from
``|A|²``, the norm of ``.grad`` as accumulated (the ranks' mean) that the recorder already has.
Every rank decides by the step number whether a step is recorded (``stats_every``), so they all
send on the same backwards: at ``watch`` every rank takes rank 0's step count (one broadcast on
that group, ``agreed_step``), the run's last step where it is resumed (only rank 0 reads it).

**On a cadence** (``noise_every=N`` or ``"auto"``, ``noise_cadence.py``): every rank runs the
cadence, turned at each step's first forward through the DDP module (its pre-hook, which stays
on): the last step closed if recorded, then the gradient hooks and the batch-size hook on for
this step if the cadence records it, off otherwise — so a step it does not record has no hook on
a parameter and no reduce, and every rank captures on the same steps (rank 1 never sees the
figures: rank 0's ``take`` only reads whether the step was on). A fixed ``N`` counts the same
recorded steps on every rank. ``"auto"`` measures each rank's own CPU, so its choice is made
together: a rank's change is its proposal (``RankCadence``), sent in its row of the next
recorded step's reduce; every rank adopts the largest of them (no rank over its budget) at that
step's end — the same ``N`` from the same step on every rank, no collective of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import partial

import numpy as np
import torch
import torch.distributed as dist
from torch.autograd import Variable

from gradexplorer.core.steps.micro_batches import squared_norms
from gradexplorer.core.watch.noise_cadence import NoiseCadence, cadence_for
from gradexplorer.core.watch.noise_watch import NoiseSettings, NoiseStep, NoiseWatch

TIMEOUT = timedelta(seconds=120)
ROW = 7  # each rank's row: took part, step, backwards, smallest and largest size, unknown sizes,
# its proposed noise_every ("auto": the ranks' largest adopted by all; 0 without a cadence)
FAILED = -1.0  # a row's "took part" when the rank's capture failed this step


@dataclass
class RankSums:
    """A step's sums over the ranks (rank 0): ``parts`` backwards in all, ``diff_sq[j]`` the
    Σ|d|² of parameter ``j`` over them, the micro-batch sizes' range, why it has no figures."""

    step: int
    parts: int
    diff_sq: np.ndarray
    low: float
    high: float
    unknown: int = 0
    why: str | None = None


class RankCadence(NoiseCadence):
    """``noise_every`` under DDP (see the module): "auto"'s change is this rank's ``proposal``,
    sent in the recorded step's reduce; every rank ``adopt``s the ranks' largest."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.proposal = self.every

    def go_on(self, *args, **kwargs) -> None:
        super().go_on(*args, **kwargs)
        self.proposal = self.every  # a resumed run's N, proposed until measured otherwise

    def _change(self, step: int, every: int) -> None:
        self.proposal = every  # kept over the steps without the capture until a reduce sends it

    def adopt(self, step: int, every: int) -> None:
        """The ranks' largest proposal, in force after ``step`` (none over its budget); this
        rank's proposal, sent, is the cadence in force again."""
        if self.auto and every != self.every:
            super()._change(step, every)
        self.proposal = self.every


class RankCapture:
    """Every rank's local incoming gradients and the all-reduce of their sums (see the module)."""

    backward = None  # what NoiseWatch._arm gives the probe: its own end-of-backward call instead

    def __init__(self, params: list, ddp, step_of, wanted, sizes, report, rank: int,
                 world: int, cadence: RankCadence | None = None) -> None:
        self.count, self.rank, self.world = len(params), rank, world
        self._params, self.cadence, self.on_forward = params, cadence, None
        self._step_of, self._wanted, self._sizes, self._report = step_of, wanted, sizes, report
        self.group = dist.new_group(backend="gloo", timeout=TIMEOUT)
        self._sync = True  # the last forward's: its backward synchronises the ranks
        self._queued = self._recording = False
        self._index: list[int] = []
        self._stash: list[torch.Tensor] = []
        self._local = self._empty(None)  # this rank's, since its last all-reduce
        self._totals: RankSums | None = None  # rank 0: the step's, over the ranks
        self.failed = False  # the all-reduce failed: stopped for good
        self._said: set[str] = set()
        self.used: str | None = None  # "numba" or "torch": the norm pass of the last backward
        self.agreed: int | None = None  # the ranks' largest proposed noise_every, last reduce
        self._handles: list = []
        self.pause(False)
        self._forward = ddp.register_forward_pre_hook(self._on_forward)

    def agreed_step(self, step: int) -> int:
        """Rank 0's ``step``, on every rank (one broadcast, at ``watch``): a resumed run goes on
        from the step its loop reached, which only rank 0 (its writer) reads, and so does its
        cadence (its last step with a noise scale, "auto"'s ``N`` in force: ``go_on``); the
        ranks count on from the same numbers, so they decide the recorded steps alike and
        reduce on the same ones."""
        cadence = self.cadence
        last = None if cadence is None else cadence._last
        sent = torch.tensor([step, -1 if last is None else last, 0 if cadence is None else
                             cadence.every], dtype=torch.int64)
        dist.broadcast(sent, src=0, group=self.group)  # the group: every rank (global rank 0)
        step, last, every = sent.tolist()
        if cadence is not None and self.rank != 0:
            cadence.go_on(None if last < 0 else last, every, step=step)
        return step

    def pause(self, paused: bool) -> None:
        """The gradient hooks off for a step the cadence does not record (``noise_every``), on
        for one it does; the DDP module's forward pre-hook stays (it turns them)."""
        if paused or self.failed:
            self.remove_hooks()
        elif not self._handles:
            self._handles = [p.register_hook(partial(self._on_grad, i))
                             for i, p in enumerate(self._params) if p.requires_grad]

    def _empty(self, step: int | None) -> dict:
        return {"step": step, "parts": 0, "diff": np.zeros(self.count), "sizes": [], "why": None}

    def _on_forward(self, module, _args) -> None:
        if torch.is_grad_enabled():  # as DDP decides whether to prepare its reducer
            self._sync = bool(module.require_backward_grad_sync)
            if self.on_forward is not None:  # noise_every: the hooks on or off for the step
                try:
                    self.on_forward()
                except Exception as exc:  # noqa: BLE001 - never the forward it watches
                    self._stop(exc)

    def _on_grad(self, i: int, grad: torch.Tensor) -> None:
        if not self._queued:  # the first of this backward: read at its end, before DDP's mean
            self._queued = True
            self._recording = not self.failed and self._wanted()
            Variable._execution_engine.queue_callback(self._done)
        if self._recording:
            self._index.append(i)
            self._stash.append(grad)

    def _done(self) -> None:
        index, stash, self._index, self._stash = self._index, self._stash, [], []
        self._queued = False
        if not self._recording:
            return
        try:
            self._add(index, stash)
        except Exception as exc:  # noqa: BLE001 - a monitor never breaks the backward it watches
            self._stop(exc)

    def _add(self, index: list[int], stash: list[torch.Tensor]) -> None:
        step, local = self._step_of(), self._local
        if local["step"] != step:  # an earlier step's backwards never synchronised: dropped
            local = self._local = self._empty(step)
        local["parts"] += 1
        sizes = self._sizes()
        local["sizes"].append(sizes[-1] if sizes else None)
        if stash and local["why"] is None:
            try:
                squares, self.used = squared_norms(stash)
                local["diff"][index] += squares  # each parameter once a backward
            except Exception as exc:  # noqa: BLE001 - said here; the ranks still reduce
                local["why"] = f"the capture failed on rank {self.rank} ({type(exc).__name__}: {exc})"
                if local["why"] not in self._said:
                    self._said.add(local["why"])
                    self._report(f"gradexplorer: no noise scale: {local['why']} (said once)")
        if self._sync:
            self._send(step)

    def _send(self, step: int) -> None:
        """This rank's sums since its last all-reduce, summed over the ranks (rank 0 keeps them)."""
        local, p = self._local, self.count
        self._local = self._empty(step)
        known = [s for s in local["sizes"] if s is not None]
        vector = np.zeros(p + ROW * self.world)
        vector[:p] = local["diff"]
        vector[p + ROW * self.rank:p + ROW * (self.rank + 1)] = (
            FAILED if local["why"] else 1.0, step, local["parts"], min(known, default=0),
            max(known, default=0), len(local["sizes"]) - len(known),
            0 if self.cadence is None else self.cadence.proposal)
        dist.all_reduce(torch.from_numpy(vector), group=self.group)
        if self.cadence is not None:  # every rank alike: the same vector
            self.agreed = int(vector[p + ROW - 1::ROW].max())
        if self.rank == 0:
            self._keep(step, vector, local["why"])

    def _keep(self, step: int, vector: np.ndarray, why: str | None) -> None:
        p = self.count
        rows = vector[p:].reshape(self.world, ROW).tolist()  # a few numbers: plain Python
        took, steps, parts, low, high, unknown, _ = zip(*rows, strict=True)
        if why is None and FAILED in took:
            why = f"the capture failed on rank {took.index(FAILED)} (said on that rank)"
        elif why is None and any(s != step for s in steps):
            why = f"the ranks are at different steps ({sorted({int(s) for s in steps})})"
        elif why is None and len(set(parts)) > 1:
            why = f"the ranks took different numbers of backwards ({[int(n) for n in parts]})"
        sums = self._totals
        if sums is None or sums.step != step:
            sums = self._totals = RankSums(step, 0, vector[:p].copy(), min(low), max(high))
        else:
            sums.diff_sq += vector[:p]
            sums.low, sums.high = min(sums.low, *low), max(sums.high, *high)
        sums.parts += int(sum(parts))
        sums.unknown += int(sum(unknown))
        sums.why = sums.why or why

    def _stop(self, exc: Exception) -> None:
        self.failed = True
        self.remove()
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        self._report(f"gradexplorer: the noise scale across ranks stopped on rank {self.rank}: "
                     f"{text}; training goes on")

    def take(self, step: int) -> tuple[RankSums | None, int]:
        """Rank 0, at the step: its sums over the ranks (None without a synchronising backward)
        and this rank's backwards after the last one (``no_sync`` to the end: not averaged)."""
        sums, self._totals = self._totals, None
        after = self._local["parts"] if self._local["step"] == step else 0
        return (sums if sums is not None and sums.step == step else None), after

    def remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def remove(self) -> None:
        self.remove_hooks()
        self._forward.remove()


class _Params:
    """What ``NoiseWatch`` takes of an accumulation probe (its capture is replaced here)."""

    def __init__(self, params: list) -> None:
        self._params = params
        self.on_backward = None


class RankNoiseWatch(NoiseWatch):
    """``NoiseWatch`` over DDP ranks (see the module): on every rank, figures on rank 0."""

    def __init__(self, recorder, settings: NoiseSettings, every: int | str = 1) -> None:
        plan = recorder.plan
        params = [p for _, p in plan.stats_model.named_parameters()]
        super().__init__(_Params(params), plan.stats_model, recorder._names, settings,
                         recorder._report, recorder.writer)
        self.capture.remove()  # the micro-batch capture's hooks: the ranks' capture instead
        self.rank, self.world, self._recorder = plan.rank, plan.world, recorder
        self.cadence = cadence_for(recorder, every, RankCadence)
        self._at = self._on = None  # the step under way; it, where the capture is on for it
        self.capture = RankCapture(params, plan.wrapper, recorder._next_step, self._wanted,
                                   self._taken_sizes, recorder._report, plan.rank, plan.world,
                                   self.cadence)
        recorder.step_count = self.capture.agreed_step(recorder.step_count)
        if self.cadence is not None:
            self.capture.on_forward = self._turn

    def _recorded(self, step: int) -> bool:
        """Whether ``step`` is recorded: every rank decides it alike, by its number."""
        return not self._recorder.closed and step % self._recorder.stats_every == 0

    def _wanted(self) -> bool:
        step = self._recorder._next_step()
        return self._recorded(step) and (self.cadence is None or self._on == step)

    def _turn(self) -> None:
        """``noise_every``, at every forward that needs a gradient, on every rank: at a step's
        first, the last step closed in the cadence (the ranks' agreed ``N`` adopted, then its
        CPU measured) and the hooks on for this step if the cadence records it, else off. The
        same steps on every rank: a fixed ``N`` is counted alike, "auto"'s changes are agreed."""
        step, last, cadence = self._recorder._next_step(), self._at, self.cadence
        if step == last:
            return
        self._at = step
        if last is not None and self._recorded(last):
            agreed, self.capture.agreed = self.capture.agreed, None
            if agreed:
                cadence.adopt(last, agreed)
            cadence.close(last)
        on = self._recorded(step) and cadence.now
        self._on = step if on else None
        self._arm(on)

    def take(self, step: int, scale: float | None, accumulated) -> NoiseStep | None:
        """Rank 0, at a recorded step: its figures where the capture was on for it (the cadence
        is turned at the next step's first forward, on every rank: ``_turn``)."""
        if self.cadence is not None and self._on != step:
            return None
        self.latest = found = self._figures(step, scale, accumulated)
        if found is not None and self._writer is not None:
            self._writer.write_noise(found)
        return found

    def _figures(self, step: int, scale: float | None, accumulated) -> NoiseStep | None:
        if self.rank != 0:
            return None
        sums, after = self.capture.take(step)
        if sums is None:
            if after:
                self._say(step, "no backward of it synchronised the ranks (no_sync to the end)")
            return None
        b = self.settings.micro_batch_size or (
            int(sums.low) if sums.low == sums.high and not sums.unknown else None)
        why = sums.why or (f"backwards after the step's last synchronising one ({after})"
                           if after else None) or (None if b else (
            f"micro-batch sizes {int(sums.low)}..{int(sums.high)} across the ranks are not one "
            "size (give NoiseSettings(micro_batch_size=...))" if not sums.unknown else
            "the micro-batch size is not known (give NoiseSettings(micro_batch_size=...))")) or (
            None if accumulated else "its gradient as accumulated is not known")
        if why is not None:
            self._say(step, why)
            return None
        return self._estimates(step, sums.diff_sq, sums.parts, b, scale, accumulated,
                               ranks=self.world)
