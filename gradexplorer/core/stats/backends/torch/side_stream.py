"""The fused statistics on a side CUDA stream, overlapping the optimizer step (opt-in, unmeasured).

``GradientMonitor(overlap=True)`` asks for it; it acts on CUDA devices only (CPU and MPS have no
streams: there it changes nothing). Per CUDA device, with ``current`` the stream the training
queues its work on when the monitor is called:

``begin`` (after backward, before ``optimizer.step()``)
  1. ``side.wait_stream(current)``: the side stream starts after the backward that wrote the
     gradients (backward ends by making the caller's current stream wait for its own streams);
  2. on ``side``: the gradients, and the weights if update ratios are wanted, are copied into
     their kept block buffers (``Blocks.load``);
  3. ``grad.record_stream(side)`` for each gradient, then ``current.wait_stream(side)``: all the
     training queues next (the optimizer step, which writes the weights in place, ``zero_grad``,
     the next backward) runs on the device after those copies;
  4. on ``side``: every statistic, from the copies only, overlapping the optimizer step.

``finish`` (after ``optimizer.step()``)
  5. ``side.wait_stream(current)``: the weights "after" are read once the step has written them;
  6. on ``side``: the update norms, one ``cat`` and one copy to the host; ``.cpu()`` waits for
     the side stream only. No other synchronisation is added.

Memory (the caching allocator hands a freed block to later allocations *of the stream that
allocated it* without waiting for any other stream):

- everything made while the side stream is current (the kept ``Blocks`` and their work buffers,
  the results, every temporary, in ``begin`` and ``finish``) is allocated on it and used on it
  only: nothing made here crosses to another stream;
- the gradients cross (made by the training's streams, read on ``side`` in step 2). A gradient
  freed after step 3 (``zero_grad`` before ``finish``, say) has its memory reused by its own
  stream; ``record_stream(side)`` makes the allocator wait for the side stream's work first, so
  this holds even when that stream is not ``current`` (a model that runs layers on its own
  streams). A host-only call per gradient, no kernel; it appears as P ``aten.record_stream``
  ops in an op count;
- the weights cross too (read on ``side`` in steps 2 and 5). They are parameters, alive across
  the step, and the host waits for the side stream at the end of ``finish``, so no weight can
  be freed and reused under a read unless the model replaces a parameter between ``begin`` and
  ``finish``, which no optimizer does.

The figures are those of the same stream, bit for bit where the ops are deterministic: the same
ops on the same data in the same order, only queued elsewhere. Not measured: no GPU was lent
to this work (``bench/histograms.py --device cuda`` prints it as "gradexplorer, side stream").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager

import torch


class Handoff:
    """The streams of one ``SideStreams.entered`` scope: ``(current, side)`` per CUDA device."""

    def __init__(self) -> None:
        self.pairs: dict[torch.device, tuple[torch.cuda.Stream, torch.cuda.Stream]] = {}
        self.released = False

    def release(self, grads: list[torch.Tensor]) -> None:
        """Step 3: the gradients' memory waits for the side stream's reads, and each device's
        current stream waits for everything queued on its side stream so far (the copies)."""
        if not self.pairs:
            return
        for g in grads:
            pair = self.pairs.get(g.device)
            if pair is not None:
                g.record_stream(pair[1])
        self.join()

    def join(self) -> None:
        """Each device's current stream waits for everything queued on its side stream."""
        self.released = True
        for current, side in self.pairs.values():
            current.wait_stream(side)


class SideStreams:
    """One kept side stream per CUDA device; ``enabled=False``: every scope is a no-op."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._kept: dict[torch.device, torch.cuda.Stream] = {}

    def applies(self, device: torch.device) -> bool:
        """Whether work on ``device`` goes to a side stream."""
        return self.enabled and device.type == "cuda"

    def stream(self, device: torch.device) -> torch.cuda.Stream:
        """The side stream of ``device`` (made on first use, then kept)."""
        found = self._kept.get(device)
        if found is None:
            found = self._kept[device] = torch.cuda.Stream(device=device)
        return found

    @contextmanager
    def entered(self, devices: Iterable[torch.device]) -> Iterator[Handoff]:
        """Make each CUDA device's side stream current after it has waited for the stream that
        was current (steps 1 and 5); restore the current streams on leaving."""
        handoff = Handoff()
        with ExitStack() as stack:
            for device in dict.fromkeys(devices):
                if not self.applies(device):
                    continue
                current, side = torch.cuda.current_stream(device), self.stream(device)
                side.wait_stream(current)
                stack.enter_context(torch.cuda.stream(side))
                handoff.pairs[device] = (current, side)
            try:
                yield handoff
            except BaseException:  # a failed step still leaves no copy racing the training
                if not handoff.released:
                    handoff.join()
                raise
