"""gradexplorer.watch on a hand-written loop: figures equal float64 maths, runs read back."""

import math

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(16, 6, generator=g), torch.randn(16, 3, generator=g)


def train(model, optimizer, steps, rec=None, check=None):
    for step in range(steps):
        x, y = batch(step)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        if rec is not None:
            rec.note_loss(loss)
            rec.losses.append(loss.item())
        if check is not None:
            check({n: p.grad.detach().double().clone() for n, p in model.named_parameters()},
                  {n: p.detach().double().clone() for n, p in model.named_parameters()})
        optimizer.step()


def test_watch_records_every_step_into_a_run(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    seen = []
    with gx.watch(model, opt, tmp_path / "run", bins=16) as rec:
        rec.losses = []
        train(model, opt, 4, rec, check=lambda g, w: seen.append((g, w)))
        latest = rec.latest()
    assert latest.step == 4
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4]
    grads, before = seen[-1]
    after = {n: p.detach().double() for n, p in model.named_parameters()}
    stats = run.stats(4)  # ParamStats, as the monitor reported them
    assert list(stats) == [n for n, _ in model.named_parameters()]
    for name, g in grads.items():
        s = stats[name]
        assert isinstance(s, gx.ParamStats) and s.name == name and s.shape == tuple(g.shape)
        assert s.norm == pytest.approx(float(g.norm()), rel=1e-12)
        assert s.mean == pytest.approx(float(g.mean()), rel=1e-9, abs=1e-15)
        assert s.max == float(g.max()) and s.min == float(g.min())
        assert s.nan_count == 0 and s.inf_count == 0
        ratio = float((after[name] - before[name]).norm() / before[name].norm())
        assert s.update_ratio == pytest.approx(ratio, rel=1e-5)
        assert s.stats_dict() == {f: run.figures(4)[name][f] for f in s.stats_dict()}
        edges, counts = run.histogram(4, name)
        flat = g.flatten().numpy()
        assert len(edges) == 17 and edges[0] == flat.min() and edges[-1] == flat.max()
        np.testing.assert_array_equal(counts, np.histogram(flat, edges)[0])
    assert run.step_info(4)["global_norm"] == pytest.approx(
        math.sqrt(sum(float(g.norm()) ** 2 for g in grads.values())), rel=1e-12)
    assert [run.step_info(k)["loss"] for k in run.steps] == rec.losses
    structure = run.meta("structure")
    assert [p["name"] for p in structure["parameters"]] == list(grads)
    graph = run.meta("graph")
    assert {n["param"] for n in graph["nodes"] if n.get("param")} == set(grads)


def test_every_and_step_without_optimizer(tmp_path):
    model = make_model()
    rec = gx.watch(model, run_dir=tmp_path / "r", stats_every=2)
    for step in range(5):
        x, y = batch(step)
        model.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        out = rec.step(loss=1.5)
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
        assert (out is None) == (step % 2 == 0)
    rec.close()
    run = gx.open_run(tmp_path / "r")
    assert run.steps == [2, 4]
    assert run.step_info(4)["loss"] == 1.5
    assert all(s["update_ratio"] is None for s in run.figures(4).values())


def test_hooks_act_as_in_the_app(tmp_path):
    model = make_model()
    twin = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, hooks={"2": "scale:0.5"}) as rec:
        x, y = batch(0)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        nn.functional.mse_loss(twin(x), y).backward()
        opt.step()
        assert rec.hooks.attached()["2"].calls == 1
    # scaling the grad_input of the last Linear halves every gradient before it
    torch.testing.assert_close(model[0].weight.grad, 0.5 * twin[0].weight.grad)
    torch.testing.assert_close(model[2].weight.grad, twin[2].weight.grad)
    assert rec.hooks.attached() == {}  # close detached it


def test_snapshots_kept_last_n(tmp_path):
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with gx.watch(model, opt, tmp_path / "run", snapshot_every=2, keep_snapshots=2):
        train(model, opt, 7)
    run = gx.open_run(tmp_path / "run")
    assert list(run.snapshots) == [4, 6]
    assert sorted(p.name for p in (tmp_path / "run" / "snapshots").iterdir()) == [
        "step-000004", "step-000006"]
    snap = gx.read_snapshot(run.snapshots[6])
    assert snap.step == 6
    assert snap.stats["0.weight"] == run.stats(6)["0.weight"]  # the same ParamStats
    assert snap.gradients()["0.weight"].double().norm().item() == pytest.approx(
        run.figures(6)["0.weight"]["norm"], rel=1e-12)


def test_full_disk_is_one_message_and_training_goes_on(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines = []
    rec = gx.Recorder(model, opt, tmp_path / "run", report=lines.append)
    pages = rec.writer._db.execute("PRAGMA page_count").fetchone()[0]
    rec.writer._db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full now
    train(model, opt, 30)  # (the first steps fit in the pages the empty tables hold)
    rec.close()
    assert len(lines) == 1 and "recording stopped" in lines[0] and "full" in lines[0]
    assert rec.step_count == 30 and rec.latest().step == 30


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(gx.UserError, match="nn.Module"):
        gx.watch("model")
    with pytest.raises(gx.UserError, match="stats_every"):
        gx.watch(make_model(), stats_every=0)
    with pytest.raises(gx.UserError, match="not a gradexplorer run"):
        gx.open_run(tmp_path)
    rec = gx.watch(make_model(), torch.optim.SGD(make_model().parameters(), lr=0.1))
    with pytest.raises(gx.UserError, match="optimizer"):
        rec.step()
    with pytest.raises(gx.UserError, match="no module"):
        gx.watch(make_model(), hooks={"fc9": "scale:0.5"})


def test_shard_counts_agree_between_backends():
    """FSDP2's local histogram on the global edges: Numba and torch binning give the same."""
    from gradexplorer.core.stats.backends.registry import make_backend
    from gradexplorer.core.stats.histogram import histogram_edges
    from gradexplorer.core.watch.sharded import local_counts

    g = torch.Generator().manual_seed(3)
    local = [torch.randn(300, generator=g), torch.randn(0), torch.randn(7, 5, generator=g).reshape(-1)]
    local[0][:3] = torch.tensor([float("nan"), float("inf"), 0.0])
    lo = np.array([-1.0, 0.0, -3.0])
    hi = np.array([2.5, 0.0, 3.0])
    edges = histogram_edges(lo, hi, 12)
    numba = local_counts(make_backend("numba", local), local, edges)
    device = local_counts(make_backend("torch", local), local, edges)
    np.testing.assert_array_equal(numba, device)
    finite = local[0][torch.isfinite(local[0])].double().numpy()
    inside = finite[(finite >= lo[0]) & (finite <= hi[0])]
    np.testing.assert_array_equal(numba[0, :12], np.histogram(inside, edges[0])[0])
    assert numba[0, 12] == (finite < lo[0]).sum() and numba[0, 13] == (finite > hi[0]).sum()
    assert numba[1].sum() == 0


def test_fsdp2_on_one_rank_matches_and_refuses_snapshots(tmp_path):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        plain, sharded = make_model(), make_model()
        mesh = init_device_mesh("cpu", (1,))
        for layer in (sharded[0], sharded[2], sharded):
            fully_shard(layer, mesh=mesh)
        with pytest.raises(gx.UserError, match="FSDP2 and TP runs without snapshot_every"):
            gx.watch(sharded, torch.optim.SGD(sharded.parameters(), lr=0.1), snapshot_every=2)
        records = []
        for model in (plain, sharded):
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            with gx.watch(model, opt, bins=8) as rec:
                train(model, opt, 2)
                records.append(rec.latest())
            assert rec.plan.mode == ("fsdp2" if model is sharded else "single")
        want, got = records
        for name, s in want.params.items():
            assert got.params[name].norm == pytest.approx(s.norm, rel=1e-6)
            assert got.params[name].update_ratio == pytest.approx(s.update_ratio, rel=1e-5)
            np.testing.assert_array_equal(got.histograms[name].counts, want.histograms[name].counts)
    finally:
        dist.destroy_process_group()


def test_a_snapshot_that_cannot_be_written_stops_recording_not_training(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines = []
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "snapshots").write_text("a file where the folder should be")
    rec = gx.Recorder(model, opt, tmp_path / "run", snapshot_every=2, report=lines.append)
    train(model, opt, 4)
    rec.close()
    assert len(lines) == 1 and "snapshot of step 2" in lines[0]
    assert rec.step_count == 4
    assert gx.open_run(tmp_path / "run").steps == [1, 2]  # step 2's figures were committed


def test_a_bad_hook_leaves_no_run_behind(tmp_path):
    with pytest.raises(gx.UserError, match="no module"):
        gx.watch(make_model(), run_dir=tmp_path / "run", hooks={"fc9": "scale:0.5"})
    assert not (tmp_path / "run").exists()
