"""What names a model before it is built: the default spec and ``ModelOptions`` (plain Python,
no torch, so the app and the command line take them before torch is imported; ``spec``
re-exports them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gradexplorer.core.messages.errors import UserError

DEFAULT_EXAMPLE = "digits"
DEFAULT_SPEC = f"example:{DEFAULT_EXAMPLE}"


@dataclass(frozen=True)
class ModelOptions:
    """Everything besides the spec that decides how a model is built."""

    input_shape: tuple[int, ...] | None = None
    loss: str | None = None
    weights: str | None = None
    batch_size: int | None = None
    seed: int = 0


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,1,32,32"`` (or ``1x1x32x32``) to a tuple of positive ints."""
    if not re.fullmatch(r"\s*-?\d+(\s*[,x×]\s*-?\d+)*\s*", text):
        raise UserError(f"bad shape {text!r}: expected comma-separated integers such as 1,1,32,32")
    shape = tuple(int(p) for p in re.split(r"[,x×]", text))
    if any(d <= 0 for d in shape):
        raise UserError(f"bad shape {text!r}: every dimension must be a positive integer")
    return shape
