"""The as-accumulated point of ``watch`` timed where it runs (inside backward), for
``bench/histograms.py``: its hooks, both end-of-backward engine callbacks and its
end-of-backward norms, idle during other methods' steps; at the step, what ``watch`` does with
the point (``accumulated_by_name``: the proof's check, or the applied norms taken over once the
loop is trusted). The applied point's norms themselves are the monitor's work (the
"gradexplorer" row), measured here outside the time of this point.

Not counted either: the first read of each ``.grad`` after backward. Backward's memory traffic
leaves those tensors' metadata out of the caches; whichever reads them first pays for it, and
the applied point reads every one (so does the optimizer): without this point it pays it
itself. Measured interleaved in one process (load ~4): 28 ``.grad`` reads right after backward
take 55 µs, the same reads again 8 µs; the applied norms alone took 429 µs, 370 µs after the
probe had read the gradients. The point's own reads (``.grad`` again, every version counter, at
backward's end and at the step) are counted."""

from __future__ import annotations

import time
from functools import partial

import torch

from gradexplorer.core.stats.records import ParamStats, StepGradients
from gradexplorer.core.steps.accumulated import grad_norms
from gradexplorer.core.steps.points import accumulated_by_name
from gradexplorer.core.steps.probe import AccumulationProbe


class TimedProbe(AccumulationProbe):
    """watch's probe, its work timed (and counted) where it runs: hooks, both engine callbacks,
    end-of-backward norms; idle during other methods' steps."""

    def __init__(self, named, owner, model, reuse) -> None:
        self.owner = owner
        super().__init__(named, model=model, reuse=reuse)
        self._after_others = partial(self._timed, self._after_others)  # the engine callback

    def _running(self) -> bool:
        """This point's step (not another method's)."""
        return self.owner.timed in self.owner.session.observers

    def _timed(self, work, *args):
        if not self._running():
            return None
        timed = self.owner.timed
        if timed.counting:
            with self.owner.counter() as counter:
                work(*args)
            timed.ops += counter.ops
            return None
        start = time.perf_counter()  # nothing else between the two reads of the clock
        work(*args)
        if timed.settle and timed.device.startswith("cuda"):
            torch.cuda.synchronize()
        self.owner.elsewhere += time.perf_counter() - start
        return None

    def _on_output(self, *args) -> None:
        self._timed(super()._on_output, *args)

    def _on_grad(self, param) -> None:
        self._timed(super()._on_grad, param)

    def _on_anchor(self, param) -> None:
        self._timed(super()._on_anchor, param)

    def _backward_done(self) -> None:
        if self._running():  # not timed: the first read of each ``.grad`` after backward,
            for p in self._params:  # which the applied point pays when it comes first
                p.grad  # noqa: B018  (see the module's docstring)
        self._timed(super()._backward_done)


class AccumulatedPoint:
    """The as-accumulated point ``watch`` adds (installed on the first step, not counted);
    ``reuse=False``: measured at every step, as in a loop that writes ``.grad`` between backward
    and step (clipping, a GradScaler), where the applied norms can never be taken over."""

    timed, elsewhere, probe, session, names = None, 0.0, None, None, None

    def __init__(self, counter, reuse: bool = True) -> None:
        self.counter = counter  # a TorchDispatchMode class counting aten ops (``ops``)
        self.reuse = reuse

    def after_backward(self, session, step):
        if self.probe is None:
            self.session = session
            self.probe = TimedProbe(list(session.model.named_parameters()), self, session.model,
                                    self.reuse)
            self.names = [n for n, _ in self.probe.named]
        accum = self.probe.take()
        start = time.perf_counter()  # the applied point's norms: the monitor's, not this point's
        record = self._applied(step)
        self.elsewhere -= time.perf_counter() - start  # (Timed adds ``elsewhere`` to its time)
        accumulated_by_name(accum, self.names, record)

    def _applied(self, step) -> StepGradients:
        """The applied point's per-parameter norms, as the monitor's record holds them."""
        params = [(n, p) for n, p in self.probe.named if p.grad is not None]
        norms = grad_norms([p.grad for _, p in params]).tolist()
        stats = {n: ParamStats(n, tuple(p.shape), p.numel(), True, norm=v)
                 for (n, p), v in zip(params, norms, strict=True)}
        return StepGradients(step, None, sum(p.numel() for _, p in params), stats, {})
