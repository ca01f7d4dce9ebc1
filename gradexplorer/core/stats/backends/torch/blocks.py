"""A padded block layout for many tensors: every tensor starts on a block boundary.

One group of same-dtype tensors on one device is copied (a single ``_foreach_copy_``) into a
kept flat buffer viewed as ``(rows, block)``; each row belongs to exactly one tensor, and the
tail of each tensor's last row is padding that is never written after the layout is built. So
a per-tensor scalar reaches its elements by broadcasting a per-row column (no per-element
segment id, no gather), per-row reductions are plain ``dim=1`` reductions, and one small
``index_add_`` / ``segment_reduce`` over rows gives the per-tensor figure. Every full-length
buffer is kept between steps and written in place: on the CPU a fresh buffer costs more (page
faults) than the arithmetic in it.
"""

from __future__ import annotations

import torch

MAX_BLOCK = 1024


def block_size(numels: tuple[int, ...]) -> int:
    """A power of two near the mean tensor size, between 8 and ``MAX_BLOCK`` (bounds padding)."""
    mean = max(1, sum(numels) // max(1, len(numels)))
    return max(8, min(MAX_BLOCK, 1 << (mean - 1).bit_length()))


class Blocks:
    """Where each tensor sits in the padded buffer, plus the kept work buffers (all on device)."""

    def __init__(self, shapes: tuple[torch.Size, ...], dtype: torch.dtype, device: torch.device,
                 fill: float, source_dtype: torch.dtype | None = None) -> None:
        numels = tuple(int(torch.Size(s).numel()) for s in shapes)
        self.count, self.block = len(numels), block_size(numels)
        per = [-(-n // self.block) for n in numels]
        self.rows = sum(per)
        self.lengths = torch.tensor(numels, dtype=torch.float64).to(device)  # beside float64 counts
        self.row_counts = torch.tensor(per, dtype=torch.int64).to(device)
        seg = torch.repeat_interleave(torch.arange(self.count), torch.tensor(per, dtype=torch.int64),
                                      output_size=self.rows)
        self.segment = seg.to(device)
        self.pad_total = (torch.tensor(per, dtype=torch.float64) * self.block
                          - torch.tensor(numels, dtype=torch.float64)).to(device)
        self.ones = torch.ones(self.block, dtype=torch.float64, device=device)
        self.source_wide = (source_dtype or dtype) == torch.float64
        self._offsets: dict[int, torch.Tensor] = {}
        self.segment_column = self.segment[:, None].contiguous()
        self.flat = torch.full((self.rows * self.block,), fill, dtype=dtype, device=device)
        self.views, start = [], 0
        for shape, n, p in zip(shapes, numels, per, strict=True):
            self.views.append(self.flat[start: start + n].view(shape))
            start += p * self.block
        self.grid = self.flat.view(self.rows, self.block)
        self._buffers: dict[tuple[str, torch.dtype], torch.Tensor] = {}

    def load(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """Copy ``tensors`` into the buffer (one op); ``(rows, block)`` view, padding untouched."""
        torch._foreach_copy_(self.views, tensors)
        return self.grid

    def buffer(self, name: str, dtype: torch.dtype) -> torch.Tensor:
        """A kept ``(rows, block)`` work buffer (contents left from the last use)."""
        key = (name, dtype)
        found = self._buffers.get(key)
        if found is None:
            found = self._buffers[key] = torch.empty((self.rows, self.block), dtype=dtype,
                                                     device=self.flat.device)
        return found

    def per_row(self, values: torch.Tensor) -> torch.Tensor:
        """``(P,)`` per-tensor values as a ``(rows, 1)`` column to broadcast over the elements."""
        return torch.take(values, self.segment_column)

    def tensor_offsets(self, width: int) -> torch.Tensor:
        """``(rows, 1)`` int32 column ``tensor * width``: where each row's tensor's slots start
        in a ``(P, width)`` table (a per-tensor lookup or count)."""
        found = self._offsets.get(width)
        if found is None:
            found = self._offsets[width] = (self.segment_column * width).int()
        return found

    def sum_rows(self, values: torch.Tensor) -> torch.Tensor:
        """Per-row figures ``(rows, ...)`` summed into per-tensor ones ``(P, ...)``."""
        out = torch.zeros((self.count, *values.shape[1:]), dtype=values.dtype,
                          device=values.device)
        return out.index_add_(0, self.segment, values)

    def reduce_rows(self, values: torch.Tensor, reduce: str, initial: float) -> torch.Tensor:
        """Per-row min or max ``(rows,)`` into per-tensor ``(P,)`` (``initial`` where empty)."""
        return torch.segment_reduce(values, reduce, lengths=self.row_counts, unsafe=True,
                                    initial=initial)
