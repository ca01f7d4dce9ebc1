"""The histogram benchmark runs end to end (on a tiny model, one round) and prints its table."""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "histograms.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_histograms", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_table_has_every_method():
    bench = load_bench()
    result = bench.measure("example:lenet", rounds=1, device="cpu")
    assert result["numel"] == 61_706 and result["params"] == 10
    text = bench.report(result)
    for name in bench.METHODS:
        if name != "bare step":
            assert name in text
    assert all(len(v) == 1 for v in result["steps"].values())
    assert result["inside"]["gradexplorer"][0] > 0
