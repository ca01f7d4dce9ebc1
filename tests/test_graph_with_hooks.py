"""``gradexplorer graph --hook``: hook nodes appear, attributed to their module, and can be hidden."""

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
