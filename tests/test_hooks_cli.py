"""``gradexplorer run --hook`` and ``gradexplorer hooks``."""

from __future__ import annotations

import textwrap

INPLACE_MODEL = textwrap.dedent("""
    import torch
    from torch import nn
    from gradexplorer.session import Workload

    class Body(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return {"features": self.fc(x)}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(4, 8)
            self.mid = nn.Linear(8, 4)
            self.act = nn.ReLU(inplace=True)
            self.body = Body()

        def forward(self, x):
            return self.body(self.act(self.mid(self.inp(x))))["features"]

    def build():
        x, y = torch.randn(3, 4), torch.randn(3, 4)
        return Workload(Net(), lambda step: (x, y), nn.MSELoss(), name="net")
""")


def test_run_with_hooks_prints_their_events(run_cli):
    code, out, err = run_cli("run", "--model", "example:lenet", "--steps", "2",
                             "--hook", "fc1=once:scale:0.5", "--hook", "fc2=observe")
    assert code == 0, err
    lines = out.splitlines()
    assert "hook once:scale:0.5 on 'fc1' attached" in lines
    assert "hook observe on 'fc2' attached" in lines
    assert "hook once:scale:0.5 on 'fc1' acted once and detached" in lines
    assert sum(line.startswith("step ") for line in lines) == 2


def test_run_survives_an_inplace_hook(run_cli, tmp_path):
    path = tmp_path / "net.py"
    path.write_text(INPLACE_MODEL)
    code, out, err = run_cli("run", "--model", f"{path}:build", "--steps", "2", "--hook=mid=block")
    assert code == 0, err
    detached = [line for line in out.splitlines() if line.startswith("hook ") and "detached:" in line]
    assert len(detached) == 1 and "'mid'" in detached[0] and "in place" in detached[0]
    assert out.splitlines()[-1] == f"  step 1: {detached[0]}"  # and again in the end summary


def test_run_refuses_bad_hooks_with_one_line(run_cli, tmp_path):
    path = tmp_path / "net.py"
    path.write_text(INPLACE_MODEL)
    code, _, err = run_cli("run", "--model", f"{path}:build", "--hook", "body=observe")
    assert code == 2 and "returns a dict" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("run", "--model", "example:lenet", "--hook", "fc1")
    assert code == 2 and "use MODULE=ACTION" in err


def test_hooks_command_lists_modules_and_safety(run_cli, tmp_path):
    code, out, err = run_cli("hooks", "--model", "example:lenet")
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:8]}
    assert rows["fc1"][:4] == ["fc1", "Linear", "48,120", "safe"]
    assert rows["conv1"][3] == "observe" and rows["<root>"][2] == "61,706"
    path = tmp_path / "net.py"
    path.write_text(INPLACE_MODEL)
    code, out, err = run_cli("hooks", "--model", f"{path}:build")
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert "unsafe" in rows["mid"] and "in place" in rows["mid"]
    assert "unsafe" in rows["act"] and "unsafe" in rows["body"] and "dict" in rows["body"]
    assert " safe " in rows["body.fc"]
