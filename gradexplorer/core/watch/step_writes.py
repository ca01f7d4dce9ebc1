"""What a watched step writes beside its figures: its snapshot (periodic ones, and a spike's
first step) and the optimizer state after it."""

from __future__ import annotations

import torch

from gradexplorer.core.stats.records import StepGradients
from gradexplorer.core.steps.points import guarded


def snapshot_step(recorder, record: StepGradients) -> None:
    """Write ``record``'s step as a snapshot of ``recorder``'s model into its run directory
    (a failure is the writer's one-line report; recording stops, training goes on)."""
    from gradexplorer.core.snapshot.write import SnapshotSource

    writer = recorder.writer
    source = SnapshotSource(recorder.plan.stats_model, recorder.optimizer, recorder.step_count,
                            type(recorder.model).__name__, "watch", next(
                                (p.device for p in recorder.model.parameters()),
                                torch.device("cpu")))

    def work():
        path = recorder.stack.snapshot(writer.snapshot_dir(record.step), source, record)
        writer.add_snapshot(record.step, path, recorder.keep_snapshots)

    writer._guarded(f"the snapshot of step {record.step}", work)


def optimizer_state_of(recorder, step: int, lrs):
    """The optimizer state after the step (at the ``lrs`` it used): read on the statistics
    worker before the next step where it took this one; where it did not (a step of more than
    ``OFFLOAD_MAX`` values: GPT-2 small's ‖momentum‖, a read of 124M numbers), by the writer
    thread during the next forward and backward, where a core is free; else now. The writer
    thread calls what this returns: it waits for the worker's read, or reads it itself where
    no other thread has (the worker still on the step's histograms); either way before the
    next optimizer step, whose pre-hook settles the worker (``monitor.settle``: the read done
    first, on the training thread where nobody began it). The norms of SGD's momentum and Adam's
    ``exp_avg`` come from the update ratio's pass where it read them (``monitor.state_norms``:
    ``numba.update_state``), the rest from here."""
    if not recorder._optimizer_state or not getattr(recorder.budget, "heavy_now", True):
        return {}  # none asked for, or a light step of watch(overhead=) (budget.py)
    from gradexplorer.core.stats.optimizer_state import optimizer_state

    if recorder._named_params is None:  # once: the probe keeps the parameters as well
        recorder._named_params = [(recorder.plan.names.get(n, n), p)
                                  for n, p in recorder.plan.stats_model.named_parameters()]
    known = recorder.monitor.found_state_norms  # read with the update ratio (monitor.state_norms)

    def read():  # {} when unreadable (one warning)
        return guarded("the optimizer state", lambda: optimizer_state(
            recorder.optimizer, recorder._named_params, lrs, known), recorder._warned, {}, step)
    later = recorder.monitor.later(read)
    return read() if later is None else later.result
