"""A run directory's database treated as untrusted input, as snapshot manifests are.

``check_database`` runs once when a run is opened: the format and its version (the ``meta``
row and SQLite's ``PRAGMA user_version``; a newer one is refused), every table and column the
reader selects, and the step numbers. The row readers below check each value as it is read
(a number where a figure belongs, a blob of the right length and dtype, JSON within a size and
depth limit), so a damaged run is one line naming the table, column and step, never a
traceback. The tables are data: a table the reader comes to need is one more entry here.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np

from gradexplorer.core.files.bounded_json import load_bounded
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs import schema as S
from gradexplorer.core.snapshot.schema import MAX_BINS, MAX_COUNT, printable
from gradexplorer.core.stats.records import STAT_FIELDS
from gradexplorer.core.steps.ledger import LEDGER_FIELDS

MAX_STEP = 2**53  # every step is exact as a float64 (the timeline's x axis)
STEP_COLUMNS = ("step", "time", "global_norm", "total_numel", "loss", "seconds", "ranks")
# Every table the reader selects from, with the columns it selects: checked on open.
READER_TABLES: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "steps": STEP_COLUMNS,
    "stats": ("step", "name", "numel", "has_grad", *STAT_FIELDS),
    "histograms": ("step", "name", "edges", "counts", "nan_count", "inf_count", "below", "above"),
    "snapshots": ("step", "path"),
}
# Tables that runs of earlier versions may lack (read as empty); checked when present.
OPTIONAL_TABLES: dict[str, tuple[str, ...]] = {
    "rank_norms": ("step", "rank", "name", "norm"),
    S.LEDGER_TABLE: ("step", *LEDGER_FIELDS),
    S.PARAM_STEPS_TABLE: ("step", "name", *S.PARAM_STEP_FIELDS),
    S.NOT_RECORDED_TABLE: ("step", "name", "cause"),
    "batches": ("step", "ids"), "spike_events": ("step", "until", "event"), **S.NOISE_TABLES,
    S.SUMMARIES_TABLE: S.SUMMARIES_COLUMNS, "per_sample_norms": ("step", "samples", "norms", "top"),
}
LEAN_TABLES: dict[str, tuple[str, ...]] = {  # version 3: the names, the tables under the views
    S.NAMES_TABLE: ("id", "name"), **{table: ("step", "param", *{**READER_TABLES, **OPTIONAL_TABLES}[
        view][2:]) for view, table in S.LEAN_TABLES.items()}}
COUNT_FIELDS = ("nan_count", "inf_count")


def check_version(db: sqlite3.Connection, where: str) -> int:
    """The run's format version; a one-line UserError when it is not a run or a newer one."""
    rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('format', 'version')"))
    if rows.get("format") != S.FORMAT:
        raise UserError(f"{where} is not a gradexplorer run directory")
    text = rows.get("version")
    try:
        version = int(text)
    except (TypeError, ValueError):
        raise UserError(f"{where}: run format version {printable(str(text))[:40]!r} is not a "
                        "whole number (meta table)") from None
    stored = db.execute("PRAGMA user_version").fetchone()[0]
    newest = max(version, stored)
    if newest > S.VERSION:
        raise UserError(f"{where} was written by a newer gradexplorer (run format version "
                        f"{newest}; this one reads up to {S.VERSION}): upgrade gradexplorer")
    if version < 1:
        raise UserError(f"{where}: run format version {version} is not one gradexplorer wrote")
    return version


def check_tables(db: sqlite3.Connection, where: str, version: int = S.VERSION) -> set[str]:
    """Every table (or view) and column the reader needs; returns the optional ones present."""
    present = {name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    needed = {**(LEAN_TABLES if version >= S.LEAN else {}), **READER_TABLES}
    for table, columns in {**needed, **OPTIONAL_TABLES}.items():
        if table not in present:
            if table in needed:
                raise UserError(f"{where} is damaged: its database has no {table} table")
            continue
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in columns if c not in have]
        if missing:
            raise UserError(f"{where} is damaged: table {table} has no column "
                            f"{', '.join(missing)}")
    return present & set(OPTIONAL_TABLES)


def check_steps(db: sqlite3.Connection, where: str) -> None:
    """Step numbers are whole numbers in 0..MAX_STEP."""
    bad = db.execute("SELECT step FROM steps WHERE typeof(step) != 'integer' OR step < 0 "
                     "OR step > ? LIMIT 1", (MAX_STEP,)).fetchone()
    if bad is not None:
        raise UserError(f"{where} is damaged: table steps holds step {_short(bad[0])} "
                        f"(steps are whole numbers 0..{MAX_STEP})")


def check_database(db: sqlite3.Connection, where: str) -> tuple[set[str], int]:
    """All of the above, once, when a run is opened: ``(optional tables present, version)``."""
    try:
        version = check_version(db, where)
        optional = check_tables(db, where, version)
        check_steps(db, where)
    except sqlite3.Error as exc:
        raise UserError(f"cannot read {where}: {exc}") from None
    return optional, version


def step_number(step: Any, where: str) -> int:
    """A step a caller asks for: a whole number the run can hold."""
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise UserError(f"{where}: a step is a whole number, not {type(step).__name__}")
    if not 0 <= int(step) <= MAX_STEP:
        raise UserError(f"{where} has no step {_short(step)} (steps are 0..{MAX_STEP})")
    return int(step)


def _short(value: Any) -> str:
    text = printable(str(value))
    return text if len(text) <= 24 else text[:21] + "…"


def figure(value: Any, where: str) -> float | int | None:
    """A stored figure: a number, NULL (no value) or 'nan' (SQLite keeps NaN as NULL)."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    if value == "nan":
        return math.nan
    raise UserError(f"{where} holds {type(value).__name__} {_short(value)!r} where a number "
                    "belongs")


def count(value: Any, where: str, high: int = MAX_COUNT) -> int | None:
    """A stored count: NULL or a whole number in 0..``high``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise UserError(f"{where} holds {_short(value)!r} where a count (0..{high}) belongs")
    return value


def is_figure(value: Any) -> bool:
    """The fast test of ``figure`` (a run-wide read tests many values, then explains one)."""
    return value is None or type(value) is float or type(value) is int  # noqa: E721 - exact types


def is_count(value: Any) -> bool:
    """The fast test of ``count``."""
    return value is None or (type(value) is int and 0 <= value <= MAX_COUNT)  # noqa: E721


def sql_is_figure(column: str) -> str:
    """``is_figure`` as an SQL condition on ``column`` (for a check inside a run-wide query)."""
    return f"(typeof({column}) IN ('real', 'integer', 'null') OR {column} = 'nan')"


def sql_is_count(column: str) -> str:
    """``is_count`` as an SQL condition on ``column``."""
    return f"({column} IS NULL OR typeof({column}) = 'integer' AND {column} BETWEEN 0 AND {MAX_COUNT})"


def sql_test(column: str) -> str:
    """The SQL condition a ``stats`` figure or count column meets (COUNT_FIELDS are counts)."""
    return sql_is_count(column) if column in COUNT_FIELDS else sql_is_figure(column)


def step_row(row: tuple, where: str) -> dict[str, Any]:
    """A ``steps`` row as ``{step, time, global_norm, total_numel, loss, seconds, ranks}``."""
    out = dict(zip(STEP_COLUMNS, row, strict=True))
    for key, value in out.items():
        if key in ("total_numel", "ranks"):
            if not is_count(value):
                count(value, f"{where}, table steps, column {key}")
        elif not is_figure(value):
            out[key] = figure(value, f"{where}, table steps, column {key}")
    return out


def row_where(where: str, table: str, step: Any, name: Any) -> str:
    """Where a row of a per-parameter table is: ``run '…', table T at step S (name)``."""
    return f"{where}, table {table} at step {_short(step)} ({printable(str(name))[:60]})"


def stat_name(step: Any, name: Any, where: str) -> str:
    """A ``stats`` row's parameter name: text."""
    if type(name) is not str:  # noqa: E721
        raise UserError(f"{where}, table stats at step {_short(step)} holds a parameter name of "
                        f"type {type(name).__name__}")
    return name


def stat_value(step: Any, name: str, column: str, value: Any, where: str) -> Any:
    """One column of a ``stats`` row: ``numel`` (a count), ``has_grad`` (0 or 1), a count
    (nan_count, inf_count) or a figure; the message is built only for a value that fails (a
    run-wide read checks each value it takes, one column of many rows)."""
    if column == "has_grad":
        if type(value) is int and value in (0, 1):  # noqa: E721
            return value
    elif column == "numel":
        if value is not None and is_count(value):
            return value
    elif is_count(value) if column in COUNT_FIELDS else is_figure(value):
        return value
    at = f"{row_where(where, 'stats', step, name)}, column {column}"
    if column == "has_grad":
        raise UserError(f"{at} holds {_short(value)!r} (0 or 1)")
    if column == "numel":
        raise UserError(f"{at} holds {_short(value)!r} where a count belongs")
    return count(value, at) if column in COUNT_FIELDS else figure(value, at)


def stat_row(step: int, name: Any, numel: Any, has_grad: Any, figures: tuple, where: str):
    """``(name, numel, has_grad, {field: value})`` of a ``stats`` row, each value checked (the
    message is built only for a value that fails: thousands of rows are read per step)."""
    if type(name) is not str or not is_count(numel) or numel is None or has_grad not in (0, 1) \
            or type(has_grad) is float:  # noqa: E721
        stat_name(step, name, where)
        stat_value(step, name, "numel", numel, where)
        stat_value(step, name, "has_grad", has_grad, where)
    values = dict(zip(STAT_FIELDS, figures, strict=True))
    for field, value in values.items():
        if is_count(value) if field in COUNT_FIELDS else is_figure(value):
            continue
        if value == "nan" and field not in COUNT_FIELDS:  # NaN kept as text: common, and fine
            values[field] = math.nan
            continue
        values[field] = stat_value(step, name, field, value, where)
    return name, numel, bool(has_grad), values


def histogram_arrays(edges: Any, counts: Any, extras: tuple, where: str | Callable[[], str]):
    """``(edges float64, counts int64, nan, inf, below, above)`` of a ``histograms`` row:
    blobs of whole float64/int64 values, one more edge than counts, edges finite and not
    decreasing, counts not negative."""
    for column, blob in (("edges", edges), ("counts", counts)):
        if type(blob) is not bytes:  # noqa: E721
            raise UserError(f"{_at(where)}, column {column} holds {type(blob).__name__}, not a blob")
        if len(blob) % 8:
            raise UserError(f"{_at(where)}, column {column} is {len(blob)} bytes, not a whole number "
                            "of 8-byte values")
    e, c = np.frombuffer(edges, "<f8").astype(np.float64), np.frombuffer(counts, "<i8").astype(np.int64)
    if not 1 <= c.size <= MAX_BINS or e.size != c.size + 1:
        raise UserError(f"{_at(where)}: {e.size} edges for {c.size} counts (one more edge than "
                        f"counts, 1..{MAX_BINS} counts)")
    # finite ends and no decrease (a NaN fails >=) mean every edge is finite and in order
    if not (math.isfinite(e[0]) and math.isfinite(e[-1]) and (e[1:] >= e[:-1]).all()):
        raise UserError(f"{_at(where)}, column edges holds edges that are not finite and increasing")
    if c.min() < 0:
        raise UserError(f"{_at(where)}, column counts holds a negative count")
    if not all(is_count(v) for v in extras):
        names = ("nan_count", "inf_count", "below", "above")
        for n, v in zip(names, extras, strict=True):
            count(v, f"{_at(where)}, column {n}")
    return (e, c, *(v or 0 for v in extras))


def histogram_block(rows: list[tuple]) -> list[tuple] | None:
    """``(name, edges, counts, nan, inf, below, above)`` of every ``histograms`` row of a step,
    checked at once (numpy) when all rows hold the same bin count, as a run writes them; None
    when any row needs ``histogram_arrays`` one by one (the check that names what is wrong)."""
    if not rows or any(type(r[0]) is not str or type(r[1]) is not bytes  # noqa: E721
                       or type(r[2]) is not bytes or len(r[1]) != len(rows[0][1])  # noqa: E721
                       or len(r[2]) != len(rows[0][2]) or not all(map(is_count, r[3:]))
                       for r in rows):
        return None
    bins = len(rows[0][2]) // 8
    if len(rows[0][2]) % 8 or len(rows[0][1]) != 8 * (bins + 1) or not 1 <= bins <= MAX_BINS:
        return None
    e = np.frombuffer(b"".join(r[1] for r in rows), "<f8").astype(np.float64).reshape(len(rows), -1)
    c = np.frombuffer(b"".join(r[2] for r in rows), "<i8").astype(np.int64).reshape(len(rows), -1)
    if not (np.isfinite(e[:, [0, -1]]).all() and (e[:, 1:] >= e[:, :-1]).all() and (c >= 0).all()):
        return None
    return [(r[0], e[i], c[i], *(v or 0 for v in r[3:])) for i, r in enumerate(rows)]


def _at(where: str | Callable[[], str]) -> str:
    return where() if callable(where) else where


def json_value(text: Any, where: str) -> Any:
    """A ``meta`` value: JSON text within the size and depth limits."""
    if not isinstance(text, (str, bytes)):
        raise UserError(f"{where} holds {type(text).__name__}, not JSON text")
    return load_bounded(text, where)


def structure(value: Any, where: str) -> dict[str, Any]:
    """The recorded model structure: ``{model, parameters: [{name, shape, numel, dtype,
    requires_grad}], modules: [{path, type}]}`` with every field checked."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where} must be an object, not {type(value).__name__}")
    params, modules = value.get("parameters", []), value.get("modules", [])
    if not isinstance(params, list) or not isinstance(modules, list):
        raise UserError(f"{where}: parameters and modules must be lists")
    if not isinstance(value.get("model", ""), str):
        raise UserError(f"{where}: model must be text")
    names = set()
    for i, p in enumerate(params):
        at = f"{where}: parameters[{i}]"
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not p["name"]:
            raise UserError(f"{at} must be an object with a name")
        shape = p.get("shape")
        if not isinstance(shape, list) or len(shape) > 64 or any(
                isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= MAX_COUNT for d in shape):
            raise UserError(f"{at}.shape must be a list of sizes")
        if math.prod(shape) > MAX_COUNT or p.get("numel", math.prod(shape)) != math.prod(shape):
            raise UserError(f"{at}.numel does not match its shape {shape}")
        if not isinstance(p.get("dtype", "float32"), str) or not isinstance(
                p.get("requires_grad", True), bool):
            raise UserError(f"{at}: dtype must be text and requires_grad true or false")
        if p["name"] in names:
            raise UserError(f"{at}.name repeats {printable(p['name'])[:60]!r}")
        names.add(p["name"])
    for i, m in enumerate(modules):
        if not isinstance(m, dict) or not isinstance(m.get("path"), str) or not isinstance(
                m.get("type"), str):
            raise UserError(f"{where}: modules[{i}] must be an object with a path and a type")
    return value


def settings(value: Any, where: str) -> dict[str, Any]:
    """The recorded settings (``{every, bins, hooks, ranks, mode, …}``; {} when not recorded):
    an object, ``bins`` a count of 1..MAX_BINS, ``hooks`` an object of module paths."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where} must be an object, not {type(value).__name__}")
    bins = value.get("bins", 64)
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise UserError(f"{where} holds bins {_short(bins)}")
    if not isinstance(value.get("hooks") or {}, dict):
        raise UserError(f"{where}: hooks must be an object, not {type(value['hooks']).__name__}")
    return value


def graph(value: Any, where: str) -> dict[str, Any] | None:
    """The recorded backward graph (networkx node-link data) with its nodes and edges checked."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("nodes"), list) or not isinstance(
            value.get("edges"), list) or not isinstance(value.get("graph", {}), dict):
        raise UserError(f"{where} must be an object with node and edge lists")
    ids = set()
    for i, node in enumerate(value["nodes"]):
        if not isinstance(node, dict) or isinstance(node.get("id"), bool) or not isinstance(
                node.get("id"), int) or node["id"] in ids:
            raise UserError(f"{where}: nodes[{i}] must be an object with a new whole-number id")
        for key in ("name", "kind", "module", "param", "dtype"):
            if node.get(key) is not None and not isinstance(node[key], str):
                raise UserError(f"{where}: nodes[{i}].{key} must be text")
        shape = node.get("shape")
        if shape is not None and (not isinstance(shape, list) or any(
                isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in shape)):
            raise UserError(f"{where}: nodes[{i}].shape must be a list of sizes")
        if not isinstance(node.get("saved", {}), dict):
            raise UserError(f"{where}: nodes[{i}].saved must be an object")
        ids.add(node["id"])
    for i, edge in enumerate(value["edges"]):
        ends = (edge.get("source"), edge.get("target")) if isinstance(edge, dict) else (None, None)
        if not all(isinstance(e, int) and e in ids for e in ends):
            raise UserError(f"{where}: edges[{i}] must join two of its nodes")
    return value


def ledger_values(step: int, values: tuple, where: str) -> dict[str, Any]:
    """A ``ledger`` row's columns (LEDGER_FIELDS order), each checked: figures, the skip reason
    as text, the learning rates as a bounded JSON list of numbers."""
    at = f"{where}, table {S.LEDGER_TABLE} at step {step}"
    row = dict(zip(LEDGER_FIELDS, values, strict=True))
    out = {k: figure(v, f"{at}, column {k}") for k, v in row.items()
           if k not in ("skip_reason", "lr")}
    reason = row["skip_reason"]
    if reason is not None and not isinstance(reason, str):
        raise UserError(f"{at}, column skip_reason holds {type(reason).__name__} "
                        f"{_short(reason)!r} where text belongs")
    out["skip_reason"] = reason
    lr = None if row["lr"] is None else json_value(row["lr"], f"{at}, column lr")
    if lr is not None and (not isinstance(lr, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in lr)):
        raise UserError(f"{at}, column lr holds {_short(row['lr'])!r} where a list of learning "
                        "rates belongs")
    out["lr"] = lr
    return out


def param_step_values(step: int, name: Any, values: tuple, where: str) -> dict[str, Any]:
    """A ``param_steps`` row's figures (PARAM_STEP_FIELDS order), each checked (messages built
    only for a row that fails the fast test: thousands of rows are read per step)."""
    if type(name) is str and all(is_figure(v) for v in values):  # noqa: E721 - exact type
        return dict(zip(S.PARAM_STEP_FIELDS, values, strict=True))
    if not isinstance(name, str):
        raise UserError(f"{where}, table {S.PARAM_STEPS_TABLE} at step {step} holds a parameter "
                        f"name of type {type(name).__name__}")
    at = f"{where}, table {S.PARAM_STEPS_TABLE} at step {step} ({printable(name)[:60]})"
    return {f: figure(v, f"{at}, column {f}")
            for f, v in zip(S.PARAM_STEP_FIELDS, values, strict=True)}
