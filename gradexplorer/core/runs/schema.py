"""The run directory: one SQLite database in WAL mode, plus snapshot folders.

Why SQLite in WAL mode: one transaction per step makes a step visible to readers all at once or
not at all; after ``kill -9`` of the writer the database holds every committed step and nothing
of the step being written; readers in other processes follow it while it grows without locking
the writer out; it is one file (not thousands of small ones), in the standard library, and a run
copied from a cluster opens as is.
"""

from __future__ import annotations

from pathlib import Path

FORMAT = "gradexplorer.run"
VERSION = 3  # 2: the step ledger and per-parameter accumulated norms / optimizer state;
# 3: lean rows (parameter names once, in ``param_names``; histograms as ``histogram_rows.py``
# encodes them), read through views of the version-2 tables' names and columns
LEAN = 3  # the first version written lean; 1 and 2 are read (and resumed) as they were written
DATABASE = "run.sqlite"
SNAPSHOTS = "snapshots"

SHARED = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY, time REAL NOT NULL, global_norm REAL, total_numel INTEGER,
    loss REAL, seconds REAL, ranks INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS rank_norms (
    step INTEGER NOT NULL, rank INTEGER NOT NULL, name TEXT NOT NULL, norm REAL,
    PRIMARY KEY (step, rank, name)
);
CREATE TABLE IF NOT EXISTS snapshots (step INTEGER PRIMARY KEY, path TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
    step INTEGER PRIMARY KEY, iteration INTEGER, micro_batches INTEGER, loss REAL,
    grad_norm_accumulated REAL, grad_norm_applied REAL, clip_coef REAL, clipped INTEGER,
    scale REAL, skipped INTEGER NOT NULL DEFAULT 0, skip_reason TEXT,
    nan_count INTEGER, inf_count INTEGER, lr TEXT
);
CREATE TABLE IF NOT EXISTS not_recorded (
    step INTEGER NOT NULL, name TEXT NOT NULL, cause TEXT NOT NULL, PRIMARY KEY (step, name)
);
CREATE TABLE IF NOT EXISTS batches (step INTEGER PRIMARY KEY, ids TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spike_events (
    step INTEGER PRIMARY KEY, until INTEGER NOT NULL, event TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS per_sample_norms (
    step INTEGER PRIMARY KEY, samples INTEGER NOT NULL, norms BLOB NOT NULL, top TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS noise_steps (
    step INTEGER PRIMARY KEY, parts INTEGER NOT NULL, batch_small INTEGER NOT NULL,
    loss_divisor REAL, g_small_sq REAL, g_big_sq REAL, g_sq REAL, trace REAL, b_simple REAL,
    g_sq_ema REAL, trace_ema REAL, b_simple_ema REAL, b_simple_low REAL, b_simple_high REAL
);
CREATE TABLE IF NOT EXISTS noise_params (
    step INTEGER NOT NULL, name TEXT NOT NULL, g_small_sq REAL, g_big_sq REAL, g_sq REAL,
    trace REAL, snr REAL, snr_ema REAL, PRIMARY KEY (step, name)
);
CREATE TABLE IF NOT EXISTS noise_sources (
    step INTEGER PRIMARY KEY, source TEXT NOT NULL, ranks INTEGER NOT NULL
);
"""  # per_sample_norms: each sample's gradient norm (float64 little-endian), the largest as JSON
# The per-parameter tables: their columns after (step, parameter). Versions 1 and 2 name the
# parameter in every row (``name TEXT``, again in the primary key's index); version 3 by
# ``param_names.id`` (a name is stored once), in a table of its own under a view that gives the
# version-2 table's name and columns back (``name`` from ``param_names``, ``rowid`` the row's),
# so a query of ``stats``, ``histograms`` or ``param_steps`` reads both layouts. Version 3's
# histogram ``edges`` and ``counts`` blobs are ``histogram_rows.py``'s.
PER_PARAMETER = {
    "stats": "numel INTEGER NOT NULL, has_grad INTEGER NOT NULL, norm REAL, mean REAL, std REAL, "
             "min REAL, max REAL, abs_max REAL, zero_fraction REAL, nan_count INTEGER, "
             "inf_count INTEGER, update_ratio REAL",
    "histograms": "edges BLOB NOT NULL, counts BLOB NOT NULL, nan_count INTEGER NOT NULL, "
                  "inf_count INTEGER NOT NULL, below INTEGER NOT NULL, above INTEGER NOT NULL",
    "param_steps": "grad_norm_accumulated REAL, lr REAL, exp_avg_norm REAL, exp_avg_sq_rms REAL, "
                   "effective_lr REAL, momentum_norm REAL",
}
LEAN_TABLES = {"stats": "stat_rows", "histograms": "histogram_rows",
               "param_steps": "param_step_rows"}  # version 3: view -> the table under it
NAMES_TABLE = "param_names"
LEGACY_SCHEMA = SHARED + "".join(
    f"CREATE TABLE IF NOT EXISTS {table} (step INTEGER NOT NULL, name TEXT NOT NULL, {columns}, "
    "PRIMARY KEY (step, name));\n" for table, columns in PER_PARAMETER.items())
LEAN_SCHEMA = SHARED + f"""
CREATE TABLE IF NOT EXISTS {NAMES_TABLE} (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
""" + "".join(  # stats keeps a rowid (a run-wide read finds a damaged row by it); the others are
    # stored in their primary key's order, without one (and without an index beside them)
    f"CREATE TABLE IF NOT EXISTS {LEAN_TABLES[view]} (step INTEGER NOT NULL, "
    f"param INTEGER NOT NULL, {columns}, PRIMARY KEY (step, param))"
    + ("" if view == "stats" else " WITHOUT ROWID") + ";\n"
    f"CREATE VIEW IF NOT EXISTS {view} AS SELECT "
    + ("r.rowid AS rowid, " if view == "stats" else "") + "r.step AS step, n.name AS name, "
    + ", ".join(f"r.{c} AS {c}" for c in (c.split()[0] for c in columns.split(", ")))
    + f" FROM {LEAN_TABLES[view]} AS r LEFT JOIN {NAMES_TABLE} AS n ON n.id = r.param;\n"
    for view, columns in PER_PARAMETER.items())  # LEFT JOIN: a lost name reads NULL (damage)
SUMMARIES_TABLE = "param_summaries"  # every parameter's figures so far: param_summaries.py
SUMMARIES_COLUMNS = ("param", "through", "grad_steps", "max_norm", "max_abs", "nonfinite_steps",
                     "first_nonfinite")
LEAN_SCHEMA += (f"CREATE TABLE IF NOT EXISTS {SUMMARIES_TABLE} (param INTEGER PRIMARY KEY, "
                "through INTEGER NOT NULL, grad_steps INTEGER NOT NULL, max_norm REAL, max_abs REAL, "
                "nonfinite_steps INTEGER NOT NULL, first_nonfinite INTEGER);\n")

def schema(version: int) -> str:
    """The tables (and views) of a run of format ``version``."""
    return LEAN_SCHEMA if version >= LEAN else LEGACY_SCHEMA


LEDGER_TABLE, PARAM_STEPS_TABLE = "ledger", "param_steps"  # absent from version-1 runs
PARAM_STEP_FIELDS = ("grad_norm_accumulated", "lr", "exp_avg_norm", "exp_avg_sq_rms",
                     "effective_lr", "momentum_norm")


def database_path(run_dir: str | Path) -> Path:
    """Where the run's database lives."""
    return Path(run_dir) / DATABASE


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a run directory (holds the run database)."""
    return database_path(path).is_file()


# What a step could not measure (``StepGradients.not_recorded``): parameter name ("" for the
# step's update ratios) and the cause. Created by every writer; absent from older runs.
NOT_RECORDED_TABLE = "not_recorded"
# The noise scale of steps of several backwards (``core/watch/noise_watch.py``, docs/noise.md):
# created by every writer since; absent from older runs (read as none).
NOISE_STEP_FIELDS = ("parts", "batch_small", "loss_divisor", "g_small_sq", "g_big_sq", "g_sq",
                     "trace", "b_simple", "g_sq_ema", "trace_ema", "b_simple_ema", "b_simple_low",
                     "b_simple_high")
NOISE_PARAM_FIELDS = ("g_small_sq", "g_big_sq", "g_sq", "trace", "snr", "snr_ema")
NOISE_TABLES = {"noise_steps": ("step", *NOISE_STEP_FIELDS),
                "noise_params": ("step", "name", *NOISE_PARAM_FIELDS),
                # where the small batches came from ("micro-batches", "ranks" of DDP, "both");
                # absent from runs written before it (read as micro-batches)
                "noise_sources": ("step", "source", "ranks")}
