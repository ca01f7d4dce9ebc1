"""bench/per_sample_norms.py: its memory count is the live storages' peak, and it runs."""

import torch

from tests.script_helpers import load_script


def test_live_bytes_is_the_peak_of_the_storages_alive_at_once():
    bench = load_script("bench", "per_sample_norms.py")
    with bench.LiveBytes() as live:
        a = torch.zeros(1000)  # 4,000 bytes
        b = torch.zeros(2000)  # 8,000: 12,000 at once
        view = b[:10]  # a view: no storage of its own
        del a, b
        c = torch.zeros(500)  # 2,000 (b's storage lives on in ``view``)
    assert live.peak == 12_000 and live.now == 10_000
    del view, c


def test_the_benchmark_measures_a_model_with_and_without_per_sample_norms():
    bench = load_script("bench", "per_sample_norms.py")
    from gradexplorer.core.model.spec import ModelOptions, load_workload

    workload = load_workload("example:mlp", ModelOptions())
    workload.description = "mlp"
    row = bench.measure(workload, torch.device("cpu"), rounds=1, steps=1)
    assert row["model"] == "mlp" and row["bare_ms"] > 0 and row["with_ms"] > 0
    assert row["memory_ratio"] >= 1.0 and row["unsupported"] == 0
    assert not workload.model._forward_hooks  # every tracker taken off again


def test_attention_stays_within_its_memory_bound():
    """nn.TransformerEncoder with its nn.MultiheadAttention measured: peak ≤ 1.2× the bare step."""
    bench = load_script("bench", "per_sample_norms.py")
    row = bench.measure(bench.encoder(1, 64, 64, 8), torch.device("cpu"), rounds=1, steps=1)
    assert row["unsupported"] == 0 and 1.0 <= row["memory_ratio"] <= 1.2
