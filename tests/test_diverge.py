"""Run divergence: a `scale:0.5` hook on LeNet's fc1 from step K parts two runs at step K, fc1's
upstream parameters first; bit-identical runs never part; strides are aligned by step."""

import functools

import pytest

import gradexplorer as gx
from gradexplorer.core.runs.divergence import relative_gap
from tests.script_helpers import load_script

K = 4
UPSTREAM = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"]


def load_spike_hunt():
    """docs/examples/spike_hunt.py, whose LeNet loop these runs are (one loop, not a copy)."""
    return load_script("docs", "examples", "spike_hunt.py")


lenet_run = functools.partial(load_spike_hunt().lenet, steps=6)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("diverge")
    return {"plain": lenet_run(root / "plain"), "again": lenet_run(root / "again"),
            "hooked": lenet_run(root / "hooked", hook_from=K),
            "every2": lenet_run(root / "every2", hook_from=K, every=2)}


def test_a_hook_from_step_k_parts_the_runs_at_k_upstream_first(runs):
    result = gx.runs.find_divergence(runs["plain"], runs["hooked"])
    assert result.step == K and result.compared == [1, 2, 3, 4]
    named = [r["name"] for r in result.ranking]
    assert named[:4] == UPSTREAM  # the hook halves what flows to fc1's inputs
    assert all(r["gap"] == pytest.approx(0.5, rel=1e-4) for r in result.ranking[:4])  # float32 updates
    assert "fc1.weight" not in named  # fc1's own gradient comes from its output: unchanged
    assert result.signals["loss"]["gap"] == 0  # the forward pass of step K is the same


def test_bit_identical_runs_never_part(runs):
    result = gx.runs.find_divergence(runs["plain"], runs["again"])
    assert not result.diverged and result.compared == [1, 2, 3, 4, 5, 6]


def test_runs_of_different_strides_align_by_step(runs):
    result = gx.runs.find_divergence(runs["plain"], runs["every2"])
    assert result.compared == [2, 4] and result.step == K


def test_relative_gap():
    assert relative_gap(1.0, 1.0) == 0 and relative_gap(2.0, 1.0) == 0.5
    assert relative_gap(0.0, 0.0) == 0 and relative_gap(float("nan"), float("nan")) == 0
    assert relative_gap(float("nan"), 1.0) == 1 and relative_gap(None, 1.0) == 1
    assert relative_gap(float("inf"), 1.0) == 1


def test_diverge_command(runs, run_cli):
    code, out, _ = run_cli("diverge", runs["plain"], runs["hooked"])
    assert code == 0 and f"diverged at step {K}" in out
    table = out.split("hist EMD")[1].splitlines()
    assert table[1].split()[0] == "conv1.weight"
    code, out, _ = run_cli("diverge", runs["plain"], runs["again"])
    assert code == 0 and "no divergence: 6 common step(s)" in out
    code, out, _ = run_cli("diverge", runs["plain"], runs["hooked"], "--tol", "0.6")
    assert "no divergence" in out  # halved gradients are a gap of 0.5: within 0.6
    code, _, err = run_cli("diverge", runs["plain"], runs["hooked"], "--tol", "-1")
    assert code == 2 and "argument --tol: must be at least 0" in err
