"""The per-parameter figures of a block of steps as arrays: the flat table exports read.

One query per table (``stats``, ``param_steps``) for the whole block; every column is checked
at C speed by its set of value types (and range, for counts), and a column that fails is read
value by value with ``validate.py``'s checks, whose one-line error names the row.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs import validate as V
from gradexplorer.core.stats.records import STAT_FIELDS

FIELDS = (*STAT_FIELDS, *S.PARAM_STEP_FIELDS)  # Run.figures' keys, in its order
_NUMBERS, _WHOLE = {float, int, type(None)}, {int, type(None)}
SQL_NAMES = 64  # up to this many parameters asked for are picked by the query, more after it


@dataclass(frozen=True)
class FigureBlock:
    """``values[field][k, p]``: figure ``field`` of parameter ``names[p]`` at step ``steps[k]``
    (NaN where none or NaN), ``known[field]`` where it has a value (not NULL), ``grad`` where the
    parameter had a gradient; ``names`` in the model's order (others after, as found)."""

    steps: np.ndarray
    names: list[str]
    grad: np.ndarray
    values: dict[str, np.ndarray]
    known: dict[str, np.ndarray]

    def rows(self, k: int) -> dict[str, dict[str, Any]]:
        """``{name: {field: value}}`` of step ``steps[k]`` as ``Run.figures`` gives it
        (parameters with a gradient; counts as int, None where no value)."""
        columns = {}
        for f in FIELDS:
            v = self.values[f][k].tolist()
            if f in V.COUNT_FIELDS:
                v = [int(x) if x == x else x for x in v]
            columns[f] = [x if known else None for x, known in zip(v, self.known[f][k].tolist(),
                                                                   strict=True)]
        return {name: {f: columns[f][p] for f in FIELDS}
                for p, name in enumerate(self.names) if self.grad[k, p]}


def _check(column: tuple, count: bool, explain) -> set[type]:
    """Every value of ``column`` a figure (or a count); ``explain(i)`` the first that is not.
    Returns the column's set of value types (of a sound column)."""
    types = set(map(type, column))
    if count:
        present = [v for v in column if v is not None] if type(None) in types else column
        if types <= _WHOLE and (not present or (min(present) >= 0 and max(present) <= V.MAX_COUNT)):
            return types
    elif types <= _NUMBERS or types <= _NUMBERS | {str} and all(
            v == "nan" for v in column if type(v) is str):  # noqa: E721 - NaN kept as 'nan'
        return types
    for i, v in enumerate(column):
        if not (V.is_count(v) if count else V.is_figure(v) or v == "nan"):
            explain(i)
    return types


def figure_block(run, steps: Sequence[int], names: set[str] | None = None,
                 optimizer: bool = True) -> FigureBlock:
    """The figures of ``steps`` (every parameter's, or ``names``'), one query per table
    (without ``optimizer``, PARAM_STEP_FIELDS are left unknown and not read)."""
    steps = [int(s) for s in steps]
    wanted = "[" + ",".join(map(str, steps)) + "]"
    where, args = "WHERE step IN (SELECT value FROM json_each(?))", [wanted]
    if names is not None and len(names) <= SQL_NAMES:  # a few parameters: (step, name) lookups
        where += " AND name IN (SELECT value FROM json_each(?))"
        args.append(json.dumps(sorted(names)))
    stats = run._rows(f"SELECT step, name, numel, has_grad, {', '.join(STAT_FIELDS)} FROM stats "
                      f"{where}", tuple(args))
    extra = run._rows(f"SELECT step, name, {', '.join(S.PARAM_STEP_FIELDS)} FROM {S.PARAM_STEPS_TABLE} "
                      f"{where}", tuple(args)) if optimizer and S.PARAM_STEPS_TABLE in run._optional else []
    if names is not None:
        stats = [r for r in stats if r[1] in names]
        extra = [r for r in extra if r[1] in names]
    order = {n: i for i, n in enumerate(run.parameters)}
    columns = list(zip(*stats, strict=True)) if stats else []
    found = dict.fromkeys(columns[1] if stats else ())
    if stats and set(map(type, found)) != {str}:
        for step, name, *_ in stats:
            if type(name) is not str:  # noqa: E721
                V.stat_name(step, name, run.where)
    listed = sorted((n for n in found if n in order), key=order.__getitem__)
    block_names = [*listed, *(n for n in found if n not in order)]
    k, p = len(steps), len(block_names)
    at_step = {s: i for i, s in enumerate(steps)}
    at_name = {n: i for i, n in enumerate(block_names)}
    values = {f: np.full((k, p), math.nan) for f in FIELDS}
    known = {f: np.zeros((k, p), bool) for f in FIELDS}
    grad = np.zeros((k, p), bool)
    if stats:
        rows = _index(columns[0], at_step), _index(columns[1], at_name)

        def explain(i: int) -> None:
            r = stats[i]
            V.stat_row(r[0], r[1], r[2], r[3], r[4:], run.where)

        _check(columns[2], True, explain)
        if None in columns[2] or not set(columns[3]) <= {0, 1} or set(map(type, columns[3])) != {int}:
            for i in range(len(stats)):
                explain(i)
        grad[rows] = np.array(columns[3], bool)
        _fill(columns[4:], STAT_FIELDS, rows, values, known, explain)
    if extra:
        columns = list(zip(*extra, strict=True))
        if set(map(type, columns[1])) != {str}:
            for r in extra:
                V.param_step_values(r[0], r[1], tuple(r[2:]), run.where)
        keep = [i for i, n in enumerate(columns[1]) if n in at_name]
        if len(keep) < len(extra):  # accumulated norms of parameters without a stats row here
            extra = [extra[i] for i in keep]
            columns = list(zip(*extra, strict=True)) if extra else []
        if extra:
            rows = _index(columns[0], at_step), _index(columns[1], at_name)
            _fill(columns[2:], S.PARAM_STEP_FIELDS, rows, values, known,
                  lambda i: V.param_step_values(extra[i][0], extra[i][1], tuple(extra[i][2:]), run.where))
    return FigureBlock(np.array(steps, np.int64), block_names, grad, values, known)


def _index(column: tuple, at: dict) -> np.ndarray:
    """Each value's place (``at[value]``) as an int64 array, looked up at C speed."""
    return np.fromiter(map(at.__getitem__, column), np.int64, len(column))


def _fill(columns, fields, rows, values, known, explain) -> None:
    for field, column in zip(fields, columns, strict=True):
        types = _check(column, field in V.COUNT_FIELDS, explain)
        if str in types or type(None) in types:  # 'nan' as NaN, None as NaN and not known
            values[field][rows] = np.array(column, np.float64)
            known[field][rows] = np.not_equal(np.array(column, object), None)
        else:  # numbers only, as a run writes them
            values[field][rows] = np.fromiter(column, np.float64, len(column))
            known[field][rows] = True
