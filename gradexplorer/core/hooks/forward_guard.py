"""Keep the full backward hooks of a loop gradexplorer does not own (``watch``) from breaking
its forward pass.

PyTorch raises its in-place view error in the forward when an in-place op (``ReLU(inplace=True)``,
``out += identity``) sits beside a module with a full backward hook. A session redoes its step
without the hook; a user's loop cannot be redone, so the guard acts first: before the first
forward after the hooks change (and only with grad enabled), it probes the model on that
forward's own inputs — buffers and random streams restored, the model's forward hooks not
called — and detaches the hooks the probe finds beside an in-place op (not while
torch.compile traces it). The loop's forward then
runs as it would have without them: same batch, random numbers, buffers, gradients and optimizer
state. One probe forward per change of hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class ForwardGuard:
    """A forward pre-hook on ``registry.model`` detaching the hooks that would break its forward;
    ``report`` gets one line for each."""

    def __init__(self, registry, report: Callable[[str], Any]) -> None:
        self.registry, self.report = registry, report
        self._checked: tuple | None = None  # the hooks already probed, as (path, hook id)
        self._probing = False
        self._handle = registry.model.register_forward_pre_hook(  # first: before the
            self._before_forward, with_kwargs=True, prepend=True)  # hooks' own pre-hooks

    def _hooks(self) -> tuple:
        return tuple((path, id(hook)) for path, hook in self.registry.attached().items())

    def _before_forward(self, module, args: tuple, kwargs: dict) -> Any:
        hooks = self._hooks()
        if self._probing or not hooks or hooks == self._checked or not torch.is_grad_enabled() \
                or torch.compiler.is_compiling():
            return None
        if args and kwargs:  # one form at a time: a probe of both would be a guess
            return None
        self._probing = True
        try:
            for message in self.registry.detach_inplace(kwargs if kwargs else args):
                self.report(f"gradexplorer: {message}")
        finally:
            self._probing = False
        self._checked = self._hooks()
        return None

    def remove(self) -> None:
        """Stop guarding (the hooks stay)."""
        self._handle.remove()


def guarded_hooks(model, hooks: dict[str, str], report: Callable[[str], Any], guard: bool = True):
    """``(registry, guard or None)``: a HookRegistry on ``model`` with the actions ``hooks``
    (module path -> action, checked already) attached, and, with ``guard`` (not for a probe
    forward of shards: FSDP's hooks), its ForwardGuard (no in-place view error in the loop)."""
    from gradexplorer.core.hooks.registry import HookRegistry

    registry = HookRegistry(model)
    try:
        for path, action in hooks.items():
            registry.attach(path, action)
    except BaseException:
        registry.detach_all()  # none left behind
        raise
    return registry, ForwardGuard(registry, report) if guard else None
