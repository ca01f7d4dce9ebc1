"""``compare`` streams gradients chunk by chunk: its peak memory stays well under one gradient."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.snapshot import compare_snapshots, write_snapshot
from gradexplorer.session import Workload

MEASURE = """
import sys
from gradexplorer import compare_snapshots, read_snapshot

def rss(field):
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith(field)).split()[1]) * 1024

a, b = read_snapshot(sys.argv[1]), read_snapshot(sys.argv[2])
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current resident size
base = rss("VmRSS:")
result = compare_snapshots(a, b)
print(rss("VmHWM:") - base, result.total.cosine)
"""


def big_snapshots(folder, side: int, dtype=torch.float32) -> tuple:
    """Two snapshots of one ``side``×``side`` gradient, a step apart."""
    torch.manual_seed(0)
    model = nn.Linear(side, side, bias=False).to(dtype)
    x, y = torch.randn(4, side, dtype=dtype), torch.randn(4, side, dtype=dtype)
    session = TrainingSession(Workload(model, lambda step: (x, y), nn.MSELoss(), name="big"),
                              SessionConfig(device="cpu"))
    paths = []
    for _ in range(2):
        session.step()
        paths.append(write_snapshot(folder, session))
    return model.weight, paths


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_compare_peak_memory_is_under_one_and_a_half_gradients(tmp_path):
    weight, (a, b) = big_snapshots(tmp_path, 2048)  # one 16 MiB float32 gradient each
    largest = weight.numel() * weight.element_size()
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(a), str(b)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    growth, cosine = proc.stdout.split()
    assert int(growth) <= 1.5 * largest, f"compare grew by {int(growth) / largest:.2f}x a gradient"
    print(f"compare grew by {int(growth) / largest:.3f}x the largest gradient")
    assert -1.0 <= float(cosine) <= 1.0


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_streamed_figures_equal_a_float64_computation(tmp_path, dtype):
    _, (a, b) = big_snapshots(tmp_path, 300, dtype)
    result = compare_snapshots(a, b)
    from gradexplorer import read_snapshot

    x = read_snapshot(a).gradients()["weight"].double().reshape(-1)
    y = read_snapshot(b).gradients()["weight"].double().reshape(-1)
    (row,) = result.rows
    assert row.norm_a == pytest.approx(float(x.norm()), rel=1e-12)
    assert row.norm_b == pytest.approx(float(y.norm()), rel=1e-12)
    assert row.cosine == pytest.approx(float(x @ y / (x.norm() * y.norm())), rel=1e-12)
