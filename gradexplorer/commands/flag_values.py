"""argparse ``type=`` functions: a flag's bad value is refused while the command line is read.

argparse turns the ArgumentTypeError these raise into one line naming the flag, exit status 2,
before any model loads: ``gradexplorer: error: argument --width: must be at least 4, got 0``.
Plain Python (no torch, numpy): ``--help`` stays import-light (tests/test_cli_startup.py).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from gradexplorer.core.messages.errors import UserError

MAX_WHOLE = 1 << 30  # no count, step or size a flag takes comes near this


def whole_number(lo: int = 1, hi: int = MAX_WHOLE) -> Callable[[str], int]:
    """A ``type=`` taking whole numbers from ``lo`` to ``hi``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {value}")
        if value > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi}, got {value}")
        return value

    parse.__name__ = "whole number"
    return parse


def real_number(lo: float = 0.0, hi: float = math.inf, *,
                with_lo: bool = True) -> Callable[[str], float]:
    """A ``type=`` taking finite numbers from ``lo`` (or above it, ``with_lo=False``) to ``hi``."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text.strip()}")
        if value < lo or value == lo and not with_lo:
            least = "at least" if with_lo else "more than"
            raise argparse.ArgumentTypeError(f"must be {least} {lo:g}, got {value:g}")
        if value > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi:g}, got {value:g}")
        return value

    parse.__name__ = "number"
    return parse


_BYTE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def byte_size(text: str) -> int:
    """A ``type=`` taking a size in bytes: ``1000000``, ``500KB``, ``2.5GB``, ``1GiB``."""
    number = text.strip().lower().rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = text.strip().lower()[len(number):].strip()
    try:
        value = float(number) * _BYTE_UNITS[unit]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"expected a size such as 500MB or 2GB, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a size of 0 bytes or more, got {text.strip()}")
    return int(value)


def non_empty(text: str) -> str:
    """A ``type=`` refusing an empty (or blank) value."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty")
    return text


def name_list(text: str) -> str:
    """A ``type=`` for a comma-separated list that names at least one thing."""
    if not any(part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError(f"names nothing ({text!r}); give a comma-separated list")
    return text


def checked_by(check: Callable[[str], object]) -> Callable[[str], str]:
    """A ``type=`` keeping the text when ``check(text)`` accepts it; its one-line UserError
    becomes argparse's error naming the flag."""

    def parse(text: str) -> str:
        try:
            check(text)
        except UserError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return parse


def _parse_shape(text: str) -> object:
    from gradexplorer.core.model.options import parse_shape  # imports torch: on use only

    return parse_shape(text)


shape = checked_by(_parse_shape)  # --input-shape: positive whole numbers such as 1,1,32,32
