"""``gradexplorer.watch``: the app's gradient monitor on a training loop the user runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gradexplorer.core.hooks.forward_guard import guarded_hooks
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.messages.failures import FailureChannel
from gradexplorer.core.persample.tracker import check_reduction
from gradexplorer.core.runs.structure import model_structure
from gradexplorer.core.runs.writer import RunSizeNote, RunWriter
from gradexplorer.core.session.engine import StepResult
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.core.stats.monitor import GradientMonitor
from gradexplorer.core.stats.records import StepGradients
from gradexplorer.core.steps import points as SP
from gradexplorer.core.steps.ledger import headline_norm
from gradexplorer.core.steps.points import (
    ScalerWatch,
    accumulated_by_name,
    closure_of,
    group_lrs,
    guarded,
    step_ledger,
    with_closure,
)
from gradexplorer.core.watch import arguments as A
from gradexplorer.core.watch.budget import budget_for, checked_overhead, hook_timing, plan_step
from gradexplorer.core.watch.graph_capture import GraphCapture
from gradexplorer.core.watch.measure import measure_for, probe_for
from gradexplorer.core.watch.noise_choice import noise_for
from gradexplorer.core.watch.per_rank import rank_norms_for
from gradexplorer.core.watch.per_sample import PerSampleWatch
from gradexplorer.core.watch.ranks import RankPlan, plan_ranks
from gradexplorer.core.watch.spike_log import BatchNotes, SpikeLog, spike_reporter
from gradexplorer.core.watch.step_writes import optimizer_state_of, snapshot_step


class Recorder:
    """Gradient statistics of every ``stats_every``-th step of a training loop (histograms on the steps
    among them divisible by ``histogram_every``), kept and written. Two measuring points per step:
    *as accumulated* (per-parameter norms of ``.grad`` at the end of the last backward, before
    unscaling and clipping) and *as applied* (the full statistics of the gradient the optimizer
    uses, read in its step pre-hook, or after the closure of ``optimizer.step(closure)``); the
    update ratio and the optimizer's state across the step. Without an optimizer, call
    ``rec.step()`` after each backward. ``scaler``: the loop's GradScaler (its scale, the steps it
    skips); ``step_number``: a callable giving the number of the step under way (the integrations
    pass the trainer's global step + 1). ``rec.latest()``: the last recorded StepGradients,
    ``rec.ledger`` its StepLedger, ``rec.noise.latest`` its NoiseStep (several backwards a step)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                 run_dir: str | Path | None = None, *, stats_every: int = 1,
                 histogram_every: int = 1, bins: int = 64, snapshot_every: int | None = None,
                 hooks: dict[str, str] | None = None, keep_snapshots: int | None = None,
                 history: int = 16, report=None, auto_steps: bool = True, per_rank: bool = False,
                 scaler=None, step_number=None, optimizer_state: bool = True,
                 overwrite: bool = False, resume: bool = False, spikes=True,
                 every: int | None = None, update_ratio: bool = True, noise_scale=True, noise_every="auto",
                 per_sample_norms: bool = False, per_sample_reduction: str = "mean",
                 overhead: float | None = None) -> None:
        self._closed = True  # until everything is in place: close() undoes what was done
        self._handles: list[Any] = []
        self.hooks = self.writer = self._graph = self.probe = self.scaler = self.spikes = self.noise = None
        self.per_sample_watch = self.budget = None
        if not isinstance(model, nn.Module):
            raise UserError(f"watch needs an nn.Module, got {type(model).__name__}")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise UserError(f"watch: optimizer must be a torch.optim.Optimizer, "
                            f"got {type(optimizer).__name__}")
        (run_dir, stats_every, histogram_every, history, bins, snapshot_every, keep_snapshots,
         per_rank, overwrite, resume, auto_steps, optimizer_state, self._update_ratio) = A.checked(
            run_dir, stats_every, histogram_every, every, history, bins, snapshot_every,
            keep_snapshots, per_rank, overwrite, resume, auto_steps, optimizer_state, update_ratio)
        self._overhead = checked_overhead(overhead, histogram_every, optimizer)  # budget.py
        self._noise_every = A.noise_every(noise_every)  # noise_cadence.py
        self.plan: RankPlan = plan_ranks(model)
        A.check_plan(self.plan, snapshot_every, resume, per_rank)
        self.model = self.plan.model
        A.check_unwatched(self.model)
        hooks = A.hook_specs(self.model, hooks)
        per_sample = A.flag(per_sample_norms, "per_sample_norms") and check_reduction(
            per_sample_reduction)  # checked here, before anything is attached
        self._failures = self._report = FailureChannel.of(report)  # the one failure channel
        try:
            self._set_up(optimizer, run_dir, (stats_every, histogram_every), bins, snapshot_every,
                         hooks, keep_snapshots, history, auto_steps, per_rank, overwrite, resume,
                         scaler, step_number, optimizer_state, spikes, per_sample)
            self.noise = noise_for(self, noise_scale, self._noise_every)
        except BaseException:
            self.close()
            raise
        A.mark_watched(self.model, self)

    def _set_up(self, optimizer, run_dir, cadence, bins, snapshot_every, hooks, keep_snapshots,
                history, auto_steps, per_rank, overwrite, resume, scaler, step_number,
                optimizer_state, spikes, per_sample=False) -> None:
        """Attach and open what the checked arguments ask for (the caller undoes it on error)."""
        self._closed = False
        if hooks:  # close() detaches them on any error
            self.hooks, guard = guarded_hooks(self.model, hooks, self._report, not self.plan.sharded)
            self._handles += [guard] if guard is not None else []
        self._rank_norms = rank_norms_for(self.plan, per_rank, self._report)
        self.optimizer = optimizer
        (self.stats_every, self.histogram_every), self.bins = cadence, bins
        self.snapshot_every, self.keep_snapshots = snapshot_every, keep_snapshots
        self.step_count, self._step_number, self.ledger = 0, step_number, None  # rec.ledger: a StepLedger
        self.monitor = GradientMonitor(bins, self.histogram_every, history=history, offload=True,
                                       update_ratio=self._update_ratio and optimizer is not None)
        self.stack = SessionStack(self.monitor, self.hooks)  # the app's and run's, no session
        self.measure = measure_for(self.plan, self.stack, self.model, bins, self._report)
        self._pending, self._losses, self._closure_loss = False, [], None
        self._steps_taken = self._backwards_at_step = 0  # optimizer steps seen by the post-hook
        self._accumulated = self._named_params = self._scale = None
        self._optimizer_state = optimizer_state and optimizer is not None and not self.plan.sharded
        self._names = [self.plan.names.get(n, n) for n, _ in self.plan.stats_model.named_parameters()]
        self.probe = probe_for(self.plan, self.measure, lambda: self._records(self._next_step()),
                               self._report)
        self._warned: set = set()  # (what, cause) already warned about
        self.scaler = ScalerWatch(scaler, optimizer, lambda: guarded(
            "a skipped step", self._skipped_step, self._warned), lambda: self._steps_taken)
        if run_dir is not None and self.plan.writes:
            self._open_run(run_dir, overwrite, resume, hooks)
            # the optimizer's momentum norms read in the update ratio's pass (step_writes.py)
            self.monitor.state_norms = self._optimizer_state
        self.batches, self._spike_log = BatchNotes(), None  # the batch: StepResult.batch
        if self.writer is not None and spikes is not False:  # the stack's spike reporter
            self._spike_log = SpikeLog(self.writer, None if self.plan.sharded else
                                       lambda r: snapshot_step(self, r), keep_snapshots, self._periodic)
            self.spikes = spike_reporter(spikes, self._spike_log, self._failures)
            self.stack.reporters.append(self.spikes)
        if per_sample:  # every recorded step's per-sample gradient norms (core/watch/per_sample.py)
            self.per_sample_watch = PerSampleWatch.of(self, per_sample)
            if self._spike_log is not None:  # a spike keeps its samples of largest gradient norm
                self._spike_log.grad_samples_of = self.per_sample_watch.top_of
        self.auto_steps = auto_steps and optimizer is not None
        self.budget = budget_for(self, self._overhead)  # watch(overhead=): the heavy figures' cadence
        timed = hook_timing(self)  # watch(overhead=), noise_every="auto": its CPU (budget.py)
        if self.auto_steps:
            self._handles.append(optimizer.register_step_pre_hook(timed(self._step_pre_hook)))
            self._handles.append(optimizer.register_step_post_hook(timed(self.after_optimizer_step)))

    def _open_run(self, run_dir: Path, overwrite: bool, resume: bool, hooks) -> None:
        structure = model_structure(self.plan.stats_model, self.plan.names)
        self.writer = RunWriter(run_dir, self._failures, overwrite=overwrite, resume=resume)
        self.writer.check_resumed(structure)
        self.step_count = self.writer.first_step - 1  # the step its loop reached (resume_point)
        self.writer.counted = lambda: self.step_count  # kept with each transaction of steps
        self._settings = {"stats_every": self.stats_every, "bins": self.bins,
                          "histogram_every": self.histogram_every, "snapshot_every": self.snapshot_every,
                          "keep_snapshots": self.keep_snapshots, "hooks": hooks or {},
                          "ranks": self.plan.world, "mode": self.plan.mode}
        self.writer.set_meta({"structure": structure, "settings": self._settings})
        self.size_note = RunSizeNote(self.writer, self._failures)
        self._graph = GraphCapture(self.model, lambda g: self.writer.set_meta({"graph": g}))

    # -- step boundaries -----------------------------------------------------------
    def _next_step(self) -> int:
        """The number of the step under way (the trainer's, where an integration gives it)."""
        return self._step_number() if self._step_number is not None else self.step_count + 1

    def _records(self, step: int) -> bool:
        return not self._closed and step % self.stats_every == 0 and self.plan.active

    def _step_pre_hook(self, optimizer, args, kwargs):
        """The optimizer's pre-hook: measure now, or after its closure has run (its backward:
        the hooks that shaped the gradients are noted then, as without a closure)."""
        if closure_of(args, kwargs) is None:
            self.before_optimizer_step()  # settles the worker first
            return None
        self.monitor.settle()  # the last step's work on the worker is done before this one
        step = self._next_step()
        if not self._records(step):
            return None if self.hooks is None else with_closure(
                args, kwargs, lambda loss: self._end_backward())
        return with_closure(args, kwargs, lambda loss: (self._end_backward(), guarded(
            "the gradient after the closure", lambda: self._measure_applied(step, loss),
            self._warned, step=step)))

    def _end_backward(self) -> None:
        if self.hooks is not None:
            self.hooks.end_backward()

    def before_optimizer_step(self, optimizer=None, args=None, kwargs=None) -> None:
        """Gradients are ready, the weights not yet changed: the applied point."""
        self.monitor.settle()
        self._end_backward()
        step = self._next_step()
        if self._records(step):
            self._measure_applied(step)

    def _measure_applied(self, step: int, closure_loss=None) -> None:
        if isinstance(closure_loss, (torch.Tensor, float, int)):
            # the last evaluation's, if nothing else is noted
            self._closure_loss = closure_loss.detach() if isinstance(closure_loss, torch.Tensor) \
                else closure_loss
        self._accumulated = self.probe.take() if self.probe is not None else None
        self._scale = self.scaler.scale()
        plan_step(self, step)  # watch(overhead=): a heavy or a light step (budget.py)
        self.measure.begin(self.optimizer, step)
        self._pending = True

    def after_optimizer_step(self, optimizer=None, args=None, kwargs=None, *,
                             loss: float | torch.Tensor | None = None) -> None:
        """The step is over: finish, keep and write its figures (integrations call this)."""
        if loss is not None:
            self.note_loss(loss)
        self._steps_taken += 1
        if self._failures.waiting:  # told on the writer thread: said here, once
            self._failures.tell_waiting()
        micro, iteration = self._backwards_over()
        self.step_count = self._next_step()
        if not self._pending:
            self._losses = []
            if self.probe is not None:
                self.probe.advance()
            return
        self._pending = False
        record = self.measure.end(self.optimizer)
        fused = guarded("a skipped step", lambda: self.scaler.fused_skip(self.optimizer), self._warned,
                        False)
        if fused:
            self._report(SP.skip_line(self.step_count, record))
        self._finish(record, micro, iteration, SP.FUSED_SKIP_REASON if fused else None)

    def _backwards_over(self) -> tuple[int | None, int | None]:
        """The step's backwards are over: (backwards since the last step, in all), None without a probe."""
        if self._graph is not None:
            self._graph.settle()  # the first step's graph is written, the modules' hooks removed
        if self.probe is None:
            return None, None
        iteration = self.probe.backwards
        micro, self._backwards_at_step = iteration - self._backwards_at_step, iteration
        return micro, iteration

    def _finish(self, record, micro, iteration, skipped: str | None = None) -> None:
        if self.per_sample_watch is not None:  # first: whatever the record, the step is over
            self.per_sample_watch.finish(self.step_count, self._scale,
                                         self.batches.text_of(self.step_count))
        noted = self._losses or ([] if self._closure_loss is None else [self._closure_loss])
        self._losses, self._closure_loss = [], None
        losses = guarded("the step's loss", lambda: [float(x) for x in noted], self._warned, [],
                         record.step if record is not None else None)
        if record is None:
            return
        record = self.plan.finish(record)
        if record is None:
            return
        step = record.step
        accumulated = guarded("the accumulated norms", lambda: accumulated_by_name(
            self._accumulated, self._names, record), self._warned, {}, step)
        scale = guarded("the GradScaler's scale", lambda: None if self._scale is None
                        else float(self._scale), self._warned, None, step)
        self.ledger = step_ledger(record.step, record, accumulated, scale, losses, micro,
                                  iteration, lrs := group_lrs(self.optimizer), skipped)
        if self.noise is not None:  # its rows before the step's: noise_watch.py, docs/noise.md
            guarded("the noise scale", lambda: self.noise.take(step, scale, accumulated), self._warned)
        norms = self._rank_norms.gather(record) if self._rank_norms is not None else None
        if self.writer is not None:  # the optimizer state is read for the run directory only
            self._write(record, norms, accumulated, optimizer_state_of(self, step, lrs))

    def _skipped_step(self) -> None:
        """The GradScaler skipped ``optimizer.step()``: record the step as skipped, with the
        gradient it refused, and say so."""
        step = self._next_step()
        micro, iteration = self._backwards_over()
        self.step_count = step
        if self._closed or not self.plan.active:
            return
        self._accumulated = self.probe.take() if self.probe is not None else None
        self._scale = self.scaler.scale()
        self.measure.begin(self.optimizer, step)
        record = self.measure.end(self.optimizer)
        self._report(SP.skip_line(step, record))
        self._finish(record, micro, iteration, skipped=SP.SKIP_REASON)

    def step(self, loss: float | torch.Tensor | None = None) -> StepGradients | None:
        """Mark a step boundary without an optimizer: call it after ``loss.backward()``."""
        if self.auto_steps:
            raise UserError("watch was given an optimizer: its steps are recorded by themselves; "
                            "call rec.step() only without one")
        self.before_optimizer_step()
        self.after_optimizer_step(loss=loss)
        return self.latest() if self.step_count % self.stats_every == 0 else None

    def note_loss(self, loss: float | torch.Tensor, per_sample=None) -> None:
        """A loss of the step under way (one per micro-batch: a number, or a per-sample tensor
        whose mean is taken); the step records their mean. Read once the step is over, so no
        host sync here. ``per_sample`` (each sample's loss) names the worst samples of a spike."""
        loss = A.loss_value(loss)
        if loss is not None:
            self._losses.append(loss)
        if per_sample is not None and self._spike_log is not None:
            self._spike_log.note_per_sample(self._next_step(), per_sample)

    def note_batch(self, ids) -> None:
        """The ids of the step under way's samples (JSON-able: indices, names), kept with it."""
        if self.writer is not None:
            self.batches.note(self._next_step(), ids)

    def _write(self, record: StepGradients, rank_norms, accumulated, state) -> None:
        step, ledger = record.step, self.ledger
        if not self.writer.write_step(record, ledger.loss, ranks=self.plan.world,
                                      rank_norms=rank_norms, ledger=ledger, accumulated=accumulated,
                                      optimizer_state=state, batch=self.batches.text_of(step)):
            return
        if self._periodic(step):
            snapshot_step(self, record)
        if self.stack.reporters:  # the stack's after-step reporters (spikes), as on a session
            self.stack.report(None, StepResult(step, ledger.loss, headline_norm(ledger), {}, ledger,
                                               record, batch=self.batches.ids_of(step)))

    def _periodic(self, step: int) -> bool:
        return bool(self.snapshot_every and step % self.snapshot_every == 0)

    # -- results and the end -------------------------------------------------------
    def latest(self) -> StepGradients | None:
        """The last recorded step's statistics (on rank 0 under distributed training)."""
        return self.measure.latest()

    @property
    def per_sample(self):
        """The last recorded step's per-sample gradient norms (a PerSampleStep), or None."""
        return None if self.per_sample_watch is None else self.per_sample_watch.latest

    @property
    def run_dir(self) -> Path | None:
        return None if self.writer is None else self.writer.run_dir

    @property
    def closed(self) -> bool:
        return self._closed

    of = staticmethod(A.recorder_of)  # Recorder.of(model): the open recorder watching it

    def close(self) -> None:
        """Stop recording: write a pending graph, remove every hook, close and unlock the run dir."""
        if self._closed:
            return
        self._closed = True
        self.monitor.settle()
        A.unmark_watched(self.model, self)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for part in (self.noise, self.probe, self.scaler, self._graph, self.per_sample_watch):
            if part is not None:
                part.remove()
        if self.hooks is not None:
            self.hooks.detach_all()
        if self.spikes is not None:
            self.spikes.close()  # its kernels' warm-up ended (spike_warmup)
        if self.writer is not None:
            self.writer.set_meta({"finished": time.time(), "loop_step": self.step_count})  # resume_point
            self.writer.close()
        self._failures.tell_waiting()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def watch(model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
          run_dir: str | Path | None = None, *, stats_every: int = 1, histogram_every: int = 1,
          bins: int = 64, snapshot_every: int | None = None, hooks: dict[str, str] | None = None,
          keep_snapshots: int | None = None, per_rank: bool = False, scaler=None,
          optimizer_state: bool = True, overwrite: bool = False, resume: bool = False,
          spikes=True, every: int | None = None, update_ratio: bool = True,
          noise_scale=True, per_sample_norms: bool = False, noise_every="auto",
          per_sample_reduction: str = "mean", overhead: float | None = None) -> Recorder:
    """Record ``model``'s gradient statistics every ``stats_every`` steps into ``run_dir``, histograms
    on those divisible by ``histogram_every`` (``every``: stats_every's old name).
    ``hooks={"fc1": "scale:0.5"}``: backward-hook actions; snapshots every ``snapshot_every`` steps,
    the newest ``keep_snapshots`` kept; ``per_rank=True`` (DDP): every rank's own norms; ``scaler``:
    the loop's GradScaler (its scale, the steps it skips); ``optimizer_state``: the optimizer's state
    per parameter; ``spikes`` (True, False or a SpikeSettings): loss and gradient spikes
    (docs/diagnose.md); ``update_ratio=False``: no ‖Δθ‖/‖θ‖ (its two passes over the weights are
    most of watch's cost a step on a small model); ``noise_scale`` (True, False or NoiseSettings):
    a step of several backwards gives the gradient noise scale and each parameter's SNR
    (docs/noise.md), on one recorded step in ``noise_every`` ("auto", the default: ≤ 5% a step);
    ``overhead=0.05``: histograms, update ratio and optimizer state on a cadence
    measured to keep watch within 5% of the step, the rest every step (core/watch/budget.py);
    ``per_sample_norms=True``: each sample's gradient norm, as ``rec.per_sample``
    (``per_sample_reduction``: the loss's, "mean" or "sum"; docs/per_sample.md). Every argument is
    checked first; ``run_dir`` is locked while open (a run there: ``overwrite=True`` or
    ``resume=True``). One open recorder a model (docs/api.md)."""
    return Recorder(model, optimizer, run_dir, stats_every=stats_every,
                    histogram_every=histogram_every, every=every, bins=bins,
                    snapshot_every=snapshot_every, hooks=hooks, keep_snapshots=keep_snapshots,
                    per_rank=per_rank, scaler=scaler, optimizer_state=optimizer_state,
                    overwrite=overwrite, resume=resume, spikes=spikes, update_ratio=update_ratio,
                    noise_scale=noise_scale, per_sample_norms=per_sample_norms, noise_every=noise_every,
                    per_sample_reduction=per_sample_reduction, overhead=overhead)
