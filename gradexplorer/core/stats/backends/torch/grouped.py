"""Device statistics backend: one fused pass per (device, dtype) group, one transfer per device.

Used for CUDA/MPS gradients (and on the CPU when Numba is missing or asked for). Gradients are
grouped by device and dtype; each group is copied by one ``_foreach_copy_`` into a kept padded
block buffer (``blocks.Blocks``) and ``fused`` computes every figure of every parameter in a
fixed number of ops (on CUDA with Triton, ``triton.stats``: two kernels, two reads of the
data). Everything stays on the device until ``finish`` (after the optimizer step) copies it to
the host: one transfer per device, no other synchronisation. The update ratio is measured in
the same way: the weights are copied into their block buffer before the step and compared with
what they hold after it. Apple's MPS has no float64: its groups are brought to the host first
(one ``cat`` and one transfer per group, before the optimizer step) and computed there.
With ``overlap`` (opt-in), CUDA groups run on a side stream beside the optimizer step
(``side_stream``: the ordering and memory argument).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from gradexplorer.core.messages.errors import first_line
from gradexplorer.core.stats.backends.raw import INFS, MOMENT_COLUMNS, NANS, RawStats
from gradexplorer.core.stats.backends.torch import fused, fused_bins
from gradexplorer.core.stats.backends.torch.blocks import Blocks
from gradexplorer.core.stats.backends.torch.side_stream import SideStreams
from gradexplorer.core.stats.backends.triton import stats as triton_stats
from gradexplorer.core.stats.histogram import HistRange

F64 = torch.float64
Key = tuple[torch.device, torch.dtype]


def lacks_float64(device: torch.device) -> bool:
    """Apple's MPS has no float64, which the exact sums need."""
    return device.type == "mps"


def with_float64(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``tensors`` themselves, or, on a device without float64, host copies made by one ``cat``
    and one transfer (a synchronisation there, before the optimizer step)."""
    if not lacks_float64(tensors[0].device):
        return tensors
    flat = torch.cat([t.reshape(-1) for t in tensors]).cpu()
    return [part.view(t.shape) for part, t in zip(flat.split([t.numel() for t in tensors]),
                                                  tensors, strict=True)]


def groups_of(tensors: list[torch.Tensor]) -> dict[Key, list[int]]:
    """Indices of ``tensors`` by (device, dtype), in first-seen order."""
    out: dict[Key, list[int]] = {}
    for i, t in enumerate(tensors):
        out.setdefault((t.device, t.dtype), []).append(i)
    return out


@dataclass
class GroupResult:
    """One group's device tensors, waiting for the transfer."""

    indices: list[int]
    rows: torch.Tensor
    edges: torch.Tensor | None = None
    counts: torch.Tensor | None = None


@dataclass
class TorchPending:
    """Every group's queued statistics and the weights' flat copies taken before the step."""

    count: int
    groups: list[GroupResult] = field(default_factory=list)
    copies: list[tuple[list[int], Blocks, Blocks, torch.Tensor]] | None = None


class FusedTorch:
    """Keeps each group's ``Blocks`` (layout and work buffers) on its device between steps."""

    def __init__(self, triton: bool = True, overlap: bool = False) -> None:
        self._blocks: dict[tuple, Blocks] = {}
        self.triton = triton  # the Triton kernels where they can run (False: eager ops only)
        self.streams = SideStreams(overlap)  # CUDA work on a side stream (``side_stream``)

    def blocks(self, tensors: list[torch.Tensor], role: str) -> Blocks:
        """The kept layout of ``tensors``: gradients pad with +Inf in their working dtype;
        weights are held as float64 with zero padding."""
        t = tensors[0]
        key = (role, t.device, t.dtype, tuple(x.shape for x in tensors))
        found = self._blocks.get(key)
        if found is None:
            if len(self._blocks) > 24:
                self._blocks.clear()
            if role == "grad":
                found = Blocks(key[3], fused.working_dtype(t.dtype), t.device, fused.INF)
            else:
                found = Blocks(key[3], fused.F64, t.device, 0.0, source_dtype=t.dtype)
            self._blocks[key] = found
        return found

    def begin(self, grads: list[torch.Tensor], params: list[torch.Tensor] | None,
              want_histograms: bool, bins: int, hist_range: HistRange) -> TorchPending:
        """Queue every statistic on the devices; copy ``params`` if update ratios are wanted.

        With ``overlap`` on a CUDA device every copy is taken before any statistic is queued:
        the training's stream waits for the copies only, and the statistics run beside the
        optimizer step (``side_stream``). Otherwise the weights are copied last, so that the
        statistics read the gradients' buffers while the CPU's caches still hold them."""
        pending = TorchPending(len(grads))
        grad_groups = groups_of(grads)
        param_groups = groups_of(params) if params is not None else {}
        devices = [key[0] for key in (*grad_groups, *param_groups)]
        with torch.no_grad(), self.streams.entered(devices) as handoff:
            loaded = []
            for indices in grad_groups.values():
                tensors = with_float64([grads[i] for i in indices])
                blocks = self.blocks(tensors, "grad")
                loaded.append((indices, blocks, blocks.load(tensors)))
            copies = self._copy_weights(params, param_groups) if handoff.pairs else None
            handoff.release(grads)
            for indices, blocks, grid in loaded:
                pending.groups.append(self._statistics(indices, grid, blocks, want_histograms,
                                                       bins, hist_range))
            if copies is None:
                copies = self._copy_weights(params, param_groups)
            if params is not None:
                pending.copies = [(indices, before, after, fused.weight_norms(before))
                                  for indices, before, after in copies]
        return pending

    def _copy_weights(self, params, param_groups: dict[Key, list[int]]):
        """Each group's weights loaded into its "before" layout (and its "after" one made)."""
        copies = []
        for indices in param_groups.values():
            tensors = with_float64([params[i] for i in indices])
            before, after = self.blocks(tensors, "before"), self.blocks(tensors, "after")
            before.load(tensors)
            copies.append((indices, before, after))
        return copies

    def _statistics(self, indices: list[int], grid: torch.Tensor, blocks: Blocks,
                    want_histograms: bool, bins: int, hist_range: HistRange) -> GroupResult:
        """One group's figures from its loaded block buffer (Triton kernels where usable)."""
        if self.triton and triton_stats.usable(grid.device, bins):  # two reads, two kernels
            found = self._by_kernels(grid, blocks, want_histograms, bins, hist_range)
            if found is not None:
                return GroupResult(indices, *found)
        counted = want_histograms and hist_range in ("auto", "symmetric")
        rows, prepared = fused.moments(grid, blocks, not counted)
        result = GroupResult(indices, rows)
        if want_histograms:
            result.edges, result.counts = fused_bins.histograms(prepared, blocks, rows,
                                                                bins, hist_range)
        return result

    def _by_kernels(self, *args):
        """``triton.stats.moments_and_histograms(*args)``, or None (and the eager path from now
        on, with one warning) where Triton cannot build them: no C compiler for its launcher,
        an unsupported GPU, ..."""
        try:
            return triton_stats.moments_and_histograms(*args)
        except Exception as exc:  # noqa: BLE001 - any build failure: the eager path is exact too
            self.triton = False
            warnings.warn(f"gradexplorer: the Triton statistics kernels failed ({first_line(exc)});"
                          " using the eager fused path", RuntimeWarning, stacklevel=4)
            return None

    def nonfinite(self, pending: TorchPending) -> bool:
        """Whether the queued gradients hold NaN/Inf: their NaN and Inf counts summed in each
        group, one scalar read each (waiting for the statistics, not for more work)."""
        devices = [g.rows.device for g in pending.groups]
        with torch.no_grad(), self.streams.entered(devices):
            return any(bool(g.rows[:, NANS: INFS + 1].sum() > 0) for g in pending.groups)

    def finish(self, pending: TorchPending, params: list[torch.Tensor] | None) -> RawStats:
        """Update norms (if copies were taken), then one device-to-host transfer per device
        (with ``overlap``, on the side streams: the host waits for those only)."""
        updates = []
        devices = [g.rows.device for g in pending.groups]
        devices += [before.flat.device for _, before, _, _ in pending.copies or []]
        with torch.no_grad(), self.streams.entered(devices):
            if pending.copies is not None and params is not None:
                for indices, before, after, weight_norms in pending.copies:
                    now = with_float64([params[i] for i in indices])
                    moved = fused.update_norms(before, after, now)
                    updates.append((indices, torch.stack([moved, weight_norms], 1)))
            host = transfer(pending, updates)
        return unpack(pending, updates, host)


def _parts(pending: TorchPending, updates) -> list[torch.Tensor]:
    parts = []
    for g in pending.groups:
        parts.append(g.rows.reshape(-1))
        if g.edges is not None:
            parts += [g.edges.reshape(-1), g.counts.to(F64).reshape(-1)]
    parts += [norms.reshape(-1) for _, norms in updates]
    return parts


def transfer(pending: TorchPending, updates) -> list[np.ndarray]:
    """Every part as float64 numpy, one ``cat`` and one copy to the host per device."""
    parts = _parts(pending, updates)
    by_device: dict[torch.device, list[int]] = {}
    for i, p in enumerate(parts):
        by_device.setdefault(p.device, []).append(i)
    out: list[np.ndarray] = [np.zeros(0)] * len(parts)
    for indices in by_device.values():
        host = torch.cat([parts[i] for i in indices]).cpu().numpy()
        at = 0
        for i in indices:
            out[i] = host[at: at + parts[i].numel()]
            at += parts[i].numel()
    return out


def unpack(pending: TorchPending, updates, host: list[np.ndarray]) -> RawStats:
    """Scatter each group's host arrays into rows in the order the gradients were given."""
    raw = RawStats(np.zeros((pending.count, MOMENT_COLUMNS)))
    chunks = iter(host)
    for g in pending.groups:
        raw.moments[g.indices] = next(chunks).reshape(len(g.indices), MOMENT_COLUMNS)
        if g.edges is not None:
            width = g.edges.shape[1]
            if raw.edges is None:
                raw.edges = np.zeros((pending.count, width))
                raw.counts = np.zeros((pending.count, width - 1), np.int64)
                raw.extra = np.zeros((pending.count, 4), np.int64)
            raw.edges[g.indices] = next(chunks).reshape(len(g.indices), width)
            slots = next(chunks).reshape(len(g.indices), width + 3).astype(np.int64)
            raw.counts[g.indices] = slots[:, : width - 1]
            raw.extra[g.indices] = slots[:, width - 1:][:, [2, 3, 0, 1]]  # below, above, NaN, Inf
    if updates:
        raw.update = np.full((sum(len(i) for i, _ in updates), 2), np.nan)
        for indices, _ in updates:
            raw.update[indices] = next(chunks).reshape(len(indices), 2)
    return raw
