"""watch under torch.distributed with 2 gloo ranks on 127.0.0.1: the run's last-step figures and
histograms equal those of the same training in one process on the whole batch."""

import socket

import numpy as np
import pytest
import torch.multiprocessing as mp
from distributed_helpers import STEPS, single_process, worker

import gradexplorer as gx
from gradexplorer.core.runs.schema import PARAM_STEP_FIELDS

BINS = 16


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("one") / "run"
    single_process(path, BINS)
    return gx.open_run(path)


MODES = ("ddp", "fsdp2")  # FSDP1 refuses the CPU in this torch ("needs an accelerator")


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("two")
    # "skew": the ranks disagree about the step; each stops recording with one line (asserted
    # in the workers), and nothing hangs
    modes = (*MODES, "skew", "per-rank")
    mp.spawn(worker, args=(2, modes, str(root), free_port(), BINS), nprocs=2, join=True)
    return root


@pytest.mark.parametrize("mode", MODES)
def test_two_ranks_record_what_one_process_records(mode, reference, two_rank_runs):
    run = gx.open_run(two_rank_runs / mode)
    assert run.steps == reference.steps == list(range(1, STEPS + 1))
    assert run.step_info(STEPS)["ranks"] == 2
    got, want = run.figures(STEPS), reference.figures(STEPS)
    assert list(got) == list(want) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    for name in want:
        for field, value in want[name].items():
            if value is None or (mode == "fsdp2" and field in PARAM_STEP_FIELDS
                                 and field != "grad_norm_accumulated"):
                # FSDP2 shards the optimizer state: it is not recorded (the accumulated norms
                # are, combined from the shards like the applied figures)
                assert got[name][field] is None, (name, field)
                continue
            # DDP: the accumulated norm is read after DDP's reduction (the averaged gradient)
            assert got[name][field] == pytest.approx(value, rel=1e-9, abs=1e-15), (name, field)
        edges, counts = run.histogram(STEPS, name)
        ref_edges, ref_counts = reference.histogram(STEPS, name)
        np.testing.assert_allclose(edges, ref_edges, rtol=1e-12)
        np.testing.assert_array_equal(counts, ref_counts)
    assert run.step_info(STEPS)["global_norm"] == pytest.approx(
        reference.step_info(STEPS)["global_norm"], rel=1e-12)
    # the graph: the loss's, its operations in their modules, as in one process (FSDP2 adds its
    # own node, made by its forward pre-hook on a sharded layer)
    assert attributed_ops(run) == attributed_ops(reference) == {
        ("AddmmBackward0", "0"), ("TBackward0", "0"), ("TanhBackward0", "1"),
        ("AddmmBackward0", "2"), ("TBackward0", "2")}
    assert run.graph["nodes"][0]["name"] == "MseLossBackward0"


def attributed_ops(run):
    return {(n["name"], n["module"]) for n in run.graph["nodes"] if n["kind"] == "op" and n["module"]
            and n["name"] != "RegisterPostBackwardFunctionBackward"}


def test_per_rank_norms_catch_ranks_that_disagree(two_rank_runs):
    from gradexplorer.core.watch.per_rank import spread

    run = gx.open_run(two_rank_runs / "per-rank")
    synced = run.rank_norms(STEPS - 1)
    assert sorted(synced) == [0, 1]
    assert max(spread(synced).values()) == 0  # DDP averaged: both ranks hold the same gradients
    assert synced[0] == {n: s["norm"] for n, s in run.figures(STEPS - 1).items()}
    unsynced = run.rank_norms(STEPS)  # no_sync on the last step: each rank kept its own
    assert min(spread(unsynced).values()) > 0
    assert unsynced[0] == {n: s["norm"] for n, s in run.figures(STEPS).items()}
    assert gx.open_run(two_rank_runs / "ddp").rank_norms(STEPS) == {}


def test_inspect_flags_ranks_that_disagree(two_rank_runs, capsys):
    from gradexplorer.cli import main

    assert main(["inspect", str(two_rank_runs / "per-rank")]) == 0
    assert "per-rank norms of 2 ranks" in (out := capsys.readouterr().out)
    assert "different gradients" in out
    assert main(["inspect", str(two_rank_runs / "per-rank"), "--step", str(STEPS - 1)]) == 0
    out = capsys.readouterr().out
    assert "largest spread 0 " in out and "different gradients" not in out


@pytest.mark.parametrize("mode", MODES)
def test_two_ranks_and_one_process_do_not_diverge(mode, reference, two_rank_runs):
    result = gx.runs.find_divergence(two_rank_runs / mode, reference)  # at the default tolerance
    assert not result.diverged and result.compared == list(range(1, STEPS + 1))
