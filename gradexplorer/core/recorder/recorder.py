"""``gradexplorer.watch``: the app's gradient monitor on a training loop the user runs."""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder.ranks import RankPlan, plan_ranks
from gradexplorer.core.recorder.store import RunWriter
from gradexplorer.core.recorder.structure import GraphCapture, model_structure
from gradexplorer.core.stats.monitor import GradientMonitor
from gradexplorer.core.stats.records import StepGradients


class _Result:
    """The little of a StepResult the monitor fills in."""

    def __init__(self, step: int) -> None:
        self.step, self.grad_norm, self.extras = step, None, {}


class MonitorMeasure:
    """The app's GradientMonitor driven by step boundaries instead of a TrainingSession."""

    def __init__(self, monitor: GradientMonitor, session) -> None:
        self.monitor, self.session = monitor, session

    def begin(self, optimizer, step: int) -> None:
        self.monitor.after_backward(self.session, step - 1)

    def end(self, optimizer) -> StepGradients | None:
        result = _Result(self.session.step_count)
        self.monitor.after_step(self.session, result)
        return result.extras.get("gradients")

    def latest(self) -> StepGradients | None:
        return self.monitor.latest()


class Recorder:
    """Gradient statistics of every ``every``-th step of a training loop, kept and written.

    With an optimizer the step boundaries come from its step hooks (statistics are read after
    backward, before ``optimizer.step()``; the update ratio across it); without one, call
    ``rec.step()`` after each backward. ``rec.latest()`` is the last recorded StepGradients.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
                 run_dir: str | Path | None = None, *, every: int = 1, bins: int = 64,
                 snapshot_every: int | None = None, hooks: dict[str, str] | None = None,
                 keep_snapshots: int | None = None, history: int = 16, report=None,
                 auto_steps: bool = True, per_rank: bool = False) -> None:
        if not isinstance(model, nn.Module):
            raise UserError(f"watch needs an nn.Module, got {type(model).__name__}")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise UserError(f"watch: optimizer must be a torch.optim.Optimizer, "
                            f"got {type(optimizer).__name__}")
        if every < 1:
            raise UserError(f"watch: every must be a positive number of steps, got {every}")
        if snapshot_every is not None and snapshot_every < 1:
            raise UserError(f"watch: snapshot_every must be positive, got {snapshot_every}")
        if keep_snapshots is not None and keep_snapshots < 1:
            raise UserError(f"watch: keep_snapshots must be positive, got {keep_snapshots}")
        self.plan: RankPlan = plan_ranks(model)
        if snapshot_every and self.plan.mode == "fsdp2":
            raise UserError("watch: snapshots hold whole gradients, which FSDP shards across ranks; "
                            "record FSDP2 runs without snapshot_every")
        self.model = self.plan.model
        self.hooks = None
        if hooks:  # first: a bad module name leaves nothing behind
            self._attach_hooks(hooks)
        self._rank_norms = self._per_rank(per_rank, report)
        self.optimizer = optimizer
        self.every, self.bins = every, bins
        self.snapshot_every, self.keep_snapshots = snapshot_every, keep_snapshots
        self.step_count = 0
        self.monitor = GradientMonitor(bins=bins, every=1, history=history,
                                       update_ratio=optimizer is not None)
        self._session = types.SimpleNamespace(
            model=self.plan.stats_model, optimizer=optimizer, step_count=0,
            workload=types.SimpleNamespace(name=type(self.model).__name__, description="watch"),
            device=next((p.device for p in self.model.parameters()), torch.device("cpu")),
        )
        self._report = report or (lambda line: print(line, file=sys.stderr))
        if self.plan.mode == "fsdp2":
            from gradexplorer.core.recorder.sharded import ShardedMeasure

            self.measure = ShardedMeasure(self.model, self.plan.names, bins,
                                          optimizer is not None, self._report)
        else:
            self.measure = MonitorMeasure(self.monitor, self._session)
        self._handles: list[Any] = []
        self._pending = False
        self._closed = False
        self._loss = None
        self.writer = None
        self._graph = None
        if run_dir is not None and self.plan.writes:
            self.writer = RunWriter(run_dir, self._report)
            self.writer.set_meta({
                "structure": model_structure(self.plan.stats_model, self.plan.names),
                "settings": {"every": every, "bins": bins, "snapshot_every": snapshot_every,
                             "keep_snapshots": keep_snapshots, "hooks": hooks or {},
                             "ranks": self.plan.world, "mode": self.plan.mode},
            })
            self._graph = GraphCapture(self.model, lambda g: self.writer.set_meta({"graph": g}))
        self.auto_steps = auto_steps and optimizer is not None
        if self.auto_steps:
            self._handles.append(optimizer.register_step_pre_hook(self.before_optimizer_step))
            self._handles.append(optimizer.register_step_post_hook(self.after_optimizer_step))

    def _attach_hooks(self, hooks: dict[str, str]) -> None:
        from gradexplorer.core.hooks.registry import HookRegistry

        self.hooks = HookRegistry(self.model)
        for path, action in hooks.items():
            self.hooks.attach(path, action)

    # -- step boundaries -----------------------------------------------------------
    def before_optimizer_step(self, optimizer=None, args=None, kwargs=None) -> None:
        """Gradients are ready, the weights not yet changed (integrations call this)."""
        if self.hooks is not None:
            self.hooks.prune()
        step = self.step_count + 1
        if self._closed or step % self.every or not self.plan.active:
            return
        self.measure.begin(self.optimizer, step)
        self._pending = True

    def after_optimizer_step(self, optimizer=None, args=None, kwargs=None, *,
                             loss: float | torch.Tensor | None = None) -> None:
        """The step is over: finish, keep and write its figures (integrations call this)."""
        if loss is not None:
            self._loss = loss
        self.step_count += 1
        self._session.step_count = self.step_count
        if not self._pending:
            self._loss = None
            return
        self._pending = False
        record = self.measure.end(self.optimizer)
        if record is None:
            return
        record = self.plan.finish(record)
        norms = self._rank_norms.gather(record) if self._rank_norms is not None else None
        if record is not None and self.writer is not None:
            self._write(record, norms)

    def step(self, loss: float | torch.Tensor | None = None) -> StepGradients | None:
        """Mark a step boundary without an optimizer: call it after ``loss.backward()``."""
        if self.auto_steps:
            raise UserError("watch was given an optimizer: its steps are recorded by themselves; "
                            "call rec.step() only without one")
        self.before_optimizer_step()
        self.after_optimizer_step(loss=loss)
        return self.latest() if self.step_count % self.every == 0 else None

    def note_loss(self, loss: float | torch.Tensor) -> None:
        """The loss of the step under way, recorded with it (read once the step is over)."""
        self._loss = loss.detach() if isinstance(loss, torch.Tensor) else loss

    def _per_rank(self, wanted: bool, report):
        """A RankNorms gatherer when per-rank figures are asked for and apply (DDP)."""
        if not wanted or self.plan.world == 1:
            return None
        if self.plan.mode == "fsdp2":
            raise UserError("watch: per_rank compares whole gradients across DDP ranks; "
                            "FSDP ranks hold different shards")
        from gradexplorer.core.recorder.per_rank import RankNorms

        self.plan.per_rank = True
        return RankNorms(report or (lambda line: print(line, file=sys.stderr)))

    def _write(self, record: StepGradients, rank_norms=None) -> None:
        loss, self._loss = self._loss, None
        loss = None if loss is None else float(loss)
        if not self.writer.write_step(record, loss, ranks=self.plan.world, rank_norms=rank_norms):
            return
        if self.snapshot_every and record.step % self.snapshot_every == 0:
            self._snapshot(record)

    def _snapshot(self, record: StepGradients) -> None:
        from gradexplorer.core.snapshot.write import write_snapshot

        writer = self.writer

        def work():
            path = write_snapshot(writer.snapshot_dir(), self._session, record,
                                  hooks=self.hooks.describe() if self.hooks else None)
            writer.add_snapshot(record.step, path, self.keep_snapshots)

        writer._guarded(f"the snapshot of step {record.step}", work)

    # -- results and the end -------------------------------------------------------
    def latest(self) -> StepGradients | None:
        """The last recorded step's statistics (on rank 0 under distributed training)."""
        return self.measure.latest()

    @property
    def run_dir(self) -> Path | None:
        return None if self.writer is None else self.writer.run_dir

    def close(self) -> None:
        """Stop recording: remove the optimizer hooks and gradient hooks, close the run."""
        if self._closed:
            return
        self._closed = True
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._graph is not None:
            self._graph.remove()
        if self.hooks is not None:
            self.hooks.detach_all()
        if self.writer is not None:
            self.writer.set_meta({"finished": time.time()})  # readers following it can say so
            self.writer.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def watch(model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
          run_dir: str | Path | None = None, *, every: int = 1, bins: int = 64,
          snapshot_every: int | None = None, hooks: dict[str, str] | None = None,
          keep_snapshots: int | None = None, per_rank: bool = False) -> Recorder:
    """Record ``model``'s gradient statistics every ``every`` steps into ``run_dir``.

    ``hooks={"fc1": "scale:0.5"}`` attaches the app's backward-hook actions; snapshots
    (gradients in the snapshot format) every ``snapshot_every`` steps, the newest
    ``keep_snapshots`` kept. ``per_rank=True`` (DDP) also records every rank's own gradient
    norms, to catch ranks that disagree.
    """
    return Recorder(model, optimizer, run_dir, every=every, bins=bins,
                    snapshot_every=snapshot_every, hooks=hooks, keep_snapshots=keep_snapshots,
                    per_rank=per_rank)
