"""The trace_grads benchmark runs end to end (LeNet, one round) and prints every row."""

import importlib.util
import warnings
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "trace_grads.py"


def test_benchmark_reports_every_method():
    spec = importlib.util.spec_from_file_location("bench_trace_grads", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # detect_anomaly announces itself
        result = bench.measure("example:lenet", rounds=1, device="cpu")
    assert result["nodes"] == result["traced"] == 26
    text = bench.report(result)
    for name in bench.METHODS:
        assert name in text
    assert all(seconds > 0 for seconds in result["median"].values())
