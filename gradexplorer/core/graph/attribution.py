"""Which module created each autograd node: forward hooks record sequence-number intervals.

Every autograd node gets a thread-local, increasing sequence number when it is created.
Forward pre/post hooks on every module note the next number to be handed out, so after the
forward pass a node's number tells which module calls were running when it was made; the
innermost one wins. Nothing is guessed from names.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from gradexplorer.core.graph.source_lines import SourceLines
from gradexplorer.core.hooks.all_inputs_hook import has_all_inputs_hook

ROOT = ""


def _next_sequence_nr() -> int:
    """The sequence number the next autograd node created on this thread will get."""
    getter = getattr(torch.autograd, "_get_sequence_nr", None)
    if getter is not None:
        return getter()
    with torch.enable_grad():  # older torch: make a throw-away node and read its number
        probe = torch.zeros((), requires_grad=True).view(())
    return probe.grad_fn._sequence_nr() + 1


def has_backward_hooks(module: nn.Module) -> bool:
    """True when ``module`` has full backward (pre-)hooks, the registry's included, which insert
    hook nodes."""
    return bool(module._backward_hooks or module._backward_pre_hooks) or has_all_inputs_hook(module)


def parameter_names(model: nn.Module) -> dict[int, str]:
    """``id(parameter) -> dotted name``, first name wins (as ``named_parameters`` does)."""
    names: dict[int, str] = {}
    stack = [("", model)]
    while stack:
        prefix, module = stack.pop()
        for name, p in module._parameters.items():
            if p is not None:
                names.setdefault(id(p), prefix + name)
        stack.extend((f"{prefix}{n}.", m) for n, m in reversed(module._modules.items()) if m is not None)
    return names


def compiled(model: nn.Module) -> bool:
    """Whether ``torch.compile`` runs the model or one of its modules (``torch.compile(m)``,
    ``m.compile()``): their operations are compiled nodes, in no module, and a hook on a module
    would break its compiled graph (and compile it again once removed)."""
    return any(type(m).__name__ == "OptimizedModule" or getattr(m, "_compiled_call_impl", None)
               is not None for m in model.modules())


class ModuleAttribution:
    """Context manager that records module calls during a forward pass.

    ``with ModuleAttribution(model) as attribution: loss = ...`` then pass it to
    ``extract_graph``. Hooks are removed on exit; the object is then read-only. With
    ``sources=True`` it also notes the user's source line of every node (``SourceLines``, in
    ``sources``): for graph traces only, never an ordinary training step.
    """

    def __init__(self, model: nn.Module, *, sources: bool = False) -> None:
        self.model = model
        self.sources = SourceLines() if sources else None
        self.module_types: dict[str, str] = {
            path: type(m).__name__ for path, m in model.named_modules()
        }
        self.parameter_names = parameter_names(model)
        self._bounds: list[int] = []  # sequence number at each event
        self._owner: list[str] = []  # innermost running module after each event
        self._exited: list[str | None] = []  # module whose exit was the event, if hooked
        self._stack: list[str] = []
        self._calls = 0
        self._handles: list = []

    # -- recording -----------------------------------------------------------------
    def __enter__(self) -> ModuleAttribution:
        for path, module in self.model.named_modules():
            # first, so the registry's hooks (register_all_inputs_hook) wrap the inputs after the
            # call began, as a full backward hook does
            self._handles.append(
                module.register_forward_pre_hook(self._pre_hook(path), prepend=True))
            self._handles.append(
                module.register_forward_hook(self._post_hook(path, module), always_call=True)
            )
        if self.sources is not None:
            self.sources.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.sources is not None:
            self.sources.__exit__(*exc_info)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._stack.clear()

    def _record(self, exited: str | None) -> None:
        if not torch.is_grad_enabled():  # no node is made there: nothing to note (a long
            return  # evaluation under a recorder waiting for its first backward keeps no notes)
        self._bounds.append(_next_sequence_nr())
        self._owner.append(self._stack[-1] if self._stack else ROOT)
        self._exited.append(exited)

    def _pre_hook(self, path: str):
        def hook(module, args):
            self._stack.append(path)
            self._calls += 1
            self._record(None)

        return hook

    def _post_hook(self, path: str, module: nn.Module):
        def hook(mod, args, output):
            if self._stack and self._stack[-1] == path:
                self._stack.pop()
            self._record(path if has_backward_hooks(module) else None)

        return hook

    # -- lookup --------------------------------------------------------------------
    def current(self) -> str:
        """The innermost module running now (while recording; "" at the model's top level)."""
        return self._stack[-1] if self._stack else ROOT

    @property
    def calls(self) -> int:
        """How many module calls were recorded."""
        return self._calls

    def _event_index(self, seq: int) -> int:
        return bisect.bisect_right(self._bounds, seq) - 1

    def module_of(self, seq: int, is_hook: bool = False) -> str:
        """The module running when the node with sequence number ``seq`` was created.

        A hook node made just after a module returned (its output hook) belongs to that module.
        """
        i = self._event_index(seq)
        if i < 0:
            return ROOT
        if is_hook and self._exited[i] is not None:
            return self._exited[i]
        return self._owner[i]

    def modules_of(self, seqs: Sequence[int]) -> list[str]:
        """``module_of`` for many sequence numbers at once (ops, not hook nodes)."""
        if not self._bounds:
            return [ROOT] * len(seqs)
        index = np.searchsorted(np.asarray(self._bounds, dtype=np.int64),
                                np.asarray(seqs, dtype=np.int64), side="right") - 1
        owner = [*self._owner, ROOT]  # index -1 (before the first event) picks ROOT
        return [owner[i] for i in index.tolist()]
