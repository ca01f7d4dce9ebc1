"""Built-in examples build, step, and (for digits) really learn."""

import dataclasses

import pytest
import torch

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.examples import EXAMPLES
from gradexplorer.core.model.examples.digits import load_digits
from gradexplorer.core.model.spec import load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession

SMALL = {
    "digits": "example:digits",
    "lenet": "example:lenet",
    "mlp": "example:mlp",
    "resnet": "example:resnet:width=4,size=16",
    "resnet18": "example:resnet18:width=4,size=16,batch=2",
    "transformer": "example:transformer:layers=1,d_model=16,heads=2",
    "deep": "example:deep:blocks=5",
    "dense": "example:dense:size=16,batch=4",  # batch 2 at 8×8: BatchNorm over ~2 values, its step chaotic
}


def test_every_example_is_covered_here():
    assert set(SMALL) == set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_steps_and_lowers_its_loss(name):
    workload = load_workload(SMALL[name])
    batch = workload.make_batch(0)  # one batch every step: its loss must fall step by step
    workload = dataclasses.replace(workload, make_batch=lambda step: batch)
    session = TrainingSession(workload, SessionConfig(device="cpu", lr=0.01))
    results = list(session.run(4))
    assert [r.step for r in results] == [1, 2, 3, 4]
    losses = [r.loss for r in results]
    assert all(later < earlier for earlier, later in zip(losses, losses[1:], strict=False)), losses
    assert all(torch.isfinite(torch.tensor(r.loss)) for r in results)
    assert all(r.grad_norm and r.grad_norm > 0 for r in results)
    assert all(r.timings["total"] >= r.timings["forward"] > 0 for r in results)


def test_lenet_matches_the_tutorial():
    model = load_workload("example:lenet").model
    names = [n for n, _ in model.named_parameters()]
    assert names == [
        "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
        "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias",
    ]
    assert sum(p.numel() for p in model.parameters()) == 61_706
    x, target = load_workload("example:lenet").make_batch(0)
    assert list(x.shape) == [1, 1, 32, 32] and list(target.shape) == [1, 10]


def test_resnet18_is_resnet18_sized():
    model = load_workload("example:resnet18").model
    n = sum(p.numel() for p in model.parameters())
    assert 11_000_000 < n < 12_000_000
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())


def test_deep_blocks_option_sets_depth():
    assert len(load_workload("example:deep:blocks=37").model.blocks) == 37


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_deep_trains_without_nan_at_its_default_settings(optimizer):
    # Unscaled residual branches diverged here: NaN by step 3 at the default SGD lr.
    session = TrainingSession(load_workload("example:deep:blocks=600"),
                              SessionConfig(device="cpu", optimizer=optimizer, grad_norm=False))
    losses = [r.loss for r in session.run(8)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]


def test_deep_branch_scale_is_one_addmm_per_block():
    block = load_workload("example:deep:blocks=4").model.blocks[0]
    x = torch.randn(3, 8, dtype=torch.float64)
    block = block.double()
    expected = x + 0.5 * (torch.relu(x) @ block.fc.weight.T + block.fc.bias)
    assert torch.allclose(block(x), expected)
    assert type(block.fc(x).grad_fn).__name__ == "AddmmBackward0"


def test_bundled_digits_are_real_digits():
    x, y = load_digits()
    assert x.shape == (1797, 1, 8, 8)
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-4  # standardised
    assert len(torch.unique(x)) == 17  # the 0..16 pixel counts of the UCI digits
    assert sorted(set(y.tolist())) == list(range(10))


def test_digits_default_example_learns_with_its_suggested_settings():
    workload = load_workload(None)
    assert workload.name == "example:digits"
    session = TrainingSession(workload, SessionConfig(device="cpu"))
    group = session.optimizer.param_groups[0]
    assert (group["lr"], group["momentum"]) == (0.1, 0.9)
    losses = [r.loss for r in session.run(60)]
    test_x, test_y = workload.extra["test_set"]
    with torch.no_grad():
        accuracy = (session.model(test_x).argmax(1) == test_y).float().mean().item()
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5
    assert accuracy > 0.6  # 10 classes: chance is 0.1


@pytest.mark.parametrize(
    "spec, message",
    [
        ("example:nope", "unknown example 'nope'"),
        ("example:deep:blocks=x", "not an integer"),
        ("example:deep:depth=3", "does not take option(s) depth"),
        ("example:deep:blocks", "expected key=value"),
        ("example:deep:blocks=0", "out of range"),
    ],
)
def test_bad_example_specs_say_why(spec, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_workload(spec)
