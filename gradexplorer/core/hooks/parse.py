"""Parse an ``ACTION[:ARG]`` string into the action it names (built-in or the user's own)."""

from __future__ import annotations

import math
import zlib

from gradexplorer.core.hooks.actions import ACTIONS, Action, Block, Clip, Noise, Observe, Once, Scale
from gradexplorer.core.hooks.user_hook import UserHook
from gradexplorer.core.messages.errors import UserError

MAX_ACTION_NUMBER = 1e6  # |K|, NORM, STD: past this a hook only wrecks the run (inf/NaN)


def _number(spec: str, arg: str, what: str, bound: float = MAX_ACTION_NUMBER) -> float:
    try:
        value = float(arg)
    except ValueError:
        raise UserError(f"bad hook action {spec!r}: {what} must be a number, got {arg!r}") from None
    if not math.isfinite(value):
        raise UserError(f"bad hook action {spec!r}: {what} must be finite")
    if abs(value) > bound:
        raise UserError(f"bad hook action {spec!r}: {what} must be at most {bound:g} in size, "
                        f"got {arg}")
    return value


def _no_argument(spec: str, name: str, arg: str) -> None:
    if arg:
        raise UserError(f"bad hook action {spec!r}: {name} takes no argument")


def parse_action(spec: str, module: str = "", seed: int = 0) -> Action:
    """The action an ``ACTION[:ARG]`` string names; a UserError for unknown or malformed ones."""
    spec = spec.strip()
    name, _, arg = spec.partition(":")
    if name == "observe":
        if arg not in ("", "capture"):
            raise UserError(f"bad hook action {spec!r}: use observe or observe:capture")
        return Observe(spec, capture=arg == "capture")
    if name == "scale":
        return Scale(spec, _number(spec, arg, "the factor K in scale:K"))
    if name == "block":
        _no_argument(spec, "block", arg)
        return Block(spec)
    if name == "clip":
        max_norm = _number(spec, arg, "NORM in clip:NORM")
        if max_norm <= 0:
            raise UserError(f"bad hook action {spec!r}: NORM must be positive")
        return Clip(spec, max_norm)
    if name == "noise":
        return _parse_noise(spec, arg, module, seed)
    if name == "once":
        if not arg or arg.startswith("once"):
            raise UserError(f"bad hook action {spec!r}: use once:ACTION, e.g. once:scale:0.5")
        return Once(spec, parse_action(arg, module, seed))
    if name == "file":
        return UserHook.load(spec, arg, module)
    raise UserError(
        f"unknown hook action {spec!r}; actions are: {', '.join(ACTIONS)} "
        "(e.g. observe, scale:0.5, block, clip:1.0, noise:0.01, once:scale:0.5, file:hooks.py:fn)"
    )


def _parse_noise(spec: str, arg: str, module: str, seed: int) -> Noise:
    std_text, _, seed_text = arg.partition(":")
    std = _number(spec, std_text, "STD in noise:STD")
    if std < 0:
        raise UserError(f"bad hook action {spec!r}: STD must not be negative")
    if seed_text:
        noise_seed = int(_number(spec, seed_text, "SEED in noise:STD:SEED", 2.0**63))
    else:  # distinct, reproducible streams per module
        noise_seed = (seed * 1_000_003 + zlib.crc32(module.encode())) % 2**63
    return Noise(spec, std, noise_seed)
