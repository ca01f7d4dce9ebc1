"""GradientMonitor: per-parameter gradient statistics and histograms every step, as an observer.

    monitor = GradientMonitor(bins=64, histogram_every=1, history=256, hist_range="auto")
    session.add_observer(monitor)
    result = session.step()
    result.gradients  # StepGradients

On CPU tensors the work is three Numba reads per gradient (min/max, scaled shifted sums, exact
histogram) plus a copy of the weights for the measured update ratio; on other devices it is a
fixed number of fused torch ops per (device, dtype) group, whatever the parameter count, with a
single host transfer per device after the optimizer step.
"""

from __future__ import annotations

import time

import torch
from psygnal import Signal
from torch import nn

from gradexplorer.core.messages.errors import emit_guarded, first_line, measured, renamed, warn_not_recorded
from gradexplorer.core.stats.backends.registry import BACKENDS, make_backend, until_numba
from gradexplorer.core.stats.backends.step_arrays import build_step_gradients
from gradexplorer.core.stats.histogram import HistRange, parse_hist_range
from gradexplorer.core.stats.history import GradientHistory, HistogramMatrix
from gradexplorer.core.stats.measured import measured_tensor, measured_tensors  # noqa: F401 - re-exported
from gradexplorer.core.stats.records import (
    STAT_FIELDS,
    Histogram,
    ParamStats,
    StepGradients,
    global_norm,
)
from gradexplorer.core.steps.ledger import fill_session_ledger

__all__ = [
    "BACKENDS", "STAT_FIELDS", "GradientHistory", "GradientMonitor", "Histogram",
    "HistogramMatrix", "ParamStats", "StepGradients", "gradient_stats", "nonfinite_counts",
]
def _named(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    return list(model.named_parameters())


def _shape(p: torch.Tensor) -> tuple[int, ...]:
    """The shape of what is measured of ``p`` (a complex one: its parts, last dimension 2)."""
    return (*p.shape, 2) if p.is_complex() else tuple(p.shape)


def gradient_stats(model: nn.Module, bins: int = 64, hist_range: HistRange = "auto",
                   histograms: bool = True, step: int = 0, backend: str = "auto") -> StepGradients:
    """Statistics (and histograms) of the gradients ``model`` holds now, without a monitor."""
    named = _named(model)
    grads = [measured_tensor(p.grad) for _, p in named if p.grad is not None]
    engine = make_backend(backend, grads)
    hist_range = parse_hist_range(hist_range)
    raw = engine.finish(engine.begin(grads, None, histograms, bins, hist_range), None)
    shapes = [(n, _shape(p)) for n, p in named]
    return build_step_gradients(step, shapes, [p.grad is not None for _, p in named], raw,
                                bins, hist_range)


class GradientMonitor:
    """Session observer computing StepGradients every step into ``result.gradients``.

    Statistics every step; ``histogram_every``: histograms as well on steps where
    ``step % histogram_every == 0`` (0: never; ``every`` is its old name); ``history``: steps
    kept in ``monitor.history``; ``update_ratio``: report ‖Δθ‖/‖θ‖ of each optimizer step,
    measured from a copy of the weights taken before it (one parameter-sized buffer);
    ``overlap``: on CUDA, run the statistics on a side stream beside the optimizer step
    (opt-in and not yet measured on a GPU; no effect on the CPU or MPS); ``offload``: on the
    CPU, where torch leaves a core free, each step's gradients are copied and their moments and
    histograms computed on a worker thread, during the optimizer step and the next forward and
    backward (``numba.worker``: the same figures bit for bit, the histograms waited for when
    first read; ``watch`` turns it on). ``recorded`` (a
    psygnal signal) emits each step's StepGradients on the thread that trains.
    """

    recorded = Signal(object)

    def __init__(self, bins: int = 64, histogram_every: int = 1, history: int = 256,
                 hist_range: HistRange | str = "auto", update_ratio: bool = True,
                 backend: str = "auto", overlap: bool = False, *, every: int | None = None,
                 offload: bool = False) -> None:
        histogram_every = renamed("GradientMonitor", "every", "histogram_every", every,
                                  histogram_every, 1)
        if bins < 1 or bins > 4096:
            raise ValueError(f"bins must be between 1 and 4096, got {bins}")
        if histogram_every < 0:
            raise ValueError(f"histogram_every must be 0 (no histograms) or positive, "
                             f"got {histogram_every}")
        self.bins, self.histogram_every = bins, histogram_every
        self.hist_range = parse_hist_range(hist_range)
        self.update_ratio = update_ratio
        # ``state_norms`` (watch with a run directory): the optimizer's first-moment state's
        # norms read with the update ratio's (``optimizer_state``'s ``known``), kept in
        # ``found_state_norms`` after each step: ``{id(state): (state, ‖state‖)}``
        self.state_norms, self.found_state_norms = False, None
        self.backend_name, self.overlap, self.offload = backend, overlap, offload
        self.history = GradientHistory(history)
        self._backend = None
        self._pending: tuple | None = None
        self._shapes: tuple | None = None  # (named parameters, their measured shapes)
        self._warned: set = set()  # (what, cause) already warned about: one warning each

    @property
    def every(self) -> int:
        """The old name of ``histogram_every`` (warns once)."""
        renamed("GradientMonitor", "every", "histogram_every", self.histogram_every, 1, 1)
        return self.histogram_every

    @every.setter
    def every(self, value: int) -> None:
        self.histogram_every = renamed("GradientMonitor", "every", "histogram_every", value, 1, 1)

    @property
    def worker_seconds(self) -> float:
        """CPU seconds the worker thread has spent on this monitor's statistics (``offload``)."""
        return 0.0 if self._backend is None else self._backend.worker_seconds

    def settle(self) -> None:
        """Whatever the worker still does for past steps, done now (a step not measured is
        about to change the weights and the optimizer's state)."""
        if self._backend is not None:
            self._backend.settle()

    def later(self, job):
        """``job`` (it must not raise) run on the statistics worker after the step just
        finished, done before the next step's ``begin`` returns — for work that reads what the
        next optimizer step changes (its state) — as a ``numba.worker.PendingWork``; where
        this step was not offloaded (more than ``OFFLOAD_MAX`` values), one done by the first
        thread asking for it, or by the next ``settle``; None without a worker (torch's
        backend, no core free: the caller runs it itself)."""
        return None if self._backend is None else self._backend.later(job)

    @property
    def backend(self) -> str | None:
        """``numba`` or ``torch`` once the first step chose one, else None."""
        return None if self._backend is None else self._backend.name

    def wants_histogram(self, step: int) -> bool:
        """Whether step ``step`` (1-based, as StepResult.step) gets histograms."""
        return self.histogram_every > 0 and step % self.histogram_every == 0

    def after_backward(self, session, step: int) -> None:
        """Session observer: gradients are ready (``step`` steps done): start this step's
        statistics."""
        self.begin(_named(session.model), session.optimizer, step + 1)

    def after_step(self, session, result) -> None:
        """Session observer: the optimizer has stepped: ``result.gradients`` (and the global
        norm where the session left it unset)."""
        record = self.finish(session.optimizer, result.step)
        if record is None:
            return
        result.gradients = record
        if result.grad_norm is None:
            result.grad_norm = record.global_norm
            fill_session_ledger(result.ledger, record.global_norm)

    def begin(self, named: list[tuple[str, nn.Parameter]], optimizer, step: int) -> None:
        """Gradients are ready, the optimizer not yet stepped: start the statistics of step
        ``step`` (1-based, as StepResult.step) of the ``(name, parameter)`` pairs ``named`` (a
        list kept from step to step names its parameters once)."""
        start = time.perf_counter()
        present = [p.grad is not None for _, p in named]
        owners = [p for _, p in named if p.grad is not None]
        params = measured_tensors(owners)  # what is measured (complex: its parts)
        if self._backend is None or until_numba(self._backend):  # torch until Numba loads
            self._backend = make_backend(self.backend_name, params or [p for _, p in named],
                                         self.overlap, self.offload)
        try:
            grads = measured_tensors([p.grad for p in owners])
            pending = self._backend.begin(
                grads, params if self.update_ratio else None,
                self.wants_histogram(step), self.bins, self.hist_range, optimizer,
            )
        except Exception as exc:  # noqa: BLE001 - measured one by one after the step, named
            pending = exc
        self._pending = (named, present, params, pending, time.perf_counter() - start)

    def pending_nonfinite(self) -> bool | None:
        """Between ``begin`` and ``finish``: whether the gradients being measured hold NaN or
        Inf, read from the NaN/Inf counts the statistics already hold (on CPU free; on a device
        one small read per device before the optimizer step, no pass of its own). None when no
        step is pending or its measuring failed (the caller checks by itself)."""
        if self._pending is None or isinstance(self._pending[3], Exception):
            return None
        named, present, params, pending, spent = self._pending
        try:
            found, pending = self._backend.nonfinite(pending)
        except Exception as exc:  # noqa: BLE001 - finish measures one by one and names it
            found, pending = None, exc
        self._pending = (named, present, params, pending, spent)
        return found

    def finish(self, optimizer, step: int) -> StepGradients | None:
        """The optimizer has stepped: finish, record (``history``) and publish (``recorded``)
        step ``step``'s statistics; None when no ``begin`` is pending."""
        if self._pending is None:
            return None
        start = time.perf_counter()
        named, present, params, pending, spent = self._pending
        self._pending = None
        self.found_state_norms = None
        try:
            if isinstance(pending, Exception):
                raise pending
            states = self._states(named, present, params, optimizer)
            raw = self._backend.finish(pending, params if self.update_ratio else None, optimizer,
                                       None if states is None else measured_tensors(states))
            self._keep_state_norms(states, getattr(raw, "state_norms", None))
            if self._shapes is None or self._shapes[0] is not named:  # once per list of parameters
                self._shapes = (named, [(n, _shape(p)) for n, p in named])
            record = build_step_gradients(step, self._shapes[1], present, raw, self.bins,
                                          self.hist_range, self._warned)
        except Exception as exc:  # noqa: BLE001 - never break the loop: find what failed
            record = self._one_by_one(step, named, present, first_line(exc))
        record.seconds = spent + time.perf_counter() - start
        self.history.append(record)
        emit_guarded(self.recorded, "a subscriber of the recorded gradients", record)
        return record

    def _states(self, named, present, params, optimizer) -> list[torch.Tensor] | None:
        """With ``state_norms``, the update ratio and an optimizer: the state tensor of each
        measured parameter whose norm ``optimizer_state`` reports (``NORMED``: Adam's
        ``exp_avg``, SGD's ``momentum_buffer``; the field the first parameter holds), as the
        optimizer keeps them (``found_state_norms``' keys); None where any lacks it (the
        optimizer's figures then read them themselves)."""
        if not (self.state_norms and self.update_ratio and params and optimizer is not None):
            return None
        from gradexplorer.core.stats.optimizer_state import NORMED

        try:  # whatever the optimizer keeps (a wrapper's own ``state``): read apart if unusual
            owners = [p for (_, p), has in zip(named, present, strict=True) if has]
            held = list(map(optimizer.state.get, owners))  # .get: no empty state made
            first = held[0] or {}
            field = next((f for f, _ in NORMED if isinstance(first.get(f), torch.Tensor)), None)
            states = [state[field] for state in held]
        except Exception:  # noqa: BLE001 - a parameter without it, or no state: read apart
            return None
        return states if all(isinstance(t, torch.Tensor) for t in states) else None

    def _keep_state_norms(self, states, norms) -> None:
        if states is not None and norms is not None:
            self.found_state_norms = {id(t): (t, v) for t, v in zip(
                states, norms.tolist(), strict=True)}

    def _one_by_one(self, step: int, named, present: list[bool], cause: str) -> StepGradients:
        """The step measured again parameter by parameter, after the whole step's measurement
        failed with ``cause``: what fails alone is marked not recorded (one warning naming it
        and its cause); when each one alone measures, the update ratios are what is missing."""
        want = self.wants_histogram(step)
        figures: dict[str, StepGradients] = {}
        missing: dict[str, str] = {}
        for (name, p), has in zip(named, present, strict=True):
            if not has:
                continue

            def one(name=name, p=p):
                raw = self._backend.finish(self._backend.begin(
                    [measured_tensor(p.grad)], None, want, self.bins, self.hist_range), None)
                return build_step_gradients(step, [(name, _shape(p))], [True], raw,
                                            self.bins, self.hist_range)

            found, why = measured(f"the gradient of {name}", one, self._warned)
            if found is None:
                missing[name] = why
            else:
                figures[name] = found
        if not missing:
            missing[""] = cause
            if self.update_ratio:
                warn_not_recorded("the update ratios", cause, self._warned)
        params = {name: figures[name].params[name] if name in figures else
                  ParamStats(name, _shape(p), p.numel(), has, not_recorded=missing.get(name))
                  for (name, p), has in zip(named, present, strict=True)}
        histograms = {n: h for found in figures.values() for n, h in found.histograms.items()}
        total = sum(s.numel for s in params.values() if s.has_grad)
        return StepGradients(step, global_norm(list(params.values())), total, params, histograms,
                             self.bins, self.hist_range, not_recorded=missing)

    def latest(self) -> StepGradients | None:
        """The most recent StepGradients."""
        return self.history.latest()


def nonfinite_counts(model: nn.Module) -> dict[str, tuple[int, int]]:
    """``name -> (NaN count, Inf count)`` for gradients holding any non-finite value."""
    out = {}
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        grad = measured_tensor(p.grad)
        nans, infs = int(torch.isnan(grad).sum()), int(torch.isinf(grad).sum())
        if nans or infs:
            out[name] = (nans, infs)
    return out


def warm_up(bins: int = 64, backend: str = "auto") -> None:
    """Set up now, rather than during the first real step, what a monitored step needs the
    first time: torch's first optimizers and the ``backend``'s first calls (``auto`` on the CPU:
    the torch backend while ``backends.warmup`` readies Numba's kernels off this thread, which
    this starts).

    A tiny model takes two SGD-with-momentum steps and one Adam step with a NaN and an Inf in
    its gradients, so the fast, careful and update-ratio paths all run once.
    """
    from gradexplorer.core.session.eager_optimizers import SGD, Adam  # the session's optimizers

    model = nn.Linear(8, 4)
    for optimizer in (SGD(model.parameters(), lr=0.1, momentum=0.9), Adam(model.parameters(), lr=0.1)):
        for _ in range(2):
            monitor_pass(model, optimizer, bins, backend)


def monitor_pass(model: nn.Module, optimizer: torch.optim.Optimizer, bins: int,
                 backend: str = "auto", contiguous: bool = True) -> StepGradients:
    """One monitored optimizer step of ``model`` (an ``nn.Linear``) on made-up gradients of its
    dtype, the weight's laid out transposed unless ``contiguous`` (see ``warm_up``)."""
    weight = model.weight
    grad = torch.linspace(-1.0, 1.0, weight.numel(), dtype=weight.dtype)
    weight.grad = grad.reshape(weight.shape) if contiguous else grad.reshape(weight.shape[::-1]).t()
    model.bias.grad = torch.linspace(-1.0, 1.0, model.bias.numel(), dtype=model.bias.dtype)
    model.bias.grad[0], model.bias.grad[1] = float("nan"), float("inf")

    monitor = GradientMonitor(bins=bins, history=1, backend=backend)
    monitor.state_norms = True  # a run directory's pass: the state's norms with the update ratio
    monitor.begin(_named(model), optimizer, 1)
    with torch.no_grad():
        optimizer.step()
    return monitor.finish(optimizer, 1)
