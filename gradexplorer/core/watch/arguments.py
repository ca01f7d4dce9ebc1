"""``watch``'s arguments, every one checked at the call, before anything touches the model.

A refused call leaves the model as it was: no hook attached, no run directory created, no
optimizer hook. A model has one recorder at a time (``watched_by``); the loss a step records is
a number or the mean of a per-sample tensor, refused at ``note_loss`` when it is neither.
"""

from __future__ import annotations

import numbers
import os
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError, renamed

MAX_BINS = 4096  # what the monitor's histograms take
_WATCHED: dict[int, weakref.ref] = {}  # id(model) -> its open Recorder (by identity: a model
# may define __eq__ and no __hash__)


def whole(value: Any, name: str, low: int = 1, optional: bool = False) -> int | None:
    """A whole number ≥ ``low`` (None allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UserError(f"watch: {name} must be a whole number, not {type(value).__name__} "
                        f"{str(value)[:24]!r}")
    if value < low:
        raise UserError(f"watch: {name} must be at least {low}, got {value}")
    return int(value)


def noise_every(value: Any) -> int | str:
    """``noise_every``: the noise scale on one recorded step in this many, or "auto" (≤ 5%)."""
    return value if value == "auto" and isinstance(value, str) else whole(value, "noise_every")


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"watch: {name} must be True or False, not {type(value).__name__}")
    return value


def run_directory(value: Any) -> Path | None:
    """A run directory named by a non-empty path (None: record without writing)."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise UserError(f"watch: run_dir must be a path, not {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip():
        raise UserError("watch: run_dir is empty; name the folder to record into")
    return Path(text)


def hook_specs(model: nn.Module, hooks: Any) -> dict[str, str]:
    """``{module path: action}`` with every path a module of ``model`` and every action one
    the registry parses (nothing attached here)."""
    from gradexplorer.core.hooks.parse import parse_action

    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise UserError("watch: hooks must be a dict of module path to action, e.g. "
                        f"{{'fc1': 'scale:0.5'}}, not {type(hooks).__name__}")
    from gradexplorer.core.hooks.registry import HookRegistry

    registry = HookRegistry(model)  # attaches nothing: its module lookup and messages
    for path, action in hooks.items():
        if not isinstance(path, str) or not isinstance(action, str):
            raise UserError(f"watch: hooks maps module paths to actions as text, got "
                            f"{path!r}: {action!r}")
        registry.module(path)
        parse_action(action, path)
    return dict(hooks)


def watched_by(model: nn.Module):
    """The open Recorder of ``model``, or None."""
    ref = _WATCHED.get(id(model))
    recorder = ref() if ref is not None else None
    if recorder is None or recorder.closed or recorder.model is not model:
        return None
    return recorder


def mark_watched(model: nn.Module, recorder) -> None:
    _WATCHED[id(model)] = weakref.ref(recorder)


def unmark_watched(model: nn.Module, recorder) -> None:
    ref = _WATCHED.get(id(model))
    if ref is not None and ref() in (recorder, None):
        del _WATCHED[id(model)]


def check_unwatched(model: nn.Module) -> None:
    """Refuse a second recorder on a model an open one records."""
    other = watched_by(model)
    if other is not None:
        where = f" into {str(other.run_dir)!r}" if other.run_dir is not None else ""
        raise UserError(f"watch: this {type(model).__name__} is already watched by a recorder"
                        f"{where}; close it first (rec.close(), or gradexplorer.Recorder.of(model)"
                        ".close() when you no longer hold it), or keep using it")


def loss_value(loss: Any) -> torch.Tensor | float | None:
    """A step's loss as recorded: a real number, or the mean of a real tensor (per-sample
    losses); a one-line UserError for anything else, at the call."""
    if loss is None:
        return None
    if isinstance(loss, torch.Tensor):
        if loss.is_complex() or loss.dtype == torch.bool or loss.numel() == 0:
            raise UserError(f"note_loss: the loss must be a non-empty real tensor, got "
                            f"{loss.dtype} of shape {tuple(loss.shape)}")
        loss = loss.detach()
        return loss.reshape(()) if loss.numel() == 1 else loss.double().mean()
    if isinstance(loss, bool) or not isinstance(loss, numbers.Real):
        raise UserError(f"note_loss: the loss must be a number or a tensor, not "
                        f"{type(loss).__name__} {str(loss)[:24]!r}")
    return float(loss)


def loss_number(loss: torch.Tensor | float | None) -> float | None:
    """The recorded figure of a ``loss_value``."""
    return None if loss is None else float(loss)


def checked(run_dir, stats_every, histogram_every, every, history, bins, snapshot_every,
            keep_snapshots, per_rank, overwrite, resume, auto_steps, optimizer_state,
            update_ratio=True) -> tuple:
    """``watch``'s plain arguments, each checked (the same order back, less ``every``: the old
    name of ``stats_every``)."""
    run_dir = run_directory(run_dir)
    stats_every = whole(renamed("watch", "every", "stats_every", every, stats_every, 1),
                        "stats_every")
    histogram_every = whole(histogram_every, "histogram_every")
    history, bins = whole(history, "history"), whole(bins, "bins")
    if bins > MAX_BINS:
        raise UserError(f"watch: bins must be at most {MAX_BINS}, got {bins}")
    snapshot_every = whole(snapshot_every, "snapshot_every", optional=True)
    keep_snapshots = whole(keep_snapshots, "keep_snapshots", optional=True)
    flags = [flag(v, n) for v, n in ((per_rank, "per_rank"), (overwrite, "overwrite"),
                                     (resume, "resume"), (auto_steps, "auto_steps"),
                                     (optimizer_state, "optimizer_state"),
                                     (update_ratio, "update_ratio"))]
    if overwrite and resume:
        raise UserError("watch: give overwrite=True (replace the run) or resume=True "
                        "(continue it), not both")
    return (run_dir, stats_every, histogram_every, history, bins, snapshot_every, keep_snapshots,
            *flags)


def check_plan(plan, snapshot_every: int | None, resume: bool, per_rank: bool) -> None:
    """What the distributed layout (``RankPlan``) rules out: snapshots of sharded gradients
    (FSDP2, tensor parallelism), and resuming a run whose every rank counts its own steps."""
    if snapshot_every and plan.sharded:
        raise UserError("watch: snapshots hold whole gradients, which FSDP and tensor "
                        "parallelism shard across ranks; record FSDP2 and TP runs without "
                        "snapshot_every")
    if resume and plan.world > 1 and (plan.sharded or per_rank):
        raise UserError("watch: resume=True continues one process's step count; FSDP2, TP and "
                        "per_rank runs count steps on every rank: record into a new run_dir")


def recorder_of(model: nn.Module):
    """The open recorder watching ``model`` (its unwrapped module under DDP), or None."""
    from gradexplorer.core.watch.ranks import _is_ddp

    return watched_by(model.module if _is_ddp(model) else model)
