"""What a hook does to a module's gradients: each action is a full backward hook callable."""

from __future__ import annotations

from typing import Any

import torch

from gradexplorer.core.hooks.action_names import ACTION_HELP, ACTIONS  # noqa: F401 - re-exported
from gradexplorer.core.hooks.grad_summary import as_floats, summarize_tuple, total_norm


class Action:
    """Base of all actions: ``action(module, grad_input, grad_output) -> new grad_input | None``."""

    modifies = True  # changes gradients (meaningless where grad_input is all None)

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.spent = False

    def __call__(self, module: torch.nn.Module, grad_input: tuple, grad_output: tuple):
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """Statistics of the last call as plain numbers (may synchronise the device)."""
        return {}

    def captured(self) -> dict[str, torch.Tensor]:
        """Tensors kept from the last call, keyed by ``grad_input.I`` / ``grad_output.I``."""
        return {}

    def checkpoint(self) -> Any:
        """The state that a call changes for later calls (``rollback`` puts it back), so that a
        step redone after a failure sees the action as it was when the step began."""
        return self.spent

    def rollback(self, state: Any) -> None:
        self.spent = state


class Observe(Action):
    """Record statistics of grad_input and grad_output; optionally keep the tensors."""

    modifies = False

    def __init__(self, spec: str, capture: bool = False) -> None:
        super().__init__(spec)
        self.capture = capture
        self._inputs: list = []
        self._outputs: list = []
        self._tensors: dict[str, torch.Tensor] = {}
        self._last: dict[str, torch.Tensor] = {}

    def __call__(self, module, grad_input, grad_output):
        self._inputs, self._outputs = summarize_tuple(grad_input), summarize_tuple(grad_output)
        self._last = {  # references (autograd does not change them afterwards), for histograms
            f"{kind}.{i}": g.detach()
            for kind, grads in (("grad_input", grad_input), ("grad_output", grad_output))
            for i, g in enumerate(grads)
            if isinstance(g, torch.Tensor)
        }
        if self.capture:
            self._tensors = {key: g.clone() for key, g in self._last.items()}
        return None

    def last_grads(self) -> dict[str, torch.Tensor]:
        """The last call's gradients (not copies), keyed by ``grad_input.I`` / ``grad_output.I``."""
        return dict(self._last)

    def stats(self) -> dict[str, Any]:
        return {"grad_input": as_floats(self._inputs), "grad_output": as_floats(self._outputs)}

    def captured(self) -> dict[str, torch.Tensor]:
        return dict(self._tensors)


class Scale(Action):
    """Multiply every input gradient by ``factor``; None entries stay None."""

    def __init__(self, spec: str, factor: float) -> None:
        super().__init__(spec)
        self.factor = factor

    def __call__(self, module, grad_input, grad_output):
        return tuple(None if g is None else g * self.factor for g in grad_input)


class Block(Action):
    """Replace every input gradient by None: nothing flows upstream through this module."""

    def __call__(self, module, grad_input, grad_output):
        return tuple(None for _ in grad_input)


class Clip(Action):
    """Scale the input gradients down so that their total L2 norm is at most ``max_norm``."""

    def __init__(self, spec: str, max_norm: float) -> None:
        super().__init__(spec)
        self.max_norm = max_norm
        self._norm: torch.Tensor | None = None

    def __call__(self, module, grad_input, grad_output):
        norm = total_norm(grad_input)
        self._norm = norm
        if norm is None:
            return None
        factor = torch.clamp(self.max_norm / (norm + 1e-6), max=1.0)
        return tuple(None if g is None else g * factor.to(g.dtype) for g in grad_input)

    def stats(self) -> dict[str, Any]:
        return {} if self._norm is None else {"norm_before": float(self._norm)}


class Noise(Action):
    """Add Gaussian noise of standard deviation ``std`` from a seeded generator per device."""

    def __init__(self, spec: str, std: float, seed: int) -> None:
        super().__init__(spec)
        self.std, self.seed = std, seed
        self._generators: dict[torch.device, torch.Generator] = {}

    def _generator(self, device: torch.device) -> torch.Generator:
        gen = self._generators.get(device)
        if gen is None:
            gen = self._generators[device] = torch.Generator(device=device).manual_seed(self.seed)
        return gen

    def checkpoint(self) -> Any:
        return self.spent, {device: gen.get_state() for device, gen in self._generators.items()}

    def rollback(self, state: Any) -> None:
        self.spent, generators = state
        self._generators = {device: gen for device, gen in self._generators.items()
                            if device in generators}
        for device, gen_state in generators.items():
            self._generators[device].set_state(gen_state)

    def __call__(self, module, grad_input, grad_output):
        return tuple(
            None if g is None
            else g + self.std * torch.randn(
                g.shape, generator=self._generator(g.device), device=g.device, dtype=g.dtype
            )
            for g in grad_input
        )


class Once(Action):
    """Apply ``inner`` on the first call only; afterwards pass gradients through untouched."""

    def __init__(self, spec: str, inner: Action) -> None:
        super().__init__(spec)
        self.inner = inner
        self.modifies = inner.modifies

    def __call__(self, module, grad_input, grad_output):
        if self.spent:
            return None
        self.spent = True
        return self.inner(module, grad_input, grad_output)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()

    def checkpoint(self) -> Any:
        return self.spent, self.inner.checkpoint()

    def rollback(self, state: Any) -> None:
        self.spent, inner = state
        self.inner.rollback(inner)

    def captured(self) -> dict[str, torch.Tensor]:
        return self.inner.captured()
