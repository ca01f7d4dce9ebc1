"""The ``gradexplorer`` command: a thin dispatcher over subcommand modules.

``--help``, ``--version`` and each command's ``--help`` import no torch, numpy, networkx or Qt
(tests/test_cli_startup.py): a command module imports those inside the function that runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from gradexplorer._version import __version__
from gradexplorer.core.graph.deep_stack import run_with_deep_stack
from gradexplorer.core.messages.errors import UserError

# Each subcommand lives in gradexplorer/commands/<module>.py and defines
# ``register(subparsers)`` which adds its parser and sets ``func(args) -> int``.
COMMAND_MODULES = ("run", "graph", "hooks", "inspect", "compare", "export", "report", "spikes",
                   "diverge", "gui", "open")
# The desktop app's commands keep the main thread (Qt's); their deep work runs in workers.
# Qt lives on the main thread; `graph` traces on a deep stack itself and draws its PNG here
MAIN_THREAD_COMMANDS = ("gui", "open", "graph")


def build_parser(commands: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The top-level parser with every subcommand (or only ``commands``: a command named on
    the command line imports its own module only)."""
    parser = CommandLineParser(
        prog="gradexplorer",
        description="See and control PyTorch's backward pass. With no command, opens the app.",
    )
    parser.add_argument("--version", action=VersionAction, nargs=0, help="show versions and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        importlib.import_module(f"gradexplorer.commands.{name}").register(sub)
    return parser


class CommandLineParser(argparse.ArgumentParser):
    """argparse's parser (and its commands' parsers) with usage errors in one line on stderr,
    exit status 2, naming the ``--help`` to read."""

    help_prog: str | None = None  # the command named, for errors the top-level parser raises

    def error(self, message: str):  # noqa: D102
        self.exit(2, f"gradexplorer: error: {message} (see `{self.help_prog or self.prog} --help`)\n")


class VersionAction(argparse.Action):
    """Print the multi-line version text verbatim (argparse's own action re-wraps it)."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: D102
        print(version_text())
        parser.exit(0)


def version_text() -> str:
    """Version line plus the library versions people paste into bug reports."""
    from gradexplorer.core.session.environment import environment_summary

    return f"gradexplorer {__version__}\n{environment_summary()}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = [default_command(), *argv]
    named = argv[0] in COMMAND_MODULES
    parser = build_parser([argv[0]] if named else COMMAND_MODULES)
    parser.help_prog = f"gradexplorer {argv[0]}" if named else None
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 2:  # a usage error, its one line printed: the status, as any error's
            return 2
        raise
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        if args.command in MAIN_THREAD_COMMANDS:
            return int(args.func(args) or 0)
        with terminate_as_interrupt():
            return int(run_with_deep_stack(lambda: args.func(args)) or 0)
    except UserError as exc:
        print(f"gradexplorer: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gradexplorer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `gradexplorer run | head`: the reader left, so stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    finally:  # here, on the main thread, no interrupt lands inside the tidying
        export_dir = sys.modules.get("gradexplorer.core.snapshot.export_dir")
        if export_dir is not None:  # (not imported: nothing was exported)
            export_dir.remove_own_leftovers()


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM ends a command like Ctrl+C does: clean-ups run, no half-written files stay."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def default_command() -> str:
    """``gui``, or a headless ``run`` of the default example where no window can open."""
    from gradexplorer.commands.gui import display_problem

    problem = display_problem()
    if problem:
        print(f"gradexplorer: {problem}; training the model headless instead "
              "(`xvfb-run -a gradexplorer` shows the window on a virtual screen)")
        return "run"
    return "gui"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
