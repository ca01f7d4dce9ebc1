"""The session's SGD and Adam (core/session/eager_optimizers.py): torch's figures bit for bit,
torch's hooks and names, and no import of torch._dynamo (issue 43: ready to step in 3 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from gradexplorer.core.session import eager_optimizers
from gradexplorer.core.session.engine import make_optimizer

ROOT = Path(__file__).resolve().parents[1]

SETTINGS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "foreach": False}),
    ("Adam", {"lr": 1e-2}),
    ("Adam", {"lr": 1e-2, "amsgrad": True, "weight_decay": 1e-2, "foreach": False}),
]


def trained(optimizer_class, settings: dict, steps: int = 7, dtype=torch.float32):
    """A small net after ``steps`` steps of ``optimizer_class``: its parameters and the state."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2)).to(dtype)
    optimizer = optimizer_class(model.parameters(), **settings)
    for step in range(steps):
        x = torch.randn(9, 5, dtype=dtype)
        optimizer.zero_grad()
        loss = model(x).pow(2).mean() + 0.1 * step
        loss.backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()], optimizer.state_dict()


@pytest.mark.parametrize(("name", "settings"), SETTINGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_same_parameters_and_state_bit_for_bit_as_torch(name, settings, dtype):
    ours, our_state = trained(getattr(eager_optimizers, name), settings, dtype=dtype)
    theirs, their_state = trained(getattr(torch.optim, name), settings, dtype=dtype)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert our_state["param_groups"] == their_state["param_groups"]
    for key, state in their_state["state"].items():
        assert state.keys() == our_state["state"][key].keys()
        assert all(torch.equal(torch.as_tensor(state[k]), torch.as_tensor(our_state["state"][key][k]))
                   for k in state)


def test_torch_names_hooks_and_grad_mode_kept():
    model = nn.Linear(3, 1)
    optimizer = make_optimizer("adam", model.parameters(), lr=0.1, momentum=None)
    assert isinstance(optimizer, torch.optim.Adam) and type(optimizer).__name__ == "Adam"
    seen = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(("pre", torch.is_grad_enabled())))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: seen.append(("post", opt)))
    model(torch.ones(2, 3)).sum().backward()
    optimizer.step()
    assert seen == [("pre", True), ("post", optimizer)]
    assert torch.is_grad_enabled()  # the step's grad mode is put back
    optimizer.zero_grad()
    assert model.weight.grad is None
    assert type(make_optimizer("sgd", model.parameters(), 0.1, 0.5)).__name__ == "SGD"


def test_constructing_and_stepping_imports_no_dynamo():
    """torch's own SGD imports torch._dynamo (1.3 s of CPU) on its first use; the session's
    optimizers, state dict included, do not (a new interpreter: nothing imported it before)."""
    code = (
        "import sys, torch\n"
        "from gradexplorer.core.session.engine import make_optimizer\n"
        "model = torch.nn.Linear(4, 2)\n"
        "for name in ('sgd', 'adam'):\n"
        "    opt = make_optimizer(name, model.parameters(), 0.1, 0.9)\n"
        "    model(torch.randn(3, 4)).sum().backward(); opt.step(); opt.zero_grad(); opt.state_dict()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, timeout=120)
    assert out.stdout.split() == ["False"], out.stderr
