"""Hooks given on the command line reach `graph` (hook nodes) and `run --export` (manifest)."""

import json


def hook_nodes(path):
    data = json.loads(path.read_text())
    return [(n["name"], n["module"]) for n in data["nodes"] if n["kind"] == "hook"]


def test_graph_shows_and_hides_hook_nodes(run_cli, tmp_path):
    shown, hidden = tmp_path / "shown.json", tmp_path / "hidden.json"
    code, out, err = run_cli("graph", "--model", "example:lenet", "--hook", "fc1=scale:0.5", "--out", shown)
    assert code == 0, err
    assert "hook scale:0.5 on 'fc1' attached" in out
    assert hook_nodes(shown) and set(hook_nodes(shown)) == {("BackwardHookFunctionBackward", "fc1")}
    code, _, err = run_cli(
        "graph", "--model", "example:lenet", "--hook", "fc1=block", "--hide-hooks", "--out", hidden
    )
    assert code == 0, err
    assert hook_nodes(hidden) == []


def test_run_export_records_hooks_and_captured_tensors(run_cli, tmp_path):
    from gradexplorer.core.snapshot import read_snapshot

    code, out, err = run_cli(
        "run", "--model", "example:lenet", "--steps", "2", "--hook", "fc1=scale:0.5",
        "--hook", "fc2=observe:capture", "--export", tmp_path,
    )
    assert code == 0, err
    snapshot = read_snapshot(tmp_path / "step-000002")
    assert snapshot.manifest["hooks"] == [
        {"module": "fc1", "action": "scale:0.5", "calls": 2},
        {"module": "fc2", "action": "observe:capture", "calls": 2},
    ]
    captured = snapshot.extra_tensors()
    assert set(captured) == {"hooks/fc2/grad_input.0", "hooks/fc2/grad_output.0"}
    assert list(captured["hooks/fc2/grad_output.0"].shape) == [1, 84]
