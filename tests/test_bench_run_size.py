"""The run-size benchmark runs end to end (the MLP, a few steps) and prints each format beside
TensorBoard's event file, the ratio and its target."""

from tests.script_helpers import load_script


def test_run_size_benchmark_reports_both_formats_and_tensorboard(tmp_path):
    bench = load_script("bench", "run_size.py")
    result = bench.measure("mlp256", 3, tmp_path)
    assert result["params"] == 10 and result["steps"] == 3
    assert 0 < result["run"] < result["run v2"] and result["tensorboard"] > 0
    assert result["row bytes"] <= 16 + 1 + 4 * 64  # (lo, hi), a width byte, 64 counts of ≤ 4 bytes
    text = bench.report({"mlp256": result})
    assert "≤ 0.4" in text and f"{result['run'] / result['tensorboard']:.2f}" in text
