"""The Triton statistics kernels, checked on the CPU through Triton's interpreter.

Triton builds its library for one mode when it is imported, so the interpreted checks
(``tests/stats_triton_checks.py``) run in a subprocess started with ``TRITON_INTERPRET=1``;
here, in the suite's own process, the variable set after the import must not switch the
backend to kernels that could not run. Skipped where Triton is absent.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_stats_op_count import OpCounter

pytest.importorskip("triton", minversion="3.0")

from gradexplorer.core.stats import triton_stats  # noqa: E402
from gradexplorer.core.stats.backend_torch import FusedTorch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_interpreted_kernels_equal_the_fused_path_and_numpy():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/stats_triton_checks.py", "-q", "-p",
         "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed and int(passed.group(1)) >= 10 and "skipped" not in out, out[-3000:]


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="the suite is interpreted")
def test_the_variable_set_after_import_does_not_choose_the_kernels(monkeypatch):
    import triton  # noqa: F401  (imported before the variable is set, as in a real process)

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not triton_stats.interpreting()
    assert not triton_stats.usable("cpu")
    monkeypatch.delenv("TRITON_INTERPRET")
    assert not triton_stats.usable("cpu")  # a CPU device: the eager fused path


class NoLaunch:
    """A kernel stand-in: ``kernel[grid](...)`` does nothing (its outputs keep what they held)."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def torch_ops(count: int, monkeypatch) -> dict:
    """The aten ops ``moments_and_histograms`` dispatches around its two kernels."""
    monkeypatch.setattr(triton_stats, "kernels", lambda interpret: (NoLaunch(), NoLaunch()))
    tensors = [torch.randn(3 + i % 5, 2) for i in range(count)]
    blocks = FusedTorch().blocks(tensors, "grad")
    grid = blocks.load(tensors)
    with OpCounter() as counter:
        rows, edges, counts = triton_stats.moments_and_histograms(grid, blocks, True, 64, "auto")
    assert rows.shape == (count, 11) and edges.shape == (count, 65) and counts.shape == (count, 68)
    return counter.ops


def test_the_torch_side_is_a_fixed_number_of_ops_with_no_sync(monkeypatch):
    few, many = torch_ops(10, monkeypatch), torch_ops(600, monkeypatch)
    assert many == few, many - few  # nothing per parameter
    assert sum(many.values()) <= 90, many  # 87: P-sized ops (launches on CUDA)
    assert "aten._local_scalar_dense" not in many and "aten.item" not in many
    assert "aten.lift_fresh" not in many  # no host-built tensor copied in
