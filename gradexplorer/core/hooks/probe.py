"""A side-effect-free forward pass that learns, per module, what a full backward hook would see."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from gradexplorer.core.hooks.all_inputs_hook import hooked_inputs, is_all_inputs_hook
from gradexplorer.core.model.training_state import preserved_state
from gradexplorer.core.model.workload import call_model


@dataclass
class ModuleProbe:
    """What one module did during the probe forward."""

    calls: int = 0
    output_kind: str = ""  # "tensor", "tuple", or the type name of anything else
    output_has_tensor: bool = False  # a tensor (or tuple with one) that needs grad
    inputs_need_grad: bool = False  # some tensor the hook wraps (positional, keyword) needs grad
    modifies_input: bool = False  # the module changed its input in place
    output_modified: bool = False  # something changed the output in place afterwards


def _tensors(values) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def _output_tensors(output) -> tuple[str, list[torch.Tensor]]:
    if isinstance(output, torch.Tensor):
        return "tensor", [output]
    if isinstance(output, tuple):
        return "tuple", _tensors(output)
    return type(output).__name__, []


HOOK_DICTS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks")


@contextlib.contextmanager
def _hooks_lifted(model: nn.Module, quiet: bool = False) -> Iterator[None]:
    """Hide every module's backward hooks, the registry's included (handles stay valid), so the
    probe cannot trip them; ``quiet``: every forward hook too, so that the model's own forward
    hooks do not see the probe. Hooks registered meanwhile go when the hidden ones come back."""
    lifted = []
    for module in model.modules():
        kept = {name: module.__dict__.get(name) or OrderedDict() for name in HOOK_DICTS}
        hidden = {
            "_backward_hooks": OrderedDict(), "_backward_pre_hooks": OrderedDict(),
            "_forward_hooks": OrderedDict() if quiet else OrderedDict(
                (k, h) for k, h in kept["_forward_hooks"].items() if not is_all_inputs_hook(h)),
            "_forward_pre_hooks": OrderedDict() if quiet else OrderedDict(
                (k, h) for k, h in kept["_forward_pre_hooks"].items() if not is_all_inputs_hook(h)),
        }
        lifted.append((module, kept))
        module.__dict__.update(hidden)
    try:
        yield
    finally:
        for module, kept in lifted:
            module.__dict__.update(kept)


def probe_modules(model: nn.Module, inputs: tuple | dict, quiet: bool = False) -> dict[str, ModuleProbe]:
    """Run ``model(*inputs)`` (``model(**inputs)`` for a dict) once with grad enabled, leaving no
    trace, and report per module; ``quiet``: the model's own forward hooks do not see it."""
    names = {module: name for name, module in model.named_modules()}
    probes = {name: ModuleProbe() for name in names.values()}
    input_versions: dict[nn.Module, list[list[tuple[torch.Tensor, int]]]] = {}
    outputs: list[tuple[str, torch.Tensor, int]] = []

    def pre(module, args, kwargs):
        tensors = hooked_inputs(args, kwargs)
        input_versions.setdefault(module, []).append([(t, t._version) for t in tensors])

    def post(module, args, output):
        probe = probes[names[module]]
        probe.calls += 1
        seen = input_versions[module].pop() if input_versions.get(module) else []
        probe.modifies_input |= any(t._version != v for t, v in seen)
        probe.inputs_need_grad |= any(t.requires_grad for t, _ in seen)
        probe.output_kind, tensors = _output_tensors(output)
        probe.output_has_tensor |= any(t.requires_grad for t in tensors)
        outputs.extend((names[module], t, t._version) for t in tensors)

    with _hooks_lifted(model, quiet):  # the probe's own hooks are registered inside
        handles = [h for m in names for h in (m.register_forward_pre_hook(pre, with_kwargs=True),
                                              m.register_forward_hook(post))]
        try:
            device = next((p.device for p in model.parameters()), None)
            with preserved_state(model, device), torch.enable_grad():
                call_model(model, inputs)
                for name, tensor, version in outputs:
                    probes[name].output_modified |= tensor._version != version
        finally:
            for handle in handles:
                handle.remove()
    return probes
