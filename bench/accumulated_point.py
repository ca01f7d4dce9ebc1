"""The as-accumulated point of ``watch`` timed where it runs (inside backward), for
``bench/histograms.py``: its hooks and end-of-backward norms, idle during other methods' steps;
at the step, what ``watch`` does with the point (``accumulated_by_name``: the proof's check, or
the applied norms taken over once the loop is trusted). The applied point's norms themselves are
the monitor's work (the "gradexplorer" row), measured here outside the time of this point."""

from __future__ import annotations

import time

import torch

from gradexplorer.core.recorder.step_points import accumulated_by_name
from gradexplorer.core.stats.accumulated import grad_norms
from gradexplorer.core.stats.accumulation_probe import AccumulationProbe
from gradexplorer.core.stats.records import ParamStats, StepGradients


class TimedProbe(AccumulationProbe):
    """watch's probe, its work timed (and counted) where it runs: hooks, end-of-backward norms;
    idle during other methods' steps."""

    def __init__(self, named, owner, model, reuse) -> None:
        self.owner = owner
        super().__init__(named, model=model, reuse=reuse)

    def _timed(self, work, *args):
        timed = self.owner.timed
        if timed not in self.owner.session.observers:
            return None
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

    def _backward_done(self) -> None:
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
