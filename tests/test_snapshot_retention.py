"""One retention policy: the exporter of the app and ``run --export`` and a watched run's
directory keep the same snapshots (the newest N by step), through one function."""

import pytest

import gradexplorer as gx
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.snapshot.retention import steps_to_remove
from gradexplorer.core.stack.assembly import SessionStack

SPEC, STEPS, KEEP = "example:mlp", 5, 2


def session():
    return TrainingSession(load_workload(SPEC, ModelOptions()), SessionConfig(device="cpu", seed=0))


def test_the_newest_by_step_stay():
    assert steps_to_remove([1, 2, 3], None) == []
    assert steps_to_remove([5, 1, 3, 2], 2) == [1, 2]  # by step number, not by arrival
    assert steps_to_remove([1, 2, 2, 3], 2) == [1]  # a step written again counts once
    assert steps_to_remove([4], 3) == []
    with pytest.raises(ValueError, match="at least 1"):
        steps_to_remove([1], 0)


def exporter_keeps(tmp_path) -> list[int]:
    s = session()
    stack = SessionStack.on(s, gx.session.GradientMonitor())
    exporter = stack.exporter(tmp_path / "export", 1, keep_snapshots=KEEP)
    for _ in range(STEPS):
        s.step()
    on_disk = sorted(p.name for p in (tmp_path / "export").iterdir())
    assert on_disk == [p.name for p in exporter.written]
    return [int(name.removeprefix("step-")) for name in on_disk]


def watch_keeps(tmp_path) -> list[int]:
    s = session()
    s.config.grad_norm = False
    with gx.watch(s.model, s.optimizer, tmp_path / "run", snapshot_every=1,
                  keep_snapshots=KEEP, spikes=False):
        for _ in range(STEPS):
            s.step()
    kept = gx.open_run(tmp_path / "run").snapshots
    on_disk = sorted(p.name for p in (tmp_path / "run" / "snapshots").iterdir())
    assert on_disk == [path.name for _, path in sorted(kept.items())]
    return sorted(kept)


def test_exporter_and_watched_run_keep_the_same_snapshots(tmp_path):
    expected = sorted(set(range(1, STEPS + 1)) - set(steps_to_remove(range(1, STEPS + 1), KEEP)))
    assert expected == [4, 5]
    assert exporter_keeps(tmp_path) == expected
    assert watch_keeps(tmp_path) == expected
