"""Model specs: ``example:NAME``, ``path/to/file.py:callable``, ``package.module:callable``."""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.model.examples import build_example
from gradexplorer.core.model.forward_check import locate_forward_failure
from gradexplorer.core.model.options import DEFAULT_SPEC, ModelOptions, parse_shape  # noqa: F401 - re-exported
from gradexplorer.core.model.training_state import preserved_state
from gradexplorer.core.model.user_code import call_user, load_callable
from gradexplorer.core.model.weights import load_weights
from gradexplorer.core.model.workload import Workload, as_model_inputs, split_batch

LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mse": nn.functional.mse_loss,
    "l1": nn.functional.l1_loss,
    "huber": nn.functional.huber_loss,
    "cross_entropy": nn.functional.cross_entropy,
    "sum": lambda out, target: out.sum(),
}


def random_target(loss: str, output: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A random target that ``loss`` accepts for ``output``."""
    if loss == "cross_entropy":
        if output.dim() < 2:
            raise UserError(f"--loss cross_entropy needs an output of shape N×C, got {list(output.shape)}")
        return torch.randint(0, output.shape[1], (output.shape[0], *output.shape[2:]), generator=gen)
    return torch.randn(output.shape, generator=gen, dtype=output.dtype)


def random_input(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """A float32 ``randn`` input of ``shape``, refused in one line when it cannot fit."""
    numel = math.prod(shape)
    limit = physical_memory() // 2
    if numel * 4 > limit:
        raise UserError(
            f"--input-shape {','.join(map(str, shape))} needs {numel * 4 / 1e9:,.1f} GB for the "
            f"input alone; this machine allows at most {limit / 1e9:,.1f} GB (half its memory)"
        )
    try:
        return torch.randn(shape, generator=gen)
    except RuntimeError as exc:  # the allocator refused
        raise UserError(f"cannot make an input of shape {list(shape)}: {first_line(exc)}") from None


def physical_memory() -> int:
    """Bytes of RAM (a large stand-in where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


def workload_from_module(model: nn.Module, label: str, opts: ModelOptions) -> Workload:
    """Wrap a bare module: fixed random input of ``--input-shape``, loss against a random target."""
    if opts.input_shape is None:
        raise UserError(
            f"{label} returned an nn.Module: give --input-shape (e.g. --input-shape 1,1,32,32) "
            "or return a gradexplorer.session.Workload"
        )
    shape = opts.input_shape
    if opts.batch_size:
        shape = (opts.batch_size, *shape[1:])
    loss = (opts.loss or "mse").lower()
    if loss not in LOSSES:
        raise UserError(f"unknown loss {opts.loss!r}; choose one of: {', '.join(LOSSES)}")
    gen = torch.Generator().manual_seed(opts.seed)
    x = random_input(shape, gen)
    with preserved_state(model):  # sizing the target must not move BatchNorm statistics
        failure = locate_forward_failure(model, (x,))
        if failure is not None:
            raise failure
        with torch.no_grad():
            output = model(x)
    if not isinstance(output, torch.Tensor):
        raise UserError(
            f"{label}'s model returns {type(output).__name__}, not a tensor: return a "
            "gradexplorer.session.Workload with a loss_fn that handles it"
        )
    target = random_target(loss, output, gen)
    return Workload(
        model=model,
        make_batch=lambda step: (x, target),
        loss_fn=LOSSES[loss],
        name=label,
        description=f"{type(model).__name__} on a random {list(shape)} input, {loss} loss",
    )


def load_workload(spec: str | None = None, opts: ModelOptions | None = None) -> Workload:
    """Build the workload a spec names; every failure is a one-line UserError."""
    opts = opts or ModelOptions()
    spec = (spec or DEFAULT_SPEC).strip()
    if spec.startswith("example:"):
        text = spec[len("example:"):]
        if opts.batch_size:
            text += ("," if ":" in text else ":") + f"batch={opts.batch_size}"
        if opts.loss or opts.input_shape:
            raise UserError("--loss and --input-shape apply to your own nn.Module, not to examples")
        workload = build_example(text, opts.seed)
    else:
        fn, label = load_callable(spec)
        torch.manual_seed(opts.seed)
        result = call_user(fn, f"{label}()")
        if isinstance(result, Workload):
            workload = result
            workload.name = workload.name or label
        elif isinstance(result, nn.Module):
            workload = workload_from_module(result, label, opts)
        else:
            raise UserError(
                f"{label}() returned {type(result).__name__}; expected an nn.Module "
                "or a gradexplorer.session.Workload(model=..., make_batch=..., loss_fn=...)"
            )
    if opts.weights:
        load_weights(workload.model, opts.weights)
    workload.extra.setdefault("spec", spec)
    return workload


def sample_inputs(workload: Workload, step: int = 0) -> tuple | dict:
    """The inputs of the batch for ``step``: a positional tuple, or a dict of keyword inputs."""
    inputs, _ = split_batch(workload.make_batch(step))
    return as_model_inputs(inputs)
