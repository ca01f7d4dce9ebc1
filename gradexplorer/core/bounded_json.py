"""JSON from a file the program did not write itself, parsed with a size and a depth limit.

``json.loads`` recurses once per nesting level: a document nested 100,000 deep ends in a
RecursionError (and a deep enough one in a native stack overflow). The depth is measured
first, without recursion (string contents removed, brackets counted with numpy), so a bad
document is one line naming what it is, never a crash.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from gradexplorer.core.errors import UserError

MAX_BYTES = 256 * 2**20  # far beyond any manifest, structure or graph gradexplorer writes
MAX_DEPTH = 64  # gradexplorer's own documents nest at most 6 deep
STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
OPEN, CLOSE = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)


def nesting_depth(data: bytes) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text, brackets inside strings ignored."""
    codes = np.frombuffer(STRING.sub(b'""', data), np.uint8)
    steps = np.isin(codes, OPEN).astype(np.int64) - np.isin(codes, CLOSE)
    return int(np.cumsum(steps).max(initial=0))


def load_bounded(text: str | bytes, where: str, max_bytes: int = MAX_BYTES,
                 max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``; a one-line UserError (starting with ``where``) when the text is
    larger than ``max_bytes``, nested deeper than ``max_depth`` or not JSON."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if len(data) > max_bytes:
        raise UserError(f"{where} is too large ({len(data) / 2**20:,.0f} MB; at most "
                        f"{max_bytes / 2**20:,.0f} MB)")
    depth = nesting_depth(data)
    if depth > max_depth:
        raise UserError(f"{where} is nested too deep ({depth:,} levels; at most {max_depth})")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError too
        raise UserError(f"{where} is unreadable or truncated, not valid JSON ({exc})") from None
