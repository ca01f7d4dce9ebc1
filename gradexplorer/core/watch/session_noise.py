"""The gradient noise scale and each parameter's gradient SNR in a session of ≥ 2 micro-batches
a step (``SessionConfig.accumulate``): ``watch``'s ``NoiseWatch`` (``core/watch/noise_watch.py``,
its capture ``core/steps/micro_batches.py``, its estimates ``core/stats/noise_scale.py``) fed by
the session's own step loop instead of an accumulation probe.

The session tells ``SessionNoise`` each attempt of a step and the end of each micro-batch's
backward (``TrainingSession.backward_watchers``); as one of the stack's reporters it takes the
step's figures after the optimizer step, from the gradient as accumulated (``.grad``: the session
neither clips nor scales, and its optimizers leave ``.grad`` alone), into ``result.noise`` (a
``NoiseStep``) and, where given, the run's ``noise_steps`` / ``noise_params`` tables. Each
micro-batch's loss is divided by ``k`` (``loss_divisor="k"``); the micro-batch size ``b`` is the
first dimension of the model's output. A step of one micro-batch has no figures; the capture is
set up at the first step of several and taken down at the next step of one (the smoothing starts
over when it comes back).
"""

from __future__ import annotations

from collections.abc import Callable

from gradexplorer.core.steps.accumulated import grad_norms
from gradexplorer.core.watch.noise_watch import NoiseSettings, NoiseWatch


class _Backwards:
    """What ``NoiseWatch`` takes of an accumulation probe: the parameters, and the callback it
    sets to be told each backward's end (the session calls it)."""

    def __init__(self, params: list) -> None:
        self._params = params
        self.on_backward: Callable[[bool], None] | None = None


class SessionNoise:
    """The noise scale of a session's steps (see the module); ``latest`` the last step's."""

    def __init__(self, settings: NoiseSettings | None = None, writer=None,
                 report: Callable[[str], None] | None = None) -> None:
        self.settings = settings or NoiseSettings()
        self.writer, self._report = writer, report or (lambda line: None)
        self.watch: NoiseWatch | None = None
        self._named: list = []
        self._probe: _Backwards | None = None

    @classmethod
    def on(cls, session, stack, settings: NoiseSettings | None = None, writer=None) -> SessionNoise:
        """A SessionNoise observing ``session`` as a reporter of ``stack`` (its failures said
        on the stack's channel), told of its backwards."""
        noise = cls(settings, writer, stack.tell)
        stack.reporters.append(noise)
        session.backward_watchers.append(noise)
        return noise

    @property
    def latest(self):
        """The last step's figures (a ``NoiseStep``), None before one or without the capture."""
        return None if self.watch is None else self.watch.latest

    def attempt(self, session) -> None:
        """An attempt of a step begins: the capture set up or taken down as its ``k`` asks,
        anything a backward outside the step (a gradient trace) or a failed attempt left
        dropped."""
        if session.config.accumulate < 2:
            self.remove()
            return
        if self.watch is None:
            seen: set[int] = set()
            self._named = [(n, p) for n, p in session.model.named_parameters()
                           if id(p) not in seen and not seen.add(id(p))]
            self._probe = _Backwards([p for _, p in self._named])
            self.watch = NoiseWatch(self._probe, session.model, [n for n, _ in self._named],
                                    self.settings, self._report, self.writer)
        capture = self.watch.capture
        capture.backward(False)  # references a backward outside the step left: dropped
        if capture.parts:  # backwards of a failed attempt: the step's sums start over
            capture.take()

    def backward_done(self, session) -> None:
        """A micro-batch's backward is over: its own gradient counted."""
        if self._probe is not None and self._probe.on_backward is not None:
            self._probe.on_backward(True)

    def after_step(self, session, result) -> None:
        """The step's figures (``result.noise``), from its gradient as accumulated."""
        if self.watch is None:
            return
        grads = [p.grad for _, p in self._named]
        present = [(n, g) for (n, _), g in zip(self._named, grads, strict=True) if g is not None]
        norms = grad_norms([g for _, g in present]) if present else None
        norms = [] if norms is None else norms.tolist()
        accumulated = {n: float(v) for (n, _), v in zip(present, norms, strict=True)}
        result.noise = self.watch.take(result.step, None, accumulated)

    def remove(self) -> None:
        """Take the capture down (its hooks off the model)."""
        if self.watch is not None:
            self.watch.remove()
        self.watch, self._probe, self._named = None, None, []
