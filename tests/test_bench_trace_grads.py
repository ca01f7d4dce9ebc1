"""The trace_grads benchmark runs end to end (LeNet, one round) and prints every row."""

import warnings

from tests.script_helpers import load_script


def test_benchmark_reports_every_method():
    bench = load_script("bench", "trace_grads.py")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # detect_anomaly announces itself
        result = bench.measure("example:lenet", rounds=1, device="cpu")
    assert result["nodes"] == result["traced"] == 26
    text = bench.report(result)
    for name in bench.METHODS:
        assert name in text
    assert all(seconds > 0 for seconds in result["median"].values())
