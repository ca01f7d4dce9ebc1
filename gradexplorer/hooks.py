"""Full backward hooks by module path: attach, detach, act — safely (the building blocks of
``gradexplorer.core.hooks``, as users call them).

Documented in ``docs/api.md``; names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradexplorer._lazy import lazy_names

__all__ = [
    "HookRegistry",
    "ParameterGradientWatcher",
    "hookable_modules",
    "parse_action",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "HookRegistry": "gradexplorer.core.hooks.registry",
    "parse_action": "gradexplorer.core.hooks.parse",
    "hookable_modules": "gradexplorer.core.hooks.hookable",
    "ParameterGradientWatcher": "gradexplorer.core.hooks.param_watcher",
})

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily above
    from gradexplorer.core.hooks.hookable import hookable_modules
    from gradexplorer.core.hooks.param_watcher import ParameterGradientWatcher
    from gradexplorer.core.hooks.parse import parse_action
    from gradexplorer.core.hooks.registry import HookRegistry
