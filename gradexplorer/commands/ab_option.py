"""``run --ab MODULE=ACTION``: train two copies in lockstep, one with the hook, and compare."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from gradexplorer.commands.common import config_from_args, load_from_args
from gradexplorer.commands.hook_options import parse_hook_option
from gradexplorer.core.messages.errors import UserError

if TYPE_CHECKING:
    from gradexplorer.core.session.ab import ABStep


def add_ab_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--ab`` option."""
    parser.add_argument(
        "--ab", metavar="MODULE=ACTION",
        help="A/B of a hook: train two copies in lockstep on the same batches and random numbers, "
        "one with this hook, and print both losses and their divergence each step",
    )


def format_ab_step(result: ABStep, total: int | None) -> str:
    """``step 3/10  loss 1.1766 | hooked 1.2179  divergence 0.0664  grad-cos 0.9377``."""
    of = f"/{total}" if total else ""
    same = "  (bit-identical)" if result.identical else ""
    return (f"step {result.step}{of}  loss {result.plain.loss:.6g} | hooked {result.hooked.loss:.6g}  "
            f"divergence {result.divergence:.4g}  grad-cos {result.grad_cosine:.6g}{same}")


def run_ab(args: argparse.Namespace, stream: TextIO | None = None) -> int:
    """Run ``args.steps`` lockstep steps of both arms and print a line per step."""
    from gradexplorer.core.session.ab import ABRun  # torch: only when it runs

    stream = stream or sys.stdout
    if args.hook:
        raise UserError("--ab attaches its hook to one arm itself; leave out --hook")
    if args.export:
        raise UserError("--ab does not write snapshots; leave out --export")
    module, action = parse_hook_option(args.ab)
    config = config_from_args(args)
    ab = ABRun(lambda: load_from_args(args), config, module, action, seed=args.seed)
    print(f"{ab.plain.workload.name}: A/B of {module or '<root>'}={ab.action}: plain arm vs hooked "
          f"arm, same batches and random numbers", file=stream)
    for result in ab.run(args.steps):
        print(format_ab_step(result, args.steps), file=stream, flush=True)
    return 0
