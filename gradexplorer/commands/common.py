"""Arguments shared by every command that loads a model, and the session they build."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from gradexplorer.commands.flag_values import non_empty, real_number, shape, whole_number
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.options import DEFAULT_SPEC, ModelOptions, parse_shape
from gradexplorer.core.session.config import MAX_ACCUMULATE, OPTIMIZERS, SessionConfig

if TYPE_CHECKING:
    from gradexplorer.core.model.workload import Workload
    from gradexplorer.core.session.engine import TrainingSession

MAX_STEPS_VARIABLE = "GRADEXPLORER_MAX_STEPS"
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.manual_seed takes


def capped_steps(steps: int) -> int:
    """``steps``, or fewer when ``GRADEXPLORER_MAX_STEPS`` caps them (quick runs of the docs'
    commands, e.g. in tests and CI)."""
    text = os.environ.get(MAX_STEPS_VARIABLE, "").strip()
    if not text:
        return steps
    try:
        cap = int(text)
    except ValueError:
        raise UserError(f"{MAX_STEPS_VARIABLE}={text!r}: give a whole number of steps") from None
    if cap < 1:
        raise UserError(f"{MAX_STEPS_VARIABLE}={text!r}: give at least 1")
    return min(steps, cap)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model`` and what shapes how it is built."""
    g = parser.add_argument_group("model")
    g.add_argument(
        "--model", default=DEFAULT_SPEC, metavar="SPEC",
        help="example:NAME[:k=v,...], path/to/file.py:callable or package.module:callable "
        f"(default {DEFAULT_SPEC})",
    )
    g.add_argument("--input-shape", type=shape, metavar="N,C,H,W",
                   help="input shape when SPEC returns an nn.Module")
    g.add_argument("--loss", help="loss for a bare nn.Module: mse (default), l1, huber, cross_entropy, sum")
    g.add_argument("--weights", type=non_empty, metavar="FILE",
                   help="state dict to load (.safetensors, .pt, .pth)")
    g.add_argument("--batch-size", type=whole_number(1), metavar="N",
                   help="batch size (examples and --input-shape)")
    g.add_argument("--seed", type=int, default=0, help="seed for initialisation and data (default 0)")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """Device and optimizer."""
    g = parser.add_argument_group("training")
    g.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    g.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    g.add_argument("--lr", type=real_number(0, with_lo=False),
                   help="learning rate (default: the example's suggestion, "
                   "else 0.05 for sgd, 0.001 for adam)")
    g.add_argument("--momentum", type=real_number(0, 1),
                   help="SGD momentum (default: the example's suggestion, else 0)")
    g.add_argument("--accumulate", type=whole_number(1, MAX_ACCUMULATE), default=1, metavar="K",
                   help="micro-batches a step (gradient accumulation: each loss ÷ K, one "
                   "optimizer step; K ≥ 2 gives the noise scale and SNR, docs/noise.md; default 1)")


def config_from_args(args: argparse.Namespace) -> SessionConfig:
    """The SessionConfig that the parsed training arguments describe."""
    return SessionConfig(device=args.device, optimizer=args.optimizer, lr=args.lr,
                         momentum=args.momentum, seed=args.seed,
                         accumulate=getattr(args, "accumulate", 1))


def model_options(args: argparse.Namespace) -> ModelOptions:
    """The ModelOptions that the parsed arguments describe."""
    if args.model is not None and not args.model.strip():  # None: the default example
        raise UserError("--model is empty; give example:NAME, path/to/file.py:callable or "
                        "package.module:callable")
    if not SEED_RANGE[0] <= args.seed <= SEED_RANGE[1]:
        raise UserError(f"--seed {args.seed} is out of range: torch takes seeds from "
                        f"{SEED_RANGE[0]} to {SEED_RANGE[1]}")
    if getattr(args, "device", "auto") is not None and not str(getattr(args, "device", "auto")).strip():
        raise UserError("--device is empty; give auto, cpu, cuda, cuda:N or mps")
    return ModelOptions(
        input_shape=parse_shape(args.input_shape) if args.input_shape else None,
        loss=args.loss,
        weights=args.weights,
        batch_size=args.batch_size,
        seed=args.seed,
    )


def load_from_args(args: argparse.Namespace) -> Workload:
    """Load the workload named by ``--model`` and friends."""
    from gradexplorer.core.model.spec import load_workload  # torch: only when a model loads

    return load_workload(args.model, model_options(args))


def session_from_args(args: argparse.Namespace) -> TrainingSession:
    """Load the model and set up a training session as the arguments say."""
    from gradexplorer.core.session.engine import TrainingSession

    workload = load_from_args(args)
    return TrainingSession(workload, config_from_args(args))
