"""The per-step cost benchmark runs end to end (the issue's MLP, one short round): every arm
timed, the watch without an update ratio really records none, the passes' hooks are taken off,
the targets printed beside their figures; its ResNet-18 is torchvision's."""

import pytest
import torch

from tests.script_helpers import load_script


def test_floor_benchmark_reports_every_method():
    bench = load_script("bench", "watch_floor.py")
    result = bench.measure("mlp256", rounds=1, steps=3)
    assert result["numel"] == 263_425
    assert set(result["median"]) == set(bench.METHODS) == set(result["cpu"])
    assert set(result["above"]) == set(bench.METHODS) - {bench.BARE}
    assert all(seconds > 0 for seconds in result["median"].values())
    ratios = result["ratios"]
    assert {k: ratios[k] for k in bench.WATCHES[:3]} == {bench.WATCH: True, bench.WATCH_RUN: True,
                                                         bench.WATCH_NO_RATIO: False}
    assert set(result["cadence"]) == set(bench.BUDGETS)  # the budget arms' cadence, printed
    assert all(every >= 1 for every, *_ in result["cadence"].values())
    assert result["threads"][bench.WATCH_RUN] >= result["writer"][bench.WATCH_RUN] > 0  # counted
    assert result["writer"][bench.WATCH] == 0  # in memory: no writer
    assert result["read"] > 0
    text = bench.report(result)
    for method in bench.METHODS[1:]:
        assert method in text
    assert "the run directory's writer" in text
    assert text.count("heavy figures every") == 2
    assert text.count("(target ≤") == 2  # above the floor, in memory and with a run directory
    assert "share of the bare step" not in text  # the +5% target is ResNet-18's alone
    result["model"] = bench.SHARE_WORKLOAD
    assert bench.report(result).count("(target ≤") == 10  # and the two budget arms' shares


def test_the_arms_asked_for_run_beside_the_bare_loop_and_the_floor(capsys):
    """``--arms watch-run``: only that arm, the bare loop and the floor are built and timed
    (GPT-2 small's copies in less memory), and its target is printed beside its figure."""
    bench = load_script("bench", "watch_floor.py")
    threads = torch.get_num_threads()
    try:  # main() sets torch's threads (--threads): the tests after this one keep theirs
        assert bench.main(["--models", "mlp256", "--rounds", "1", "--steps", "2",
                           "--arms", "watch-run"]) == 0
    finally:
        torch.set_num_threads(threads)
    text = capsys.readouterr().out
    assert bench.WATCH_RUN in text and bench.FLOOR in text
    assert all(bench.ARMS[a] not in text for a in bench.ARMS if a != "watch-run")
    assert text.count("(target ≤") == 1 and "watch, run directory above the floor" in text


def test_the_passes_hooks_measure_the_step_and_come_off():
    """The update ratio's passes as hooks measure what watch does: ‖Δθ‖ and ‖θ_before‖ of each
    parameter equal a float64 computation from the weights before and after the step; the
    hooks come off."""
    import torch

    bench = load_script("bench", "watch_floor.py")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    found = []
    handles = bench.passes(model, opt, gradients=True, found=found)
    model(torch.randn(2, 4)).sum().backward()
    before = [p.detach().clone() for p in model.parameters()]
    opt.step()
    after = [p.detach() for p in model.parameters()]
    moved = [(a.double() - b.double()).norm().item() for a, b in zip(after, before, strict=True)]
    sizes = [b.double().norm().item() for b in before]
    assert len(found) == 1 and found[0].shape == (2, 2)
    assert found[0][:, 0].tolist() == pytest.approx(moved, rel=1e-12) and min(moved) > 0
    assert found[0][:, 1].tolist() == pytest.approx(sizes, rel=1e-12)
    for handle in handles:
        handle.remove()
    assert not opt._optimizer_step_pre_hooks and not opt._optimizer_step_post_hooks


def test_the_standard_resnet18_is_torchvisions():
    """torchvision's resnet18(): 11,689,512 numbers in 62 parameters under its names, a 7×7
    stride-2 stem and a max-pool (a 64×64 input is 16×16 at layer1), 1000 logits."""
    import torch

    workloads = load_script("bench", "workloads.py")
    model, batch, loss_fn = workloads.build("resnet18")
    names = [n for n, _ in model.named_parameters()]
    assert sum(p.numel() for p in model.parameters()) == 11_689_512 and len(names) == 62
    assert names[:3] == ["conv1.weight", "bn1.weight", "bn1.bias"]
    assert "layer2.0.downsample.0.weight" in names and names[-2:] == ["fc.weight", "fc.bias"]
    inputs, target = batch(0)
    assert inputs.shape == (8, 3, 64, 64) and target.shape == (8,)
    seen = {}

    def note(_module, _inputs, output):
        seen["layer1"] = output.shape
    model.layer1.register_forward_hook(note)
    with torch.no_grad():
        logits = model(inputs)
    assert seen["layer1"] == (8, 64, 16, 16) and logits.shape == (8, 1000)
    assert torch.isfinite(loss_fn(logits, target))
