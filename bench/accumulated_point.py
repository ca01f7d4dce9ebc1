"""The as-accumulated point of ``watch`` timed where it runs (inside backward), for
``bench/histograms.py``: its hooks and end-of-backward norms, idle during other methods' steps."""

from __future__ import annotations

import time

import torch

from gradexplorer.core.stats.accumulated import AccumulationProbe


class TimedProbe(AccumulationProbe):
    """watch's probe, its work timed (and counted) where it runs: hooks, end-of-backward norms;
    idle during other methods' steps."""

    def __init__(self, named, owner, model) -> None:
        self.owner = owner
        super().__init__(named, model=model)

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
    """The as-accumulated point ``watch`` adds (installed on the first step, not counted)."""

    timed, elsewhere, probe, session = None, 0.0, None, None

    def __init__(self, counter) -> None:
        self.counter = counter  # a TorchDispatchMode class counting aten ops (``ops``)

    def after_backward(self, session, step):
        if self.probe is None:
            self.session = session
            self.probe = TimedProbe(list(session.model.named_parameters()), self, session.model)
        self.probe.take()
