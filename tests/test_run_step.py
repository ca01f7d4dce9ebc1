"""``Run.step(n)``: one record of a recorded step — figures, histograms, ledger and optimizer
state together — checked against a float64 computation of the same gradients; the old reads
(``stats``, ``param_stats``, ``figures``, ``step_gradients``, ``optimizer_state``) give its parts."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.messages.errors import UserError


def test_one_step_record_holds_the_steps_figures_ledger_and_optimizer_state(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    grads, lrs = {}, []
    with gx.watch(model, opt, tmp_path / "run", bins=8) as rec:
        for step in (1, 2):
            x = torch.randn(5, 4, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            rec.note_loss(loss)
            grads[step] = {n: p.grad.double().clone() for n, p in model.named_parameters()}
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
    run = gx.open_run(tmp_path / "run")
    record = run.step(2)
    assert record.step == 2 and run.step(2) is record  # the step read last is kept
    for name, g in grads[2].items():
        assert record.stats[name].norm == pytest.approx(float(g.norm()), rel=1e-12)
        assert record.figures[name]["norm"] == record.stats[name].norm
        assert int(record.histograms[name].counts.sum()) == g.numel()
        assert record.optimizer_state[name].exp_avg_norm is not None
    total = sum(float(g.square().sum()) for g in grads[2].values()) ** 0.5
    assert record.ledger.optimizer_step == 2
    assert record.ledger.grad_norm_applied == pytest.approx(total, rel=1e-12)
    assert record.ledger.lr == (lrs[1],)
    assert record.gradients.global_norm == pytest.approx(total, rel=1e-12)
    # the old reads are its parts, the same figures
    assert run.stats(2) == record.stats and run.figures(2) == record.figures
    assert run.param_stats(2) == record.params and run.step_gradients(2) is record.gradients
    assert run.optimizer_state(2) == record.optimizer_state
    assert run.step(1).stats["0.weight"].norm == pytest.approx(float(grads[1]["0.weight"].norm()),
                                                               rel=1e-12)
    with pytest.raises(UserError, match="has no step 3"):
        run.step(3)
