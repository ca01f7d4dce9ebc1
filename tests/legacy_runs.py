"""Runs of the formats before 3: the committed version-2 run, and empty older databases that
``watch(..., resume=True)`` writes into as those versions were written."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from gradexplorer.core.runs import schema as S

FIXTURE = Path(__file__).resolve().parent / "data" / "run_v2"  # tests/data/make_run_v2.py


def fixture_copy(target: Path) -> Path:
    """A copy of the version-2 run written by the gradexplorer before format 3."""
    shutil.copytree(FIXTURE, target, ignore=shutil.ignore_patterns("*.json"))
    return target


def legacy_run(path: Path, version: int = 2) -> Path:
    """An empty run of format ``version`` (names in every row, float64 edges and int64 counts):
    a run resumed from it is written as that version's writer wrote it."""
    path.mkdir(parents=True)
    db = sqlite3.connect(path / S.DATABASE)
    db.executescript(S.LEGACY_SCHEMA)
    db.execute(f"PRAGMA user_version = {version}")
    db.executemany("INSERT INTO meta VALUES (?, ?)",
                   [("format", S.FORMAT), ("version", str(version)), ("created", "0")])
    db.commit()
    db.close()
    return path
