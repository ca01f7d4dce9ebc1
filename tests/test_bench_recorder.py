"""The watch benchmark runs end to end (tiny model, one round) and prints every method."""

from tests.script_helpers import load_script


def test_recorder_benchmark_reports_every_method():
    bench = load_script("bench", "recorder.py")
    result = bench.measure("lenet", rounds=1, steps=2)
    assert result["numel"] == 61_706
    text = bench.report(result)
    for method in bench.METHODS:
        assert method in text
    assert set(result["inside"]) == set(bench.METHODS) - {"bare loop"}
    assert all(seconds > 0 for seconds in result["inside"].values())
    assert 0 < result["spikes"] < result["inside"]["watch, run directory"]
    assert "spike detection" in text
    assert "writer CPU" in text and "worker CPU" in text
    assert result["worker"]["bare loop"] == 0  # the statistics worker's CPU: none without watch
    # the run directory's writer thread's CPU, shown beside the training thread's
    assert result["writer"]["watch, run directory"] > 0 == result["writer"]["watch, in memory"]
    import gradexplorer as gx

    assert not hasattr(gx.Recorder.before_optimizer_step, "original")  # timing undone
