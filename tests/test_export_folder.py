"""Export folders: checked before step 1, never another run's, locked, retained, estimated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from gradexplorer.commands.export_options import WARN_BYTES, warn_about_size
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.spec import load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.snapshot.export_dir import ExportFolder
from gradexplorer.core.snapshot.exporter import SnapshotExporter, snapshot_bytes

LENET = ("--model", "example:lenet")


def listing(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_second_run_does_not_replace_the_first_runs_snapshots(run_cli, tmp_path):
    out = tmp_path / "out"
    assert run_cli("run", *LENET, "--steps", "2", "--export", out)[0] == 0
    before = (out / "step-000002" / "manifest.json").read_bytes()
    code, _, err = run_cli("run", "--model", "example:mlp", "--steps", "2", "--export", out)
    assert code == 2 and "already holds 1 snapshot" in err and "--overwrite" in err
    assert (out / "step-000002" / "manifest.json").read_bytes() == before
    code, stdout, err = run_cli("run", "--model", "example:mlp", "--steps", "1", "--export", out,
                                "--overwrite")
    assert code == 0, err
    assert listing(out) == ["step-000001"] and "removed 1 earlier" in stdout


def test_two_runs_cannot_share_a_folder(run_cli, tmp_path):
    out = tmp_path / "out"
    with ExportFolder(out):
        code, _, err = run_cli("run", *LENET, "--steps", "1", "--export", out)
    assert code == 2 and "another gradexplorer run is exporting to" in err
    assert listing(out) == []
    assert run_cli("run", *LENET, "--steps", "1", "--export", out)[0] == 0  # released


def test_an_unwritable_export_folder_fails_before_step_one(run_cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    code, out, err = run_cli("run", *LENET, "--steps", "30", "--export", tmp_path / "afile" / "x")
    assert code == 2 and "'afile' is a file" in err.replace(str(tmp_path) + "/", "")
    assert "step 1/" not in out


def test_keep_last_keeps_the_newest(run_cli, tmp_path):
    out = tmp_path / "out"
    code, _, err = run_cli("run", *LENET, "--steps", "5", "--export", out, "--snapshot-every", "1",
                           "--keep-snapshots", "2")
    assert code == 0, err
    assert listing(out) == ["step-000004", "step-000005"]
    assert run_cli("run", *LENET, "--steps", "1", "--keep-snapshots", "0", "--export", tmp_path / "x")[0] == 2


def test_leftovers_of_dead_runs_are_removed_and_live_ones_kept(tmp_path):
    dead = tmp_path / ".step-000003.partial-999999999-0123abcd"
    legacy = tmp_path / ".step-000004.old-89abcdef"
    alive = tmp_path / f".step-000005.partial-{os.getppid()}-0123abcd"
    for folder in (dead, legacy, alive):
        folder.mkdir()
        (folder / "gradients.safetensors").write_bytes(b"half")
    with ExportFolder(tmp_path) as claim:
        assert sorted(claim.removed) == sorted([dead, legacy])
    assert listing(tmp_path) == [alive.name]


def test_sigterm_mid_run_leaves_no_partial_folder(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradexplorer", "run", *LENET, "--steps", "100000",
         "--export", str(out), "--snapshot-every", "1", "--keep-snapshots", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for line in proc.stdout:  # waits on the run's own line for its first snapshot, no sleep
        if b"snapshot of step" in line:
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "gradexplorer: interrupted"
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    assert list(out.glob("step-*"))


def test_a_run_that_would_write_gigabytes_says_so_first(tmp_path):
    workload = load_workload("example:deep:blocks=4,width=1024")
    session = TrainingSession(workload, SessionConfig(device="cpu"))
    each = snapshot_bytes(session.model)
    assert each >= 4 * 1024 * 1024 * 4
    steps = WARN_BYTES // each + 10
    lines: list[str] = []
    exporter = SnapshotExporter(tmp_path, snapshot_every=1, last_step=steps)
    warn_about_size(session, exporter, 1, steps, None, lines.append)
    assert len(lines) == 1 and f"{steps} snapshots" in lines[0] and "--keep-snapshots" in lines[0]
    kept = SnapshotExporter(tmp_path, snapshot_every=1, last_step=steps, keep_snapshots=3)
    lines.clear()
    warn_about_size(session, kept, 1, steps, None, lines.append)
    assert lines == []
    with pytest.raises(UserError, match="GB free"):
        warn_about_size(session, exporter, 1, 10**9, None, lines.append)


def test_planned_counts_match_due_steps():
    for every, first, last, final in [(0, 1, 30, 30), (1, 1, 5, 5), (3, 1, 10, 10), (3, 4, 9, 9),
                                      (4, 2, 17, 17)]:
        exporter = SnapshotExporter(".", snapshot_every=every, last_step=final)
        assert exporter.planned(first, last) == sum(exporter.due(s) for s in range(first, last + 1))


def test_the_app_refuses_a_folder_of_an_earlier_run_in_a_dialog_line(qtbot, make_window, tmp_path):
    from tests.gui_helpers import open_model, wait_idle

    shown: list[str] = []
    folder = tmp_path / "snaps"
    (folder / "step-000007").mkdir(parents=True)
    (folder / "step-000007" / "manifest.json").write_text("{}")
    window = make_window()
    open_model(qtbot, window)
    window.controller.session.error.disconnect(window.show_error)  # the dialog, as text
    window.controller.session.error.connect(shown.append)
    window.controller.export_every(str(folder), 2)
    qtbot.waitUntil(lambda: bool(shown), timeout=30_000)
    assert "already holds 1 snapshot" in shown[0] and "move them first" in shown[0]
    assert window.controller.session.exporter is None
    window.controller.export_every(str(tmp_path / "fresh"), 1)
    window.controller.run(1)
    wait_idle(qtbot, window)
    with pytest.raises(UserError, match="another gradexplorer run"):
        ExportFolder(tmp_path / "fresh").claim()
    window.controller.export_every(None)
    qtbot.waitUntil(lambda: window.controller.session.exporter is None, timeout=30_000)
    with pytest.raises(UserError, match="already holds 1 snapshot"):  # unlocked: the next check
        ExportFolder(tmp_path / "fresh").claim()


def test_export_now_never_replaces_an_existing_snapshot(tmp_path):
    from grad_helpers import make_session

    from gradexplorer.core.snapshot import write_snapshot

    session = make_session("example:mlp")
    session.step()
    first = write_snapshot(tmp_path, session)
    before = (first / "manifest.json").read_bytes()
    with pytest.raises(UserError, match="already exists"):
        write_snapshot(tmp_path, session, replace=False)
    assert (first / "manifest.json").read_bytes() == before


def test_own_leftovers_are_tidied_and_a_moved_aside_snapshot_comes_back(tmp_path):
    """An interrupt inside a writer's own clean-up can leave this process's .partial/.old
    folders: release() (and the CLI's main thread) remove the unfinished one, put back a
    snapshot moved aside whose replacement never arrived, and drop one that was replaced."""
    from gradexplorer.core.snapshot.export_dir import ExportFolder

    pid = os.getpid()
    folder = ExportFolder(tmp_path).claim()
    partial = tmp_path / f".step-000003.partial-{pid}-0a1b2c3d"
    moved = tmp_path / f".step-000002.old-{pid}-0a1b2c3d"
    replaced = tmp_path / f".step-000001.old-{pid}-0a1b2c3d"
    other = tmp_path / ".step-000004.partial-1-0a1b2c3d"  # pid 1 is alive: another writer's
    for path in (partial, moved, replaced, other, tmp_path / "step-000001"):
        path.mkdir()
    (moved / "manifest.json").write_text("{}")
    folder.release()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [other.name, "step-000001", "step-000002"], names
    assert (tmp_path / "step-000002" / "manifest.json").read_text() == "{}"
