"""The Triton statistics kernels, checked on the CPU through Triton's interpreter.

Triton builds its library for one mode when it is imported, so the interpreted checks
(``tests/stats_triton_checks.py``) run in a subprocess started with ``TRITON_INTERPRET=1``;
here, in the suite's own process, the variable set after the import must not switch the
backend to kernels that could not run, the torch ops around the kernels are counted, and the
kernels are compiled for real NVIDIA targets (Triton compiles to PTX and cubin with its own
ptxas, no GPU needed). Skipped where Triton is absent.
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

from gradexplorer.core.stats.backends.torch.grouped import FusedTorch  # noqa: E402
from gradexplorer.core.stats.backends.triton import stats as triton_stats  # noqa: E402

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
    assert sum(many.values()) <= 145, many  # 139: P-sized ops (launches on CUDA)
    assert "aten._local_scalar_dense" not in many and "aten.item" not in many
    assert "aten.lift_fresh" not in many  # no host-built tensor copied in


def compiled(kernel, dtype: str, block: int, arch: int, bins: int | None = None):
    """``kernel`` compiled for ``sm_{arch}`` with the options ``triton.stats`` launches it with."""
    from triton import compile as compile_kernel
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = kernel.arg_names
    pointers = {"x_ptr": f"*{dtype}", "segment_ptr": "*i64", "counts_ptr": "*i64"}
    if bins is None:  # extremes
        pointers.update(low_ptr=f"*{dtype}", high_ptr=f"*{dtype}")
        constants = {"BLOCK": block}
    else:
        constants = {"BLOCK": block, "WIDE": dtype == "fp64", "HISTOGRAM": True, "BINS": bins,
                     "WIDTH": triton_stats.histogram_width(bins)}
    signature = {n: "constexpr" if n in constants else pointers.get(n, "*fp64") for n in names}
    source = ASTSource(kernel, signature=signature, constexprs=constants)
    return compile_kernel(source, target=GPUTarget("cuda", arch, 32),
                          options=triton_stats.launch_options(block))


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="the suite is interpreted")
@pytest.mark.parametrize("dtype, block, bins, arch", [
    ("fp32", 1024, 64, 90), ("fp64", 1024, 1, 90), ("fp64", 8, 256, 80), ("fp32", 8, 5, 80)])
def test_kernels_compile_for_nvidia_gpus_without_fma(dtype, block, bins, arch):
    """Both kernels build to cubin for sm_80/sm_90 (f64 reductions, ``tl.histogram`` and all),
    and the PTX holds no fused multiply-add: the sums and bin tests round as the eager path."""
    pytest.importorskip("triton", minversion="3.4")  # ASTSource with named signatures
    extremes, sums_and_histogram = triton_stats.kernels(False)
    for kernel in (compiled(extremes, dtype, block, arch),
                   compiled(sums_and_histogram, dtype, block, arch, bins)):
        assert kernel.asm["cubin"] and f".target sm_{arch}" in kernel.asm["ptx"]
        assert not re.search(r"\bfma\.", kernel.asm["ptx"])
