"""``gradexplorer run``: train headless and report every step."""

from __future__ import annotations

import argparse
import sys

from gradexplorer.commands.ab_option import add_ab_argument, run_ab
from gradexplorer.commands.common import (
    add_model_arguments,
    add_training_arguments,
    capped_steps,
    session_from_args,
)
from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.gradient_options import (
    add_gradient_arguments,
    attach_gradient_options,
    print_line,
)
from gradexplorer.commands.hook_options import (
    DetachedHooks,
    add_hook_arguments,
    attach_hooks_from_args,
)
from gradexplorer.commands.per_sample_options import add_per_sample_arguments, attach_per_sample
from gradexplorer.commands.progress import StepReporter
from gradexplorer.commands.spike_lines import SpikeLines


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("run", help="run training steps headless and print each step")
    add_model_arguments(parser)
    add_training_arguments(parser)
    parser.add_argument("--steps", type=whole_number(1), default=10, metavar="N",
                        help="steps to run (default 10)")
    add_hook_arguments(parser)
    add_gradient_arguments(parser)
    add_ab_argument(parser)
    add_per_sample_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    args.steps = capped_steps(args.steps)
    if args.ab:
        return run_ab(args)
    from gradexplorer.commands.noise_lines import session_noise_lines  # numpy: only when it runs
    from gradexplorer.core.session.devices import describe_device  # torch: only when it runs
    from gradexplorer.core.watch.session_noise import SessionNoise

    session = session_from_args(args)
    workload = session.workload
    print(
        f"{workload.name}: {workload.description}; {session.parameter_count():,} parameters; "
        f"device {describe_device(session.device)}; {optimizer_text(session)}"
        + (f"; {session.config.accumulate} micro-batches a step" if session.config.accumulate > 1
           else "")
    )
    registry = attach_hooks_from_args(session, args)
    detached = DetachedHooks(session)
    registry.event.connect(detached)
    spikes = SpikeLines()
    stack, folder = attach_gradient_options(session, args, hooks=registry,
                                            reporters=(spikes.observer,))
    noise = SessionNoise.on(session, stack) if session.config.accumulate > 1 else None
    per_sample = attach_per_sample(session, args)
    reporter = StepReporter(args.steps)
    try:
        for result in session.run(args.steps):
            reporter(result)
            if result.noise is not None:  # docs/noise.md: B_simple this step, smoothed
                print_line("  " + session_noise_lines(result.noise)[0], sys.stdout)
    finally:
        reporter.close()
        if folder is not None:
            folder.release()
        if per_sample is not None:
            per_sample.remove()
    last = None if noise is None else noise.latest
    for line in [*detached.summary(), *spikes.summary(),
                 *(session_noise_lines(last) if last is not None else [])]:
        print(line)
    return 0


def optimizer_text(session) -> str:
    """``sgd lr 0.1 momentum 0.9`` / ``adam lr 0.001``."""
    group = session.optimizer.param_groups[0]
    text = f"{session.config.optimizer} lr {group['lr']:g}"
    return text + (f" momentum {group['momentum']:g}" if group.get("momentum") else "")
