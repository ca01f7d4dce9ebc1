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
VERSION = 2  # 2: the step ledger and per-parameter accumulated norms / optimizer state
DATABASE = "run.sqlite"
SNAPSHOTS = "snapshots"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY, time REAL NOT NULL, global_norm REAL, total_numel INTEGER,
    loss REAL, seconds REAL, ranks INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS stats (
    step INTEGER NOT NULL, name TEXT NOT NULL, numel INTEGER NOT NULL, has_grad INTEGER NOT NULL,
    norm REAL, mean REAL, std REAL, min REAL, max REAL, abs_max REAL, zero_fraction REAL,
    nan_count INTEGER, inf_count INTEGER, update_ratio REAL,
    PRIMARY KEY (step, name)
);
CREATE TABLE IF NOT EXISTS histograms (
    step INTEGER NOT NULL, name TEXT NOT NULL, edges BLOB NOT NULL, counts BLOB NOT NULL,
    nan_count INTEGER NOT NULL, inf_count INTEGER NOT NULL, below INTEGER NOT NULL,
    above INTEGER NOT NULL,
    PRIMARY KEY (step, name)
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
CREATE TABLE IF NOT EXISTS param_steps (
    step INTEGER NOT NULL, name TEXT NOT NULL, grad_norm_accumulated REAL, lr REAL,
    exp_avg_norm REAL, exp_avg_sq_rms REAL, effective_lr REAL, momentum_norm REAL,
    PRIMARY KEY (step, name)
);
CREATE TABLE IF NOT EXISTS not_recorded (
    step INTEGER NOT NULL, name TEXT NOT NULL, cause TEXT NOT NULL, PRIMARY KEY (step, name)
);
CREATE TABLE IF NOT EXISTS batches (step INTEGER PRIMARY KEY, ids TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS spike_events (
    step INTEGER PRIMARY KEY, until INTEGER NOT NULL, event TEXT NOT NULL
);
"""
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
