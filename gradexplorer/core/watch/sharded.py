"""Sharded gradients (DTensor: FSDP2's ``fully_shard``, tensor parallelism's
``parallelize_module``, both on a 2-D mesh): each rank holds a part of every gradient.

Each rank measures the part it counts (``placements.counted_local``: sharded pieces all,
replicated ones once, partial ones reduced first) and the figures of the full parameter come
from two collectives per recorded step, both on small per-parameter float64/int64 tensors on
the CPU, never on gradients:

1. all-gather of ``(P, 13)``: each rank's figures of its part (finite count, norm, mean, std,
   min, max, zeros, NaN, Inf, ‖Δθ‖, ‖θ‖ before the step, the norm as accumulated at the end of
   backward) and the step number (a check that every rank is at the same step); every rank
   then combines them the same way (sums of squares for the norms, Chan's pairwise formula for
   mean and std, global min and max);
2. SUM of ``(P, bins + 2)``: local histogram counts on the global edges, below and above.

Local figures are the app's own (its statistics backends and ``build_step_gradients``), so this
module only combines published figures. The collectives run on a gloo group of their own with a
timeout, from inside ``optimizer.step()``, which the ranks run together; a rank out of step
(or a timeout) stops recording with one message, never a hang. A parameter whose placement
cannot be combined gets no figures (one warning names it and its placement), and the step no
global norm: never a wrong one.
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
from gradexplorer.core.watch.placements import UnreadablePlacement, counted_local, is_dtensor

COLLECTIVE_TIMEOUT = timedelta(seconds=120)


def sharded_mode(model: nn.Module) -> str | None:
    """``"fsdp2"``, ``"tp"`` or ``"fsdp2+tp"`` when ``model`` holds DTensor parameters (FSDP2's
    ``fully_shard``, tensor parallelism's ``parallelize_module``, or both on a 2-D mesh), else None."""
    from torch.distributed.tensor import DTensor

    meshes = [p.device_mesh for p in model.parameters() if isinstance(p, DTensor)]
    if not meshes:
        return None
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        FSDPModule = ()  # noqa: N806
    fsdp = any(isinstance(m, FSDPModule) for m in model.modules())
    if not fsdp:
        return "tp"
    return "fsdp2+tp" if any(mesh.ndim > 1 for mesh in meshes) else "fsdp2"


def refuse_fsdp1(model: nn.Module) -> None:
    from gradexplorer.core.messages.errors import UserError

    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:  # pragma: no cover - torch without FSDP
        return
    if any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        raise UserError("watch does not read FSDP1 (FullyShardedDataParallel) flat parameters; "
                        "shard with torch.distributed.fsdp.fully_shard (FSDP2) instead")


def refuse_ddp_over_tp(module: nn.Module) -> None:
    """DDP over a tensor-parallel module (``_pre_dp_module_transform`` turns its DTensor
    parameters into plain local ones, their placements kept aside): refused, not misread."""
    from gradexplorer.core.messages.errors import UserError

    if sharded_mode(module) or any(hasattr(p, "_st_info") for p in module.parameters()):
        raise UserError("watch does not read DDP over tensor parallelism (its parameters are "
                        "each rank's local shards); shard the data-parallel mesh dimension with "
                        "fully_shard (FSDP2 x TP), which watch records exactly")


def _norms(tensors: list[torch.Tensor]) -> np.ndarray:
    """‖t‖ of each (float64), in one transfer."""
    if not tensors:
        return np.zeros(0)
    with torch.no_grad():
        norms = torch.stack([torch.linalg.vector_norm(measured_tensor(t).double()) if t.numel()
                             else torch.zeros((), dtype=torch.float64, device=t.device)
                             for t in tensors])
    return norms.cpu().numpy()


def _empty(t: torch.Tensor) -> torch.Tensor:
    return (t.to_local() if is_dtensor(t) else t).detach().reshape(-1)[:0]


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


FIGURES = 13  # columns gathered from each rank, see the module docstring
ACCUMULATED = 11  # the column of the norm as accumulated


def shard_figures(local: list[ParamStats], before: np.ndarray, after: np.ndarray,
                  step: int, accumulated: np.ndarray | None = None) -> np.ndarray:
    """``(P, FIGURES)`` of this rank's shards, from the monitor's own figures."""
    out = np.zeros((len(local), FIGURES))
    if accumulated is not None:
        out[:, ACCUMULATED] = accumulated
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
        out[i, :ACCUMULATED] = [
            finite, s.norm or 0.0, s.mean if some else 0.0, s.std if some else 0.0,
            s.min if some else math.inf, s.max if some else -math.inf,
            round((s.zero_fraction or 0.0) * s.numel), nans, infs, delta, before[i]]
        out[i, -1] = 1.0
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
    (the same on every rank). ``probe``: a ``ShardedProbe`` whose local norms as accumulated
    travel in the same all-gather."""

    def __init__(self, model: nn.Module, names: dict[str, str], bins: int, update_ratio: bool,
                 report) -> None:
        self.model, self.names, self.bins = model, names, bins
        self.update_ratio = update_ratio
        self.world = dist.get_world_size()
        self.group = dist.new_group(backend="gloo", timeout=COLLECTIVE_TIMEOUT)
        self.failed = False
        self.probe = None
        self.unreadable: dict[str, str] = {}  # parameter -> its placement, warned about once
        self._report = report
        self._backend = None
        self._pending = None
        self.history: list[StepGradients] = []

    def _counted(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """The part of ``t`` this rank counts; empty (and the parameter noted) when its
        placement cannot be combined."""
        try:
            return counted_local(t)
        except UnreadablePlacement as exc:
            name = self.names.get(name, name)
            if name not in self.unreadable and dist.get_rank() == 0:
                self._report(f"gradexplorer: {name} has a gradient placed {exc}, which watch cannot "
                             "combine across ranks: it gets no figures (nor the step a global norm)")
            self.unreadable[name] = f"placement {exc} cannot be combined across ranks"
            return _empty(t)

    def begin(self, optimizer, step: int) -> None:
        from gradexplorer.core.stats.backends.registry import make_backend, until_numba

        if self.failed:
            return
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        has = [p.grad is not None for _, p in named]
        try:
            params = [self._counted(n, p) for n, p in named]
            local = [self._counted(n, p.grad) if p.grad is not None else prm[:0]
                     for (n, p), prm in zip(named, params, strict=True)]
            accumulated = self._accumulated(named)
        except Exception as exc:  # noqa: BLE001 - the monitor never breaks the training loop
            self._stop(exc)
            return
        if self._backend is None or until_numba(self._backend):  # torch until Numba loads
            self._backend = make_backend("auto", local or params)
        try:
            pending = self._backend.begin(local, params if self.update_ratio else None, False,
                                          self.bins, "auto", optimizer)
            before = _norms(params) if self.update_ratio else None
        except Exception as exc:  # noqa: BLE001 - the monitor never breaks the training loop
            self._stop(exc)
            return
        self._pending = (named, has, local, params, pending, before, step, accumulated)

    def _accumulated(self, named) -> tuple | None:
        """(the probe's AccumulatedNorms of this step, this rank's part of each norm in
        ``named``'s order), None without one."""
        if self.probe is None:
            return None
        accum, self.probe.taken = self.probe.taken, None  # this step's, read once
        if accum is None or accum.norms is None:
            return None
        values = iter(accum.host())
        by_id = {id(p): next(values) for (_, p), here in zip(self.probe.named, accum.present,
                                                             strict=True) if here}
        return accum, np.array([by_id.get(id(p), 0.0) for _, p in named], np.float64)

    def end(self, optimizer) -> StepGradients | None:
        if self._pending is None:
            return None
        named, has, local, params, pending, before, step, accumulated = self._pending
        self._pending = None
        try:
            raw = self._backend.finish(pending, params if self.update_ratio else None, optimizer)
            shapes = [(n, tuple(t.shape)) for (n, _), t in zip(named, local, strict=True)]
            mine = build_step_gradients(step, shapes, has, raw, self.bins, "auto")
            zeros = np.zeros(len(named))
            after = _norms(params) if self.update_ratio else zeros
            figures = shard_figures(list(mine.params.values()),
                                    zeros if before is None else before, after, step,
                                    None if accumulated is None else accumulated[1])
            return self._reduce(named, local, figures, step, accumulated)
        except Exception as exc:  # noqa: BLE001 - a timeout, a rank out of step, a failed figure
            self._stop(exc)
            return None

    def _stop(self, exc: BaseException) -> None:
        """Stop recording on this rank with one line; training goes on."""
        self.failed = True
        self._report(f"gradexplorer: recording stopped on rank {dist.get_rank()}: "
                     f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
                     "training goes on")

    def _reduce(self, named, local, figures: np.ndarray, step: int, accumulated) -> StepGradients:
        gathered = [torch.zeros(figures.shape, dtype=torch.float64) for _ in range(self.world)]
        dist.all_gather(gathered, torch.from_numpy(figures), group=self.group)
        table = np.stack([t.numpy() for t in gathered])
        steps = np.where(table[:, :, -1] >= 0, table[:, :, -1], -table[:, :, -1] - 1)
        if table.shape[1] and not np.all(steps == step):
            raise ValueError(f"ranks are at different steps (this rank at {step})")
        names = [self.names.get(n, n) for n, _ in named]
        shapes = [tuple(p.shape) for _, p in named]
        params = [ParamStats(s.name, s.shape, s.numel, True, not_recorded=self.unreadable[s.name])
                  if s.name in self.unreadable and s.has_grad else s
                  for s in combine(table, names, shapes, self.update_ratio)]
        if accumulated is not None:
            self._whole_accumulated(accumulated, named, names, table)
        low = np.array([s.min if s.has_grad and s.min is not None else np.inf for s in params])
        high = np.array([s.max if s.has_grad and s.max is not None else -np.inf for s in params])
        edges = histogram_edges(*range_bounds(np.nan_to_num(low, nan=np.inf),
                                              np.nan_to_num(high, nan=-np.inf), "auto"), self.bins)
        counts = self._all_reduce(local_counts(self._backend, local, edges), dist.ReduceOp.SUM)
        histograms = {
            s.name: Histogram(edges[i], counts[i, : self.bins].astype(np.int64), s.nan_count,
                              s.inf_count, int(counts[i, self.bins]), int(counts[i, self.bins + 1]))
            for i, s in enumerate(params) if s.has_grad and s.norm is not None
        }
        by_name = {s.name: s for s in params}
        total = sum(s.numel for s in params if s.has_grad)
        record = StepGradients(step, global_norm(params), total, by_name, histograms, self.bins,
                               "auto", not_recorded={n: c for n, c in self.unreadable.items()
                                                     if n in by_name and by_name[n].has_grad})
        self.history = [record]
        return record

    def _whole_accumulated(self, accumulated, named, names, table: np.ndarray) -> None:
        """The probe's norms as accumulated, made the whole parameters' (√Σ of the ranks'
        parts²); none at all where a parameter's placement cannot be combined."""
        accum, _ = accumulated
        whole = np.sqrt((table[:, :, ACCUMULATED] ** 2).sum(axis=0))
        by_id = {id(p): (n, value) for (_, p), n, value in zip(named, names, whole, strict=True)}
        kept = [by_id.get(id(p)) for (_, p), here in zip(self.probe.named, accum.present,
                                                         strict=True) if here]
        readable = all(k is not None and k[0] not in self.unreadable for k in kept)
        accum.norms = np.array([k[1] for k in kept], np.float64) if readable else None

    def _all_reduce(self, array: np.ndarray, op) -> np.ndarray:
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        dist.all_reduce(tensor, op=op, group=self.group)
        return tensor.numpy()

    def latest(self) -> StepGradients | None:
        return self.history[-1] if self.history else None
