"""Full backward hooks by module path: attach, detach, act — safely.

``HookRegistry(model)`` attaches actions ("observe", "scale:0.5", "block", "clip:1.0",
"noise:0.01", "once:scale:0.5", "file:hooks.py:fn") as full backward hooks that also see the
tensors passed by keyword or nested in tuples, lists and dicts (``register_all_inputs_hook``);
``hookable_modules(model, inputs)`` says where that is safe; ``ParameterGradientWatcher`` watches
parameter gradients without any module hook. Names load on first use, so the action names
(``action_names``) come without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradexplorer._lazy import lazy_names

_NAMES = {
    "ACTIONS": "action_names",
    "ACTION_HELP": "action_names",
    "EVENT_KINDS": "registry",
    "AttachedHook": "registry",
    "HookFailure": "failures",
    "HookRegistry": "registry",
    "HookableModule": "hookable",
    "ParameterGradientWatcher": "param_watcher",
    "hookable_modules": "hookable",
    "parse_action": "parse",
}

__all__ = [
    "ACTIONS",
    "ACTION_HELP",
    "EVENT_KINDS",
    "AttachedHook",
    "HookFailure",
    "HookRegistry",
    "HookableModule",
    "ParameterGradientWatcher",
    "hookable_modules",
    "parse_action",
]


__getattr__, __dir__ = lazy_names(__name__, {n: f"{__name__}.{m}" for n, m in _NAMES.items()})


if TYPE_CHECKING:
    from gradexplorer.core.hooks.action_names import ACTION_HELP, ACTIONS
    from gradexplorer.core.hooks.failures import HookFailure
    from gradexplorer.core.hooks.hookable import HookableModule, hookable_modules
    from gradexplorer.core.hooks.param_watcher import ParameterGradientWatcher
    from gradexplorer.core.hooks.parse import parse_action
    from gradexplorer.core.hooks.registry import EVENT_KINDS, AttachedHook, HookRegistry
