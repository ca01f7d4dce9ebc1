"""watch(update_ratio=False): no ‖Δθ‖/‖θ‖ (its two passes over the weights are most of watch's
cost a step on a small model); every other figure, and every histogram, the same as with it."""

import dataclasses

import pytest
import torch

import gradexplorer as gx
from tests.test_watch import batch, make_model, train


def watched_run(tmp_path, name: str, update_ratio: bool):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rec = gx.watch(model, opt, tmp_path / name, update_ratio=update_ratio)
    train(model, opt, 4)
    latest = rec.latest()
    rec.close()
    return latest, gx.open_run(tmp_path / name)


def test_without_the_update_ratio_every_other_figure_is_the_same(tmp_path):
    with_ratio, run = watched_run(tmp_path, "with", True)
    without, bare = watched_run(tmp_path, "without", False)
    assert all(r is not None and r > 0 for r in with_ratio.column("update_ratio").values())
    assert set(without.column("update_ratio").values()) == {None}
    assert bare.steps == run.steps == [1, 2, 3, 4]
    for step in run.steps:
        kept, left = run.stats(step), bare.stats(step)
        assert set(kept) == set(left)
        for name, stats in kept.items():
            assert left[name].update_ratio is None and stats.update_ratio is not None
            assert dataclasses.replace(left[name], update_ratio=stats.update_ratio) == stats
            assert bare.histogram(step, name)[1].tolist() == run.histogram(step, name)[1].tolist()


def test_update_ratio_must_be_a_flag():
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(gx.UserError, match="update_ratio"):
        gx.watch(model, opt, update_ratio="no")
    rec = gx.watch(model, opt)  # the refused call left nothing attached
    x, y = batch(0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    assert rec.latest() is not None
    rec.close()
