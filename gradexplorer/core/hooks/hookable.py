"""Which modules can carry a full backward hook, and why not where they cannot."""

from __future__ import annotations

from typing import NamedTuple

from torch import nn
from torch.nn.modules import module as torch_module

from gradexplorer.core.hooks.probe import ModuleProbe, probe_modules

OLD_STYLE = (
    "it already has an old-style register_backward_hook hook (from the model's code), which "
    "would then see this hook's gradients instead of its module's (PyTorch refuses to mix the "
    "two on one module) — remove it or make it a register_full_backward_hook"
)
GLOBAL_OLD_STYLE = (
    "a global old-style hook (nn.modules.module.register_module_backward_hook) is active; with it, "
    "full backward hooks would hand that hook the wrong gradients"
)
NO_GRAD_INPUTS = (
    "its inputs, positional or keyword, need no gradient (e.g. the model's input data or token "
    "ids), so grad_input is (None,) or all None: observe works, scale/block/clip/noise would "
    "change nothing"
)
OBSERVE_ONLY = "observe only: "
INPLACE_ATTRIBUTE = (
    "it works in place (inplace=True), which PyTorch forbids under a full backward hook"
)


class HookableModule(NamedTuple):
    """One row of ``hookable_modules``: dotted path ("" is the root), type, safe, why (not)."""

    path: str
    type_name: str
    safe: bool
    reason: str


def display_name(path: str) -> str:
    """``<root>`` for the root module, else the dotted path."""
    return path or "<root>"


def mixing_problem(module: nn.Module) -> str | None:
    """Why a full backward hook may not join the hooks already on ``module``, or None."""
    if module._is_full_backward_hook is False:
        return OLD_STYLE
    if torch_module._global_is_full_backward_hook is False and torch_module._global_backward_hooks:
        return GLOBAL_OLD_STYLE
    return None


def never_fires(probe: ModuleProbe) -> str | None:
    """Why a full backward hook on a module seen by the probe would never be called, or None."""
    if probe.calls == 0:
        return "it is not called during the forward pass, so its hook would never fire"
    if probe.output_kind not in ("tensor", "tuple"):
        return (
            f"it returns a {probe.output_kind}; full backward hooks only see a tensor or a tuple "
            "of tensors, so the hook would never fire"
        )
    if not probe.output_has_tensor:
        return "its output needs no gradient, so the hook would never fire"
    return None


def inplace_problem(module: nn.Module, probe: ModuleProbe | None) -> str | None:
    """Why PyTorch would raise the in-place view error with a full backward hook here, or None."""
    if probe is None:
        return INPLACE_ATTRIBUTE if getattr(module, "inplace", False) is True else None
    if probe.modifies_input:
        return "it modifies its input in place, which PyTorch forbids under a full backward hook"
    if probe.output_modified:
        return (
            "its output is modified in place afterwards (e.g. by ReLU(inplace=True) or +=), "
            "which PyTorch forbids under a full backward hook"
        )
    return None


def assess(module: nn.Module, probe: ModuleProbe | None) -> tuple[bool, str]:
    """``(safe, reason)`` for a full backward hook on ``module``."""
    problem = mixing_problem(module) or (never_fires(probe) if probe else None)
    problem = problem or inplace_problem(module, probe)
    if problem:
        return False, problem
    if probe is not None and not probe.inputs_need_grad:
        return True, OBSERVE_ONLY + NO_GRAD_INPUTS
    if probe is not None and probe.calls > 1:
        return True, f"called {probe.calls} times per forward; the hook fires once per call"
    return True, ""


def verdict(row: HookableModule) -> str:
    """``safe``, ``observe`` (only observing makes sense) or ``unsafe``."""
    if not row.safe:
        return "unsafe"
    return "observe" if row.reason.startswith(OBSERVE_ONLY) else "safe"


def hookable_modules(model: nn.Module, inputs: tuple | None = None) -> list[HookableModule]:
    """Every module with whether a full backward hook is safe on it; ``inputs`` enable a probe."""
    probes = probe_modules(model, inputs) if inputs is not None else {}
    rows = []
    for path, module in model.named_modules():
        safe, reason = assess(module, probes.get(path))
        rows.append(HookableModule(path, type(module).__name__, safe, reason))
    return rows
