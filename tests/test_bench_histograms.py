"""The histogram benchmark runs end to end (on a tiny model, one round) and prints its table."""

from tests.script_helpers import load_script


def load_bench():
    return load_script("bench", "histograms.py")


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


def test_benchmark_counts_ops_and_syncs():
    bench = load_bench()
    result = bench.measure("lenet", rounds=1, device="cpu")
    assert result["syncs"]["wandb-style"] == 2 * result["params"]  # .item() min and max each
    assert result["syncs"]["gradexplorer, fused torch path"] == 0
    assert 0 < result["ops"]["gradexplorer, fused torch path"] <= 199  # 190 (docs/gradients.md)
    assert "aten ops" in bench.report(result)


def test_gpt2_workload_is_built_from_a_config():
    from transformers import GPT2Config

    bench = load_bench()
    small = GPT2Config()
    assert (small.n_layer, small.n_embd, small.vocab_size) == (12, 768, 50257)  # GPT-2 124M
    workload = bench.gpt2_workload(2, 8, n_layer=1, n_embd=32, n_head=2, vocab_size=100)
    inputs, target = workload.make_batch(0)
    loss = workload.loss_fn(workload.model(inputs), target)
    loss.backward()
    assert inputs.shape == (2, 8) and loss.ndim == 0
    assert all(p.grad is not None for p in workload.model.parameters())
