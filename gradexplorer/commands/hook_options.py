"""``--hook MODULE=ACTION`` for ``gradexplorer run``: attach hooks, print their events."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from gradexplorer.commands.flag_values import checked_by
from gradexplorer.core.hooks import ACTION_HELP
from gradexplorer.core.messages.errors import UserError

if TYPE_CHECKING:
    from gradexplorer.core.hooks import HookRegistry
    from gradexplorer.core.session.engine import TrainingSession


def add_hook_arguments(parser: argparse.ArgumentParser) -> None:
    """The repeatable ``--hook`` option."""
    actions = "; ".join(ACTION_HELP.values())
    parser.add_argument(
        "--hook", action="append", default=[], metavar="MODULE=ACTION",
        type=checked_by(parse_hook_option),
        help="attach a full backward hook to MODULE (dotted path, <root> for the model; see "
        f"'gradexplorer hooks'); repeatable. ACTION is one of: {actions}",
    )


def parse_hook_option(text: str) -> tuple[str, str]:
    """``"fc1=scale:0.5"`` → ``("fc1", "scale:0.5")``."""
    module, sep, action = text.partition("=")
    if not sep or not action.strip():
        raise UserError(f"bad --hook {text!r}: use MODULE=ACTION, e.g. --hook fc1=scale:0.5")
    return module.strip(), action.strip()


class EventPrinter:
    """A registry listener printing each hook event as one line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, kind: str, module: str, message: str) -> None:
        clear = "\r\x1b[K" if self.live else ""  # step over a live progress bar
        print(f"{clear}{message}", file=self.stream, flush=True)


class DetachedHooks:
    """A registry listener remembering each hook that failed and was detached, with its step."""

    def __init__(self, session: TrainingSession) -> None:
        self.session = session
        self.lines: list[str] = []

    def __call__(self, kind: str, module: str, message: str) -> None:
        if kind == "failed":
            self.lines.append(f"step {self.session.step_count + 1}: {message}")

    def summary(self) -> list[str]:
        """Lines for the end of a run; none when every hook held."""
        if not self.lines:
            return []
        count = len(self.lines)
        head = f"{count} hook{'s were' if count > 1 else ' was'} detached during the run " \
            "after failing (that step and the rest ran without it):"
        return [head, *(f"  {line}" for line in self.lines)]


def attach_hooks_from_args(session: TrainingSession, args: argparse.Namespace) -> HookRegistry:
    """Attach every ``--hook`` to the session's model; events are printed as they happen."""
    from gradexplorer.core.hooks import HookRegistry

    registry = HookRegistry(session.model, seed=getattr(args, "seed", 0))
    printer = EventPrinter()
    registry.event.connect(lambda *event: printer(*event))  # a lambda: psygnal keeps it (and
    # the printer), where it would hold a callable object only weakly
    hooks = [parse_hook_option(text) for text in getattr(args, "hook", None) or []]
    if hooks:  # recovering from hook errors; the session's stack runs its phases
        registry.install(session, observe=False)
    for module, action in hooks:
        registry.attach(module, action)
    return registry
