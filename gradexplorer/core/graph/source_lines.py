"""Which line of the user's code created each autograd node, noted while a graph is traced.

A ``TorchFunctionMode`` sees every torch call of the traced forward. A call that created
autograd nodes (the thread's next sequence number moved) notes the sequence numbers it took
and the innermost calling frame that is the user's: outside torch, Python's standard library
and gradexplorer (its examples count as the user's; so do installed packages such as
transformers, whose modeling files are the model's code). Frames are walked only for calls
that made nodes, each code object classified once, and the code line itself is read only
for the locations a graph shows, so tracing costs little more (``bench/graph_sources.py``).
Only the graph traces use it, never an ordinary training step.

Calls nested inside a noted call are not seen separately (the mode is off inside its own
handler), so every node a composite call makes (``F.linear`` on 3-D inputs: a view, a
matrix product, a view) shares that call's line. An op that made no user-visible call (an
autograd ``Function``'s node in some torch versions, a hook node) has no source.
"""

from __future__ import annotations

import bisect
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode


def _dirs(*paths: str) -> tuple[str, ...]:
    """Each path and its real path, as prefixes ending in a separator."""
    return tuple({os.path.join(q, "") for p in paths for q in (p, os.path.realpath(p))})


_TORCH = _dirs(os.path.dirname(torch.__file__))
_OURS = _dirs(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_EXAMPLES = tuple(os.path.join(p, "core", "model", "examples", "") for p in _OURS)
_PACKAGES = _dirs(*{sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
_STDLIB = _dirs(*{sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})
_next_sequence_nr = torch.autograd._get_sequence_nr

# what a code object's file is: the user's, someone to look past, or gradexplorer's own
USER, PAST, OURS = 0, 1, 2


def file_role(filename: str) -> int:
    """``USER``, ``PAST`` (torch, the standard library, frozen modules) or ``OURS``."""
    if filename.startswith(_EXAMPLES):
        return USER
    if filename.startswith(_OURS):
        return OURS
    if filename.startswith(_TORCH):
        return PAST
    if filename.startswith(_PACKAGES):  # transformers, timm, the user's own installed package
        return USER
    return PAST if filename.startswith(_STDLIB) or filename.startswith("<frozen") else USER


@dataclass(frozen=True)
class SourceLine:
    """Where a node was made: ``path`` (absolute), ``line``, ``function`` and the ``code``."""

    path: str
    line: int
    function: str
    code: str

    @property
    def where(self) -> str:
        """``path:line``, what an editor opens."""
        return f"{self.path}:{self.line}"

    @property
    def short(self) -> str:
        """``file.py:line``."""
        return f"{os.path.basename(self.path)}:{self.line}"


class SourceLines(TorchFunctionMode):
    """``with SourceLines() as lines:`` run a forward; then ``lines.of(seq)`` per node."""

    def __init__(self) -> None:
        super().__init__()
        self._starts: list[int] = []  # first sequence number a noted call took
        self._ends: list[int] = []  # one past its last
        self._where: list[tuple[str, int, str] | None] = []
        self._roles: dict[object, int] = {}  # code object -> role
        self._lines: dict[tuple[str, int, str], SourceLine] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if torch.compiler.is_compiling():  # a compiled function: its nodes are compiled ones
            return func(*args, **(kwargs or {}))
        start = _next_sequence_nr()
        result = func(*args, **(kwargs or {}))
        end = _next_sequence_nr()
        if end != start:
            self._starts.append(start)
            self._ends.append(end)
            self._where.append(self._caller())
        return result

    def _caller(self) -> tuple[str, int, str] | None:
        """The innermost user frame calling now; None when gradexplorer's own code made it."""
        roles = self._roles
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            role = roles.get(code)
            if role is None:
                role = roles[code] = file_role(code.co_filename)
            if role == USER:
                return code.co_filename, frame.f_lineno, code.co_name
            if role == OURS:
                return None
            frame = frame.f_back
        return None

    def of(self, seq: int) -> SourceLine | None:
        """The source line of the node with sequence number ``seq``, None if unknown."""
        i = bisect.bisect_right(self._starts, seq) - 1
        if i < 0 or seq >= self._ends[i] or self._where[i] is None:
            return None
        key = self._where[i]
        found = self._lines.get(key)
        if found is None:
            path, line, function = key
            code = linecache.getline(path, line).strip()
            found = self._lines[key] = SourceLine(path, line, function, code)
        return found


def annotate_sources(nodes: dict, ops: list[int], seqs: list[int], lines: SourceLines) -> None:
    """Give each op node its ``source`` (``path:line``), ``code`` and ``function`` where known
    (hook nodes and leaves get none: torch, not the user's code, made them)."""
    for i, seq in zip(ops, seqs, strict=True):
        attrs = nodes[i]
        if attrs["kind"] == "hook":
            continue
        found = lines.of(seq)
        if found is not None:
            attrs["source"], attrs["code"], attrs["function"] = found.where, found.code, found.function
