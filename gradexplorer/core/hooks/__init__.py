"""Full backward hooks by module path: attach, detach, act — safely.

``HookRegistry(model)`` attaches actions ("observe", "scale:0.5", "block", "clip:1.0",
"noise:0.01", "once:scale:0.5", "file:hooks.py:fn") as ``register_full_backward_hook`` hooks;
``hookable_modules(model, inputs)`` says where that is safe; ``ParameterGradientWatcher`` watches
parameter gradients without any module hook.
"""

from gradexplorer.core.hooks.actions import ACTION_HELP, ACTIONS
from gradexplorer.core.hooks.failures import HookFailure
from gradexplorer.core.hooks.hookable import HookableModule, hookable_modules
from gradexplorer.core.hooks.param_watcher import ParameterGradientWatcher
from gradexplorer.core.hooks.parse import parse_action
from gradexplorer.core.hooks.registry import EVENT_KINDS, AttachedHook, HookRegistry

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
