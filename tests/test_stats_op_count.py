"""The fused torch path costs a fixed number of aten ops per step, whatever the parameter count,
and never reads a value back to the host before the single transfer (no .item())."""

from collections import Counter

import pytest
import torch
from test_bench_histograms import load_bench
from torch import nn

from gradexplorer.session import GradientMonitor

MAX_OPS = 199  # 190 with histograms and update ratio (docs/gradients.md)


# the benchmark's own instrument (one op counter for the bench's column and this test)
OpCounter = load_bench().OpCounter


def monitor_ops(count: int, histograms: bool, overlap: bool = False) -> Counter:
    """Ops the monitor dispatches in its second step (the first builds the cached layouts)."""
    torch.manual_seed(0)
    model = nn.ParameterList(nn.Parameter(torch.randn(3 + i % 5, 2)) for i in range(count))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    named = list(model.named_parameters())
    monitor = GradientMonitor(backend="torch", histogram_every=1 if histograms else 0, overlap=overlap)
    counter = OpCounter()
    for step in (1, 2):
        for p in model:
            p.grad = torch.randn_like(p)
        with counter if step == 2 else torch.no_grad():
            monitor.begin(named, optimizer, step)
        optimizer.step()
        with counter if step == 2 else torch.no_grad():
            monitor.finish(optimizer, step)
    record = monitor.latest()
    assert len(record.params) == count and bool(record.histograms) == histograms
    return counter.ops


@pytest.mark.parametrize("histograms", [True, False])
def test_ops_per_step_do_not_grow_with_parameters(histograms):
    few, many = monitor_ops(10, histograms), monitor_ops(600, histograms)
    assert many == few, many - few  # a per-parameter loop of kernels would show here
    assert sum(many.values()) <= MAX_OPS, many
    assert "aten._local_scalar_dense" not in many and "aten.item" not in many
    assert "aten.lift_fresh" not in many  # no host-built tensor copied in


def test_overlap_adds_no_op_on_the_cpu():
    """A side stream exists on CUDA only: on the CPU ``overlap=True`` dispatches the same ops."""
    assert monitor_ops(10, True, overlap=True) == monitor_ops(10, True)


def test_device_count_equals_the_cpu_bincount():
    """The index_add_ count used on devices (bincount would sync there) equals bincount."""
    from gradexplorer.core.stats.backends.torch.fused_bins import count_slots

    slot = torch.randint(0, 9, (40, 16), generator=torch.Generator().manual_seed(0))
    slot = (slot + torch.arange(40)[:, None] * 9).int()
    expected = torch.stack([torch.bincount(row.long() - 9 * i, minlength=9)
                            for i, row in enumerate(slot)]).view(-1)
    assert torch.equal(count_slots(slot, 360, by_bincount=False), expected)
    assert torch.equal(count_slots(slot, 360, by_bincount=True), expected)
