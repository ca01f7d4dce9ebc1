"""FSDP2 (``fully_shard``, DTensor parameters): each rank holds a shard of every gradient.

The figures of the full parameter come from two collectives per recorded step, both on small
per-parameter float64/int64 tensors on the CPU, never on gradients:

1. all-gather of ``(P, 11)``: each rank's figures of its shards (finite count, norm, mean, std,
   min, max, zeros, NaN, Inf, ‖Δθ‖, ‖θ‖ before the step) and the step number (a check that
   every rank is at the same step); every rank then combines them the same way (sums of squares
   for the norm, Chan's pairwise formula for mean and std, global min and max);
2. SUM of ``(P, bins + 2)``: local histogram counts on the global edges, below and above.

Local figures are the app's own (its statistics backends and ``build_step_gradients``), so this
module only combines published figures. The collectives run on a gloo group of their own with a
timeout, from inside ``optimizer.step()``, which FSDP ranks run together; a rank out of step
(or a timeout) stops recording with one message, never a hang.
"""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from gradexplorer.core.stats.backends.step_arrays import build_step_gradients
from gradexplorer.core.stats.histogram import histogram_edges, range_bounds
from gradexplorer.core.stats.measured import measured_tensor
from gradexplorer.core.stats.records import (
    Histogram,
    ParamStats,
    StepGradients,
    global_norm,
)

COLLECTIVE_TIMEOUT = timedelta(seconds=120)


def is_sharded(model: nn.Module) -> bool:
    """True when ``model`` holds DTensor parameters (FSDP2's ``fully_shard``)."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def refuse_fsdp1(model: nn.Module) -> None:
    from gradexplorer.core.messages.errors import UserError

    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # pragma: no cover - torch without FSDP
        return
    if any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        raise UserError("watch does not read FSDP1 (FullyShardedDataParallel) flat parameters; "
                        "shard with torch.distributed.fsdp.fully_shard (FSDP2) instead")


def _norms(tensors: list[torch.Tensor]) -> np.ndarray:
    """‖t‖ of each (float64), in one transfer."""
    if not tensors:
        return np.zeros(0)
    with torch.no_grad():
        norms = torch.stack([torch.linalg.vector_norm(measured_tensor(t).double()) if t.numel()
                             else torch.zeros((), dtype=torch.float64, device=t.device)
                             for t in tensors])
    return norms.cpu().numpy()


def _local(t: torch.Tensor | None) -> torch.Tensor | None:
    if t is None:
        return None
    return (t.to_local() if hasattr(t, "to_local") else t).detach().reshape(-1)


def local_counts(backend, local: list[torch.Tensor], edges: np.ndarray) -> np.ndarray:
    """``(P, bins + 2)``: counts of each local shard on its parameter's global ``edges``, then
    below-range and above-range counts (NaN and Inf are counted with the figures), each shard
    histogrammed by the app's backend with its parameter's range."""
    bins = edges.shape[1] - 1
    out = np.zeros((len(local), bins + 2), np.int64)
    for i, g in enumerate(local):
        if g.numel():
            part = backend.finish(backend.begin(
                [g], None, True, bins, (float(edges[i, 0]), float(edges[i, -1]))), None)
            out[i, :bins], out[i, bins:] = part.counts[0], part.extra[0, :2]
    return out


FIGURES = 12  # columns gathered from each rank, see the module docstring


def shard_figures(local: list[ParamStats], before: np.ndarray, after: np.ndarray,
                  step: int) -> np.ndarray:
    """``(P, FIGURES)`` of this rank's shards, from the monitor's own figures."""
    out = np.zeros((len(local), FIGURES))
    for i, s in enumerate(local):
        if not s.has_grad:
            continue
        nans, infs = s.nan_count or 0, s.inf_count or 0
        finite = s.numel - nans - infs
        ratio = s.update_ratio
        if ratio is None or not math.isfinite(ratio) or before[i] == 0:
            delta = after[i] if before[i] == 0 else math.nan  # θ_before = 0: Δθ = θ_after
        else:
            delta = ratio * before[i]
        some = finite > 0
        out[i] = [finite, s.norm or 0.0, s.mean if some else 0.0, s.std if some else 0.0,
                  s.min if some else math.inf, s.max if some else -math.inf,
                  round((s.zero_fraction or 0.0) * s.numel), nans, infs, delta, before[i], 1.0]
    out[:, -1] = np.where(out[:, -1] > 0, step, -step - 1)  # the step, and whether a grad is here
    return out


def combine(table: np.ndarray, names: list[str], shapes: list[tuple[int, ...]],
            update_ratio: bool) -> list[ParamStats]:
    """The full parameters' ParamStats from every rank's ``shard_figures`` (``(world, P, F)``)."""
    out = []
    for i, (name, shape) in enumerate(zip(names, shapes, strict=True)):
        rows = table[:, i, :]
        here = rows[:, -1] >= 0
        numel = math.prod(shape)
        if not here.any():
            out.append(ParamStats(name, shape, numel, False))
            continue
        rows = rows[here]
        n = rows[:, 0]
        total = n.sum()
        nans, infs = int(rows[:, 7].sum()), int(rows[:, 8].sum())
        stats = ParamStats(name, shape, numel, True, norm=math.sqrt(float((rows[:, 1] ** 2).sum())),
                           zero_fraction=float(rows[:, 6].sum()) / numel if numel else 0.0,
                           nan_count=nans, inf_count=infs)
        if total > 0:
            mean = float((n * rows[:, 2]).sum() / total)
            m2 = float((n * (rows[:, 3] ** 2 + (rows[:, 2] - mean) ** 2)).sum())
            stats.mean, stats.std = mean, math.sqrt(max(m2 / total, 0.0))
            stats.min, stats.max = float(rows[:, 4].min()), float(rows[:, 5].max())
            stats.abs_max = max(abs(stats.min), abs(stats.max))
        else:
            stats.mean = stats.std = stats.min = stats.max = stats.abs_max = math.nan
        if update_ratio:
            delta = math.sqrt(float((rows[:, 9] ** 2).sum()))
            before = math.sqrt(float((rows[:, 10] ** 2).sum()))
            stats.update_ratio = (delta / before if before > 0 else
                                  (0.0 if delta == 0 else math.inf)) if not math.isnan(delta) \
                else math.nan
        out.append(stats)
    return out


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
        from gradexplorer.core.stats.backends.registry import make_backend, until_numba

        if self.failed:
            return
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        grads = [_local(p.grad) for _, p in named]
        has = [g is not None for g in grads]
        local = [g if g is not None else _local(p)[:0] for g, (_, p) in zip(grads, named, strict=True)]
        params = [_local(p) for _, p in named]
        if self._backend is None or until_numba(self._backend):  # torch until Numba loads
            self._backend = make_backend("auto", local or params)
        try:
            pending = self._backend.begin(local, params if self.update_ratio else None, False,
                                          self.bins, "auto", optimizer)
            before = _norms(params) if self.update_ratio else None
        except Exception as exc:  # noqa: BLE001 - the monitor never breaks the training loop
            self._stop(exc)
            return
        self._pending = (named, has, local, params, pending, before, step)

    def end(self, optimizer) -> StepGradients | None:
        if self._pending is None:
            return None
        named, has, local, params, pending, before, step = self._pending
        self._pending = None
        try:
            raw = self._backend.finish(pending, params if self.update_ratio else None, optimizer)
            shapes = [(n, tuple(t.shape)) for (n, _), t in zip(named, local, strict=True)]
            mine = build_step_gradients(step, shapes, has, raw, self.bins, "auto")
            zeros = np.zeros(len(named))
            after = _norms(params) if self.update_ratio else zeros
            figures = shard_figures(list(mine.params.values()),
                                    zeros if before is None else before, after, step)
            return self._reduce(named, local, figures, step)
        except Exception as exc:  # noqa: BLE001 - a timeout, a rank out of step, a failed figure
            self._stop(exc)
            return None

    def _stop(self, exc: BaseException) -> None:
        """Stop recording on this rank with one line; training goes on."""
        self.failed = True
        self._report(f"gradexplorer: recording stopped on rank {dist.get_rank()}: "
                     f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
                     "training goes on")

    def _reduce(self, named, local, figures: np.ndarray, step: int) -> StepGradients:
        gathered = [torch.zeros(figures.shape, dtype=torch.float64) for _ in range(self.world)]
        dist.all_gather(gathered, torch.from_numpy(figures), group=self.group)
        table = np.stack([t.numpy() for t in gathered])
        steps = np.where(table[:, :, -1] >= 0, table[:, :, -1], -table[:, :, -1] - 1)
        if table.shape[1] and not np.all(steps == step):
            raise ValueError(f"ranks are at different steps (this rank at {step})")
        names = [self.names.get(n, n) for n, _ in named]
        shapes = [tuple(p.shape) for _, p in named]
        params = combine(table, names, shapes, self.update_ratio)
        low = np.array([s.min if s.has_grad and s.min is not None else np.inf for s in params])
        high = np.array([s.max if s.has_grad and s.max is not None else -np.inf for s in params])
        edges = histogram_edges(*range_bounds(np.nan_to_num(low, nan=np.inf),
                                              np.nan_to_num(high, nan=-np.inf), "auto"), self.bins)
        counts = self._all_reduce(local_counts(self._backend, local, edges), dist.ReduceOp.SUM)
        histograms = {
            s.name: Histogram(edges[i], counts[i, : self.bins].astype(np.int64), s.nan_count,
                              s.inf_count, int(counts[i, self.bins]), int(counts[i, self.bins + 1]))
            for i, s in enumerate(params) if s.has_grad
        }
        by_name = {s.name: s for s in params}
        total = sum(s.numel for s in params if s.has_grad)
        record = StepGradients(step, global_norm(params), total, by_name, histograms, self.bins,
                               "auto")
        self.history = [record]
        return record

    def _all_reduce(self, array: np.ndarray, op) -> np.ndarray:
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        dist.all_reduce(tensor, op=op, group=self.group)
        return tensor.numpy()

    def latest(self) -> StepGradients | None:
        return self.history[-1] if self.history else None

