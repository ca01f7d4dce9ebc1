"""``watch(per_sample_norms=True)``: per-sample norms each recorded step, kept in the run."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradexplorer as gx
from tests.legacy_runs import fixture_copy
from tests.persample_reference import reference_norms


class Tagger(nn.Module):
    """An MLP with a parameter of its own (not supported: named)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 12), nn.Linear(12, 3)
        self.temperature = nn.Parameter(torch.ones(()))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) / self.temperature


def test_watched_steps_keep_per_sample_norms_with_the_batch_ids(tmp_path):
    torch.manual_seed(0)
    model = Tagger().double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines: list[str] = []
    x, y = torch.randn(3, 8, 6, dtype=torch.float64), torch.randint(0, 3, (3, 8))
    rec = gx.Recorder(model, opt, tmp_path / "run", per_sample_norms=True, stats_every=2,
                      report=lines.append)
    assert lines == ["gradexplorer: per-sample gradient norms leave out (model) (Tagger): "
                     "Tagger is not supported"]
    expected = {}
    with rec:
        for step in range(3):
            ids = [f"img{step}-{i}" for i in range(8)]
            rec.note_batch(ids)
            if step == 1:  # the recorded step: the reference before the weights move
                expected = reference_norms(model, lambda f, a, b: F.cross_entropy(f(a), b),
                                           x[step], y[step])
            opt.zero_grad()
            F.cross_entropy(model(x[step]), y[step]).backward()
            opt.step()
            if step == 1:
                latest = rec.per_sample
    modules = expected[1]
    np.testing.assert_allclose(latest.modules["fc1"], modules["fc1"], rtol=1e-6)
    want = np.sqrt(modules["fc1"] ** 2 + modules["fc2"] ** 2)
    np.testing.assert_allclose(latest.norms, want, rtol=1e-6)
    with gx.open_run(tmp_path / "run") as run:
        assert run.per_sample_steps() == [2]  # stats_every=2: step 2 alone
        kept = run.per_sample(2)
        assert run.per_sample(1) is None
        assert kept.unsupported == {"(model) (Tagger)": "Tagger is not supported"}
    np.testing.assert_array_equal(kept.norms, latest.norms)
    order = np.argsort(-want)[:8]
    assert [e["index"] for e in kept.top] == order.tolist()
    assert [e["id"] for e in kept.top] == [f"img1-{i}" for i in order]
    assert list(kept.top[0]["modules"]) == sorted(
        ("fc1", "fc2"), key=lambda n: -modules[n][order[0]])


def test_old_runs_read_no_per_sample_norms_and_bad_arguments_are_refused(tmp_path):
    with gx.open_run(fixture_copy(tmp_path / "v2")) as run:
        assert run.per_sample_steps() == [] and run.per_sample(run.steps[0]) is None
    model = nn.Linear(2, 2)
    with pytest.raises(gx.UserError, match="the loss reduction must be 'mean' or 'sum', "
                                           "got 'avg'"):
        gx.watch(model, per_sample_norms=True, per_sample_reduction="avg")
    with pytest.raises(gx.UserError, match="got ''"):
        gx.watch(model, per_sample_norms=True, per_sample_reduction="")
    with pytest.raises(gx.UserError, match="per_sample_norms must be True or False"):
        gx.watch(model, per_sample_norms="yes")
    assert not model._forward_hooks and not model._forward_pre_hooks


def test_a_spike_keeps_its_samples_of_largest_gradient_norm(tmp_path, run_cli):
    from tests.spike_helpers import sample_ids, train

    rec = train(tmp_path / "run", 60, inject=50, per_sample_norms=True)
    event = next(e for e in rec.spikes.events if e.step == 50)
    with gx.open_run(tmp_path / "run") as run:
        kept = run.per_sample(50)
        stored = next(e for e in run.spike_events() if e.step == 50)
    assert event.grad_samples and stored.grad_samples == event.grad_samples
    order = np.argsort(-kept.norms)[:len(event.grad_samples)]
    assert [s["index"] for s in event.grad_samples] == order.tolist()
    assert [s["id"] for s in event.grad_samples] == [sample_ids(50)[i] for i in order]
    code, out, _ = run_cli("spikes", tmp_path / "run")
    assert code == 0
    first = event.grad_samples[0]
    assert f"largest per-sample gradient norms: {first['id']} ({first['norm']:.4g})" in out
    code, out, _ = run_cli("inspect", tmp_path / "run", "--step", "50")
    assert code == 0
    assert (f"{kept.as_step().summary()} (loss reduction mean); largest: {first['id']} (") in out
