"""FSDP2 (``fully_shard``, DTensor parameters): each rank holds a shard of every gradient.

The figures of the full parameter come from a fixed three collectives per recorded step, all on
small per-parameter float64/int64 tensors on the CPU, never on gradients:

1. SUM of ``(P, 10)``: sum, sum of squares, zeros, NaN, Inf, finite counts, has-grad, ‖Δθ‖²,
   ‖θ‖² and the step number (a check that every rank is at the same step);
2. MAX of ``(P, 2)``: −min and max, so every rank knows the global range;
3. SUM of ``(P, bins + 2)``: local histogram counts on the global edges, below and above.

Local figures come from the app's statistics backends (``make_backend``). The collectives run on
a gloo group of their own with a timeout, from inside ``optimizer.step()``, which FSDP ranks run
together; a rank out of step (or a timeout) stops recording with one message, never a hang.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from gradexplorer.core.stats.histogram import histogram_edges, range_bounds
from gradexplorer.core.stats.raw import FINITE, INFS, MAX, MIN, NANS, SUM, SUMSQ, ZEROS, RawStats
from gradexplorer.core.stats.records import StepGradients, build_step_gradients

COLLECTIVE_TIMEOUT = timedelta(seconds=120)


def is_sharded(model: nn.Module) -> bool:
    """True when ``model`` holds DTensor parameters (FSDP2's ``fully_shard``)."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def refuse_fsdp1(model: nn.Module) -> None:
    from gradexplorer.core.errors import UserError

    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # pragma: no cover - torch without FSDP
        return
    if any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        raise UserError("watch does not read FSDP1 (FullyShardedDataParallel) flat parameters; "
                        "shard with torch.distributed.fsdp.fully_shard (FSDP2) instead")


def _local(t: torch.Tensor | None) -> torch.Tensor | None:
    if t is None:
        return None
    return (t.to_local() if hasattr(t, "to_local") else t).detach().reshape(-1)


def local_counts(backend, local: list[torch.Tensor], edges: np.ndarray) -> np.ndarray:
    """``(P, bins + 2)``: counts of each local shard on its parameter's global ``edges``, then
    below-range and above-range counts (NaN and Inf are counted with the moments).

    On the CPU the Numba backend histograms each shard with its range; on a device every
    shard is binned on the device (the torch backend's binning) and copied in one transfer.
    """
    bins = edges.shape[1] - 1
    if backend.name != "torch":
        out = np.zeros((len(local), bins + 2), np.int64)
        for i, g in enumerate(local):
            if g.numel():
                part = backend.finish(backend.begin(
                    [g], None, True, bins, (float(edges[i, 0]), float(edges[i, -1]))), None)
                out[i, :bins], out[i, bins:] = part.counts[0], part.extra[0, :2]
        return out
    from gradexplorer.core.stats.backend_torch import histogram_slots

    device = next((g.device for g in local if g.numel()), torch.device("cpu"))
    on_device = torch.as_tensor(edges, dtype=torch.float64, device=device)
    slots = torch.zeros((len(local), bins + 4), dtype=torch.int64, device=device)
    for i, g in enumerate(local):
        if g.numel():
            where = histogram_slots(g.float() if g.dtype not in (torch.float32, torch.float64)
                                    else g, on_device[i])
            slots[i].index_add_(0, where, torch.ones_like(where))
    host = slots.cpu().numpy()  # the one transfer
    return np.concatenate([host[:, :bins], host[:, bins + 2:]], axis=1)


class ShardedMeasure:
    """``begin`` before the optimizer step, ``end`` after it → the full parameters' StepGradients
    (the same on every rank)."""

    def __init__(self, model: nn.Module, names: dict[str, str], bins: int, update_ratio: bool,
                 report) -> None:
        self.model, self.names, self.bins = model, names, bins
        self.update_ratio = update_ratio
        self.world = dist.get_world_size()
        self.group = dist.new_group(backend="gloo", timeout=COLLECTIVE_TIMEOUT)
        self.failed = False
        self._report = report
        self._backend = None
        self._pending = None
        self.history: list[StepGradients] = []

    def begin(self, optimizer, step: int) -> None:
        from gradexplorer.core.stats.monitor import make_backend

        if self.failed:
            return
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        grads = [_local(p.grad) for _, p in named]
        has = [g is not None for g in grads]
        local = [g if g is not None else _local(p)[:0] for g, (_, p) in zip(grads, named, strict=True)]
        params = [_local(p) for _, p in named]
        if self._backend is None:
            self._backend = make_backend("auto", local or params)
        pending = self._backend.begin(local, params if self.update_ratio else None, False,
                                      self.bins, "auto", optimizer)
        self._pending = (named, has, local, params, pending, step)

    def end(self, optimizer) -> StepGradients | None:
        if self._pending is None:
            return None
        named, has, local, params, pending, step = self._pending
        self._pending = None
        raw = self._backend.finish(pending, params if self.update_ratio else None, optimizer)
        try:
            return self._reduce(named, has, local, raw, step)
        except (RuntimeError, ValueError) as exc:  # a timeout, or a rank out of step
            self.failed = True
            self._report(f"gradexplorer: recording stopped on rank {dist.get_rank()}: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
                         "training goes on")
            return None

    def _reduce(self, named, has, local, raw: RawStats, step: int) -> StepGradients:
        m = raw.moments
        count = len(named)
        update = raw.update if raw.update is not None else np.zeros((count, 2))
        sums = np.column_stack([m[:, SUM], m[:, SUMSQ], m[:, ZEROS], m[:, NANS], m[:, INFS],
                                m[:, FINITE], np.asarray(has, np.float64),
                                np.nan_to_num(update, nan=0.0), np.full(count, float(step))])
        sums = self._all_reduce(sums, dist.ReduceOp.SUM)
        if count and not np.all(sums[:, 9] == step * self.world):
            raise ValueError(f"ranks are at different steps (this rank at {step})")
        bounds = self._all_reduce(np.column_stack([-m[:, MIN], m[:, MAX]]), dist.ReduceOp.MAX)
        low, high = -bounds[:, 0], bounds[:, 1]
        edges = histogram_edges(*range_bounds(low, high, "auto"), self.bins)
        counts = local_counts(self._backend, local, edges)
        counts = self._all_reduce(counts, dist.ReduceOp.SUM).astype(np.int64)
        present = sums[:, 6] > 0
        moments = np.zeros((count, 8))
        moments[:, [SUM, SUMSQ, ZEROS, NANS, INFS, FINITE]] = sums[:, :6]
        moments[:, MIN], moments[:, MAX] = low, high
        nonfinite = moments[:, [NANS, INFS]].astype(np.int64)
        extra = np.column_stack([counts[:, self.bins :], nonfinite])
        global_update = sums[:, 7:9] if self.update_ratio else None
        rows = np.flatnonzero(present)
        reduced = RawStats(moments[rows], edges[rows], counts[rows, : self.bins], extra[rows],
                           None if global_update is None else global_update[rows])
        shapes = [(self.names.get(n, n), tuple(p.shape)) for n, p in named]
        record = build_step_gradients(step, shapes, present.tolist(), reduced, self.bins, "auto")
        self.history = [record]
        return record

    def _all_reduce(self, array: np.ndarray, op) -> np.ndarray:
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        dist.all_reduce(tensor, op=op, group=self.group)
        return tensor.numpy()

    def latest(self) -> StepGradients | None:
        return self.history[-1] if self.history else None

