"""Complex parameters are measured as their real and imaginary parts in every figure: the
statistics, the ledger's two norms and clip coefficient, the optimizer's state; `run`, `graph
--trace-grads` and `inspect` work on a complex model. Each figure against an independent float64
computation over ``torch.view_as_real``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx

MODEL_FILE = '''
import torch
from torch import nn
import gradexplorer


class ComplexNet(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = nn.Parameter(torch.randn(8, 4, dtype=torch.cfloat, generator=g))
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out((x.to(torch.cfloat) @ self.w.T).abs())


def build():
    torch.manual_seed(0)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    return gradexplorer.session.Workload(model=ComplexNet(), make_batch=lambda step: (x, y),
                                 loss_fn=nn.functional.mse_loss)
'''


def _model_file_namespace() -> dict:
    namespace: dict = {}
    exec(compile(MODEL_FILE, "complex_model.py", "exec"), namespace)  # its one definition
    return namespace


ComplexNet = _model_file_namespace()["ComplexNet"]


def parts(t: torch.Tensor) -> np.ndarray:
    """The real numbers a complex tensor holds, float64."""
    return torch.view_as_real(t.detach()).double().numpy() if t.is_complex() \
        else t.detach().double().numpy()


def norm64(tensors) -> float:
    return float(np.sqrt(sum((parts(t) ** 2).sum() for t in tensors)))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("clip", [None, 0.5])
def test_watch_figures_of_a_complex_parameter_are_exact(tmp_path, optimizer, clip):
    torch.manual_seed(0)
    model = ComplexNet()
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=0.01))
    rec = gx.watch(model, opt, tmp_path / "run")
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        accumulated = norm64(p.grad for p in model.parameters())
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        applied = norm64(p.grad for p in model.parameters())
        grad_w = parts(model.w.grad).copy()
        opt.step()
    rec.close()
    run = gx.open_run(tmp_path / "run")
    last = run.steps[-1]
    info = run.step_info(last)
    assert info["grad_norm_accumulated"] == pytest.approx(accumulated, rel=1e-12)
    assert info["grad_norm_applied"] == pytest.approx(applied, rel=1e-12)
    assert info["clip_coef"] == pytest.approx(applied / accumulated, rel=1e-12)
    assert info["clipped"] is (clip is not None)
    stats = run.stats(last)["w"]
    assert stats.norm == pytest.approx(np.sqrt((grad_w ** 2).sum()), rel=1e-12)
    assert stats.mean == pytest.approx(grad_w.mean(), rel=1e-9, abs=1e-15)
    assert stats.std == pytest.approx(grad_w.std(), rel=1e-9)
    assert (stats.min, stats.max) == (grad_w.min(), grad_w.max())
    edges, counts = run.histogram(last, "w")
    assert counts.sum() == grad_w.size == 2 * model.w.numel()
    assert np.array_equal(counts, np.histogram(grad_w, edges)[0])
    figures = run.figures(last)["w"]
    state = opt.state[model.w]
    if optimizer == "sgd":
        assert figures["momentum_norm"] == pytest.approx(norm64([state["momentum_buffer"]]), rel=1e-12)
    else:
        assert figures["exp_avg_norm"] == pytest.approx(norm64([state["exp_avg"]]), rel=1e-12)
        v_hat = parts(state["exp_avg_sq"]) / (1 - 0.999 ** float(state["step"]))
        assert figures["exp_avg_sq_rms"] == pytest.approx(np.sqrt(v_hat.mean()), rel=1e-12)
        effective = (0.01 / (np.sqrt(v_hat) + 1e-8)).mean()
        assert figures["effective_lr"] == pytest.approx(effective, rel=1e-9)


def test_the_command_line_on_a_complex_model(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "complex_model.py").write_text(MODEL_FILE)
    code, out, err = run_cli("run", "--model", "complex_model.py:build", "--steps", "2",
                             "--optimizer", "adam", "--export", "out", "--snapshot-every", "1")
    assert code == 0, err
    code, out, err = run_cli("inspect", "out/step-000002")
    assert code == 0, err
    assert "8×4×2" in out  # the complex weight measured as its two parts
    code, out, err = run_cli("graph", "--model", "complex_model.py:build", "--trace-grads",
                             "--out", "g.json")
    assert code == 0, err
    assert "gradients traced" in out


def test_the_session_global_norm_counts_both_parts(tmp_path):
    import importlib.util
    import sys

    path = tmp_path / "complex_model.py"
    path.write_text(MODEL_FILE)
    spec = importlib.util.spec_from_file_location("complex_model_for_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        session = gx.TrainingSession(module.build(), gx.session.SessionConfig(device="cpu", optimizer="sgd"))
        result = session.step()
        expected = norm64(p.grad for p in session.model.parameters())  # left by the step's backward
        assert float(result.grad_norm) == pytest.approx(expected, rel=1e-12)
        assert float(session.global_grad_norm()) == pytest.approx(expected, rel=1e-12)
    finally:
        sys.modules.pop(spec.name, None)
