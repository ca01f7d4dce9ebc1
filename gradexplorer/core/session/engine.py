"""The step engine: zero_grad → forward → loss → backward → optimizer step, as a generator."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.model.forward_check import locate_forward_failure
from gradexplorer.core.model.training_state import SavedState, restore_rng
from gradexplorer.core.model.workload import ModelInputs, Workload, call_model, loss_from_output
from gradexplorer.core.session.config import (
    DEFAULT_LR,
    OPTIMIZERS,
    RunControl,
    SessionConfig,
    check_accumulate,
)
from gradexplorer.core.session.devices import resolve_device
from gradexplorer.core.session.eager_optimizers import SGD, Adam
from gradexplorer.core.session.step_batches import StepBatches
from gradexplorer.core.stack.observer import ObserverHooks, SessionObserver
from gradexplorer.core.stats.measured import measured_tensors
from gradexplorer.core.stats.records import StepGradients
from gradexplorer.core.steps.ledger import StepLedger, clip_coefficient

T = TypeVar("T")


@dataclass
class StepResult:
    """What one training step produced; the session's observers fill the optional fields.

    ``grad_norm`` is the global norm of the gradient as accumulated (after the step's last
    backward: the sum of its micro-batches' gradients, each of its loss ÷ k); the session
    neither scales nor clips, so it is also the gradient as applied; ``loss`` the mean of the
    micro-batches' losses. ``ledger``: the
    step's StepLedger, as ``watch`` records one. Filled by observers when present:
    ``gradients`` (GradientMonitor: StepGradients), ``hooks`` (HookRegistry: the hooks that
    shaped this step's gradients), ``observed`` (ObserveReporter: module -> ObservedGrads),
    ``nonfinite_origin`` (NonFiniteOrigin: where a NaN/Inf was born), ``spike`` (SpikeObserver:
    a SpikeEvent), ``param_grad_norms`` (ParamWatcher: name -> norm), ``optimizer_state``
    (OptimizerStateReporter: per-parameter optimizer figures). ``batch``: the step's batch
    identity, the one a spike event names: ``{"make_batch": N}`` (the workload's index) from a
    session (a list of the k indices with micro-batches), the ids noted with ``rec.note_batch``
    under ``watch``; ``noise`` (SessionNoise: a ``noise_watch.NoiseStep``, a step of ≥ 2
    micro-batches)."""

    step: int
    loss: float
    grad_norm: float | None
    timings: dict[str, float]
    ledger: StepLedger | None = None
    gradients: StepGradients | None = None
    hooks: list[dict[str, Any]] | None = None
    observed: dict[str, Any] | None = None
    nonfinite_origin: dict[str, Any] | None = None
    spike: Any = None
    param_grad_norms: dict[str, float] | None = None
    optimizer_state: dict[str, Any] | None = None
    batch: Any = None
    noise: Any = None

    @property
    def seconds(self) -> float:
        """Wall time of the whole step."""
        return self.timings.get("total", 0.0)


BackwardErrorHandler = Callable[["TrainingSession", BaseException], bool]


def optimizer_settings(
    name: str, lr: float | None, momentum: float | None, suggested: dict | None = None
) -> tuple[str, float, float]:
    """``(name, lr, momentum)`` checked, unset lr/momentum taken from ``suggested[name]``."""
    name = name.lower()
    if name not in OPTIMIZERS:
        raise UserError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}")
    hints = (suggested or {}).get(name, {})
    lr = hints.get("lr", DEFAULT_LR[name]) if lr is None else lr
    momentum = hints.get("momentum", 0.0) if momentum is None else momentum
    if not 0 < lr < float("inf"):
        raise UserError(f"learning rate must be positive and finite, got {lr}")
    if not 0 <= momentum < float("inf"):
        raise UserError(f"momentum must be zero or positive, got {momentum}")
    return name, lr, momentum


def make_optimizer(
    name: str, params, lr: float | None, momentum: float | None, suggested: dict | None = None
) -> torch.optim.Optimizer:
    """``sgd`` or ``adam`` over ``params``; unset lr/momentum come from ``suggested[name]``."""
    name, lr, momentum = optimizer_settings(name, lr, momentum, suggested)
    if name == "sgd":  # torch's SGD and Adam, stepped without importing torch._dynamo
        return SGD(params, lr=lr, momentum=momentum)
    return Adam(params, lr=lr)


SPARSE_OPTIMIZERS = ("sgd",)  # of OPTIMIZERS, those that take sparse gradients


def check_trainable(model: nn.Module, name: str, optimizer: str) -> None:
    """Refuse, in one line, a model the optimizer cannot train: no parameter that needs a
    gradient, sparse gradients (``nn.Embedding(sparse=True)``) for an optimizer without
    sparse support, or DTensor parameters (a session is one process: their other ranks'
    parts are out of its reach; ``watch`` in the launched script combines them)."""
    if not any(p.requires_grad for p in model.parameters()):
        raise UserError(f"{name} has no trainable parameters (none with requires_grad=True): "
                        "there are no gradients to show")
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)  # imported
    if dtensor is not None and any(isinstance(p, dtensor) for p in model.parameters()):
        raise UserError(f"{name} has DTensor parameters (FSDP2 or tensor parallelism): a session "
                        "trains one process, where their other ranks' parts are out of reach; "
                        "record it with gradexplorer.watch in the script torchrun launches")
    sparse = [path or type(model).__name__ for path, m in model.named_modules()
              if getattr(m, "sparse", False) is True and any(p.requires_grad for p in m.parameters())]
    if sparse and optimizer.lower() not in SPARSE_OPTIMIZERS:
        raise UserError(f"optimizer {optimizer!r} cannot take the sparse gradients of "
                        f"{', '.join(sparse[:3])} (sparse=True); use --optimizer "
                        f"{' or '.join(SPARSE_OPTIMIZERS)}, or build it with sparse=False")


class TrainingSession(StepBatches):
    """A workload on a device with an optimizer, stepping on demand (``config.accumulate``
    micro-batches a step: ``step_batches.py``).

    Not thread-safe: one thread steps it. Changes from elsewhere (hook changes, learning-rate
    edits) are jobs run on that thread between steps (the app's ``SessionWorker.post``).
    """

    def __init__(self, workload: Workload, config: SessionConfig | None = None) -> None:
        self.workload = workload
        self.config = config or SessionConfig()
        self.device = resolve_device(self.config.device)
        torch.manual_seed(self.config.seed)
        self.model: nn.Module = workload.model.to(self.device)
        self.model.train()
        check_trainable(self.model, workload.name, self.config.optimizer)
        # checked now (a bad setting is refused at once); built on first use (``optimizer``)
        self._optimizer_settings = optimizer_settings(
            self.config.optimizer, self.config.lr, self.config.momentum,
            workload.extra.get("optimizer_defaults"))
        self._optimizer: torch.optim.Optimizer | None = None
        self.step_count = 0
        check_accumulate(self.config.accumulate)
        self._observers = ObserverHooks()
        self.backward_error_handlers: list[BackwardErrorHandler] = []
        # told each attempt of a step (``attempt(session)``) and the end of each of its
        # micro-batches' backwards (``backward_done(session)``): the noise scale's capture
        self.backward_watchers: list = []
        # the step under way's global gradient norm as accumulated (a float64 tensor on the
        # device, queued after backward, before the observers' ``after_backward``); None
        # when ``config.grad_norm`` is off or no parameter has a gradient
        self.accumulated_norm: torch.Tensor | None = None

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer, built on first use (on the app's training thread, after the first
        graph): torch's SGD or Adam, stepped without importing ``torch._dynamo``."""
        if self._optimizer is None:
            name, lr, momentum = self._optimizer_settings
            self._optimizer = make_optimizer(name, self.model.parameters(), lr, momentum)
        return self._optimizer

    @optimizer.setter
    def optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        self._optimizer = optimizer

    # -- observers and commands -------------------------------------------------
    @property
    def observers(self) -> list[SessionObserver]:
        """The observers, in the order added (a copy: ``add_observer`` / ``remove_observer``)."""
        return list(self._observers.observers)

    def add_observer(self, observer: SessionObserver) -> None:
        """Call ``observer.after_backward`` / ``after_step`` (whichever it has) on every step."""
        self._observers.add(observer)

    def remove_observer(self, observer: SessionObserver) -> None:
        self._observers.remove(observer)

    def set_lr(self, lr: float) -> None:
        """Change the learning rate of every parameter group."""
        if not lr > 0:
            raise UserError(f"learning rate must be positive, got {lr}")
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    # -- stepping ----------------------------------------------------------------
    def forward_loss(self, step: int | None = None,
                     batch: tuple[ModelInputs, Any] | None = None) -> torch.Tensor:
        """Forward pass and loss for ``step`` (default: the next step), graph kept; on
        ``batch`` (``batch(step)`` already drawn) where given."""
        step = self.step_count if step is None else step
        return self._check_loss(self.model_loss(*(self.batch(step) if batch is None else batch)))

    def model_loss(self, inputs: ModelInputs, target: Any) -> Any:
        """The workload's loss of ``inputs``: ``loss_fn(model(...), target)``, or with
        ``loss_fn=None`` the loss the model reports (``loss_from_output``); not yet checked to
        be a scalar that needs grad (``forward_loss`` does; a no-grad replay cannot)."""
        try:
            output = call_model(self.model, inputs)
        except Exception as exc:  # noqa: BLE001 - the user's model failed
            raise self._forward_failure(inputs, exc) from None
        if self.workload.loss_fn is None:
            return loss_from_output(output)
        try:
            return self.workload.loss_fn(output, target)
        except Exception as exc:  # noqa: BLE001
            raise UserError(f"loss_fn failed: {first_line(exc)}") from None

    def _forward_failure(self, inputs: tuple, exc: BaseException) -> UserError:
        failure = locate_forward_failure(self.model, inputs)
        return failure or UserError(f"forward pass failed: {first_line(exc)}")

    @staticmethod
    def _check_loss(loss: Any) -> torch.Tensor:
        if not isinstance(loss, torch.Tensor):
            raise UserError(f"loss_fn returned {type(loss).__name__}; it must return a scalar tensor")
        if loss.numel() != 1:
            raise UserError(f"loss_fn returned a tensor of shape {list(loss.shape)}; it must be a scalar")
        if not loss.requires_grad:
            raise UserError("the loss does not depend on any parameter that requires grad")
        return loss if loss.dim() == 0 else loss.reshape(())

    def _forward_backward(self, timings: dict[str, float]) -> float:
        # A redone step must be the step the model would have taken. Its batch is drawn first
        # (kept: a redo never draws again), its gradients zeroed, and then the state it starts
        # from is saved: buffers, random streams, every .grad. A failed attempt, and the
        # handlers' probes, may have moved buffers, drawn random numbers and added to some
        # gradients: each redo starts from that saved state, never from an older one (the
        # random state right after the batch was drawn is older when the batch was drawn
        # before the step, e.g. by HookRegistry.install, and the loop drew numbers since).
        # The optimizer steps only after a backward that succeeded, so its state is untouched.
        # Micro-batches 1, 2, … are drawn in the first attempt, each before its forward, and
        # kept: a redo takes them with the random state right after their draw.
        saved = None
        if self.backward_error_handlers:
            try:
                self.batch(self.step_count)
            except Exception as exc:  # noqa: BLE001 - the user's make_batch failed
                if isinstance(exc, UserError):
                    raise
                raise step_failure(exc) from None
        self.optimizer.zero_grad(set_to_none=True)
        if self.backward_error_handlers:
            saved = SavedState(self.model, self.device, grads=True)
        k = check_accumulate(self.config.accumulate)
        for attempt in range(8):
            if attempt and saved is not None:
                saved.restore()
            for watcher in self.backward_watchers:
                watcher.attempt(self)
            try:  # hooks can break the forward too (in-place ops next to a hooked module)
                losses = self._micro_batches(k, timings)
            except Exception as exc:  # noqa: BLE001
                if any(handler(self, exc) for handler in self.backward_error_handlers):
                    continue  # a handler fixed the cause (e.g. detached a hook): redo the step
                if isinstance(exc, UserError):
                    raise
                raise step_failure(exc) from None
            return float(losses[0]) if k == 1 else math.fsum(map(float, losses)) / k
        raise UserError("backward pass kept failing after its error handlers acted")

    def _micro_batches(self, k: int, timings: dict[str, float]) -> list[torch.Tensor]:
        """The forwards and backwards of the step's ``k`` micro-batches, each loss divided by
        ``k`` before its backward (none with ``k = 1``); their losses, undivided."""
        losses, forward, backward = [], 0.0, 0.0
        for j in range(k):
            batch = None
            if j:
                batch, rng = self.micro_batch(j)
                if rng is not None:  # a replay: its forward starts where the first one's did
                    restore_rng(rng)
            t0 = time.perf_counter()
            loss = self.forward_loss(self.step_count, batch)
            t1 = time.perf_counter()
            (loss if k == 1 else loss / k).backward()
            forward, backward = forward + t1 - t0, backward + time.perf_counter() - t1
            losses.append(loss.detach())
            for watcher in self.backward_watchers:
                watcher.backward_done(self)
        timings["forward"], timings["backward"] = forward, backward
        return losses

    def global_grad_norm(self) -> torch.Tensor | None:
        """L2 norm of all parameter gradients together (a float64 tensor on the device)."""
        grads = [p.grad.coalesce().values() if p.grad.is_sparse else p.grad  # a sparse one's
                 for p in self.model.parameters() if p.grad is not None]  # summed entries
        grads = measured_tensors(grads)  # a complex one as its real and imaginary parts
        if not grads:
            return None
        wide = {} if self.device.type == "mps" else {"dtype": torch.float64}  # MPS: no float64
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2, **wide)))

    def step(self) -> StepResult:
        """Run one full training step and return its result."""
        timings: dict[str, float] = {}
        start = time.perf_counter()
        loss_value = self._forward_backward(timings)
        norm = self.accumulated_norm = self.global_grad_norm() if self.config.grad_norm else None
        self._observers.after_backward(self, self.step_count)
        t0 = time.perf_counter()
        self.optimizer.step()
        timings["optimizer"] = time.perf_counter() - t0
        k = self.config.accumulate
        batch, self.micro_drawn = self.batch_ids(k), self.micro_drawn + k
        self.step_count += 1
        timings["total"] = time.perf_counter() - start
        norm = None if norm is None else float(norm)
        coef, clipped = clip_coefficient(norm, norm, None)
        ledger = StepLedger(self.step_count, self.micro_drawn, k, loss_value, norm, norm, coef,
                            clipped, lr=tuple(float(g["lr"]) for g in self.optimizer.param_groups))
        result = StepResult(self.step_count, loss_value, norm, timings, ledger=ledger, batch=batch)
        self._observers.after_step(self, result)
        return result

    def run(self, steps: int | None, control: RunControl | None = None,
            between: Callable[[], bool] | None = None) -> Iterator[StepResult]:
        """Yield ``steps`` results (forever if None), honouring pause/stop between steps;
        ``between``: ``run_steps``'s callback before each step (True ends the run)."""
        return run_steps(self.step, steps, control, between)

    def parameter_count(self) -> int:
        """Number of scalar parameters in the model."""
        return sum(p.numel() for p in self.model.parameters())


def step_failure(exc: BaseException) -> UserError:
    """The one-line error a step that failed with ``exc`` (not a UserError) reports."""
    return UserError(f"backward pass failed: {first_line(exc)}")


def run_steps(step: Callable[[], T], steps: int | None, control: RunControl | None = None,
              between: Callable[[], bool] | None = None) -> Iterator[T]:
    """Yield ``step()`` ``steps`` times (forever if None), honouring pause/stop between steps.

    ``between()`` (the app's queued jobs) runs before each step and, while ``control`` is
    paused, again and again instead of the wait (it may wait a little itself); it returns True
    to end the run. The one step loop of the command line, the app's worker and A/B runs."""
    done = 0
    while steps is None or done < steps:
        if between is not None and between():
            return
        if control is not None:
            if control.stopped:
                return
            if control.paused:
                if between is not None:
                    continue  # between() waits while paused, running what is posted meanwhile
                if not control.wait_while_paused():
                    return
        yield step()
        done += 1
