"""Per-sample gradient norms (core/persample) equal torch.func's per-sample gradients' norms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gradexplorer.core.persample.terms import Block, _gram, _materialised, squared_norms
from gradexplorer.core.persample.tracker import PerSampleNorms
from tests.persample_reference import (  # noqa: F401 - float64: an autouse fixture
    TOL,
    assert_close,
    float64,
    measured,
    reference_norms,
)


def cross_entropy(f, x, y):
    return F.cross_entropy(f(x), y)


def test_mlp_matches_torch_func_and_mean_reduction_is_each_samples_own_loss():
    mlp = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 3))
    x, y = torch.randn(7, 10), torch.randint(0, 3, (7,))
    tracker, got = measured(mlp, cross_entropy, x, y)
    assert tracker.unsupported == {} and got.failed == {} and got.trusted
    assert_close(got, mlp, cross_entropy, x, y)
    mlp.zero_grad()
    _, summed = measured(mlp, lambda f, a, b: F.cross_entropy(f(a), b, reduction="sum"), x, y,
                         reduction="sum")
    np.testing.assert_allclose(summed.norms, got.norms, rtol=TOL)


def test_micro_batches_follow_one_another_and_a_scaler_scale_is_divided_out():
    mlp = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    x, y = torch.randn(10, 6), torch.randint(0, 2, (10,))
    tracker = PerSampleNorms(mlp, "mean")
    for part in (slice(0, 4), slice(4, 10)):  # accumulation: the step's mean over 10 samples
        (F.cross_entropy(mlp(x[part]), y[part], reduction="sum") / 10 * 64.0).backward()
    got = tracker.take(scale=64.0)
    tracker.remove()
    assert got.samples == 10
    assert_close(got, mlp, cross_entropy, x, y)


def test_cnn_strides_padding_modes_dilation_groups_and_norm_layers():
    cnn = nn.Sequential(
        nn.Conv2d(3, 6, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(6, 6, 3, padding=2, dilation=2, groups=3, padding_mode="reflect"),
        nn.GroupNorm(2, 6), nn.BatchNorm2d(6), nn.Flatten(), nn.Linear(96, 5))
    cnn[4].eval()  # BatchNorm mixes samples in train mode; in eval mode it does not
    x, y = torch.randn(5, 3, 8, 8), torch.randint(0, 5, (5,))
    _, got = measured(cnn, cross_entropy, x, y)
    assert got.trusted and got.failed == {}
    assert_close(got, cnn, cross_entropy, x, y)
    conv1d = nn.Sequential(nn.Conv1d(4, 6, 5, stride=2), nn.ReLU(),
                           nn.Conv1d(6, 4, 3, padding="same", padding_mode="circular"),
                           nn.Flatten(), nn.Linear(24, 2))
    x, y = torch.randn(4, 4, 15), torch.randn(4, 2)
    def mse(f, a, b):
        return F.mse_loss(f(a), b, reduction="sum")
    _, got = measured(conv1d, mse, x, y, reduction="sum")
    assert_close(got, conv1d, mse, x, y)


def test_batchnorm_in_train_mode_is_said_to_mix_samples():
    cnn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 2))
    _, got = measured(cnn, cross_entropy, torch.randn(3, 1, 4, 4), torch.tensor([0, 1, 0]))
    assert not got.trusted and got.mixing == ["1 (BatchNorm2d)"]
    assert "1 (BatchNorm2d) mixes samples in train mode" in got.summary()


class TiedSequence(nn.Module):
    """An embedding tied to the output layer, a Linear called twice, an RMSNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 8, padding_idx=0)
        self.fc, self.norm = nn.Linear(8, 8), nn.RMSNorm(8)
        self.head = nn.Linear(8, 11, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        h = self.emb(ids)
        return self.head(self.norm(torch.tanh(self.fc(h)) + self.fc(h)))


def test_tied_weights_and_a_module_called_twice_keep_their_cross_terms():
    model = TiedSequence()
    x, y = torch.randint(0, 11, (6, 9)), torch.randint(0, 11, (6, 9))
    def loss(f, a, b):
        return F.cross_entropy(f(a).reshape(-1, 11), b.reshape(-1))
    _, got = measured(model, loss, x, y)
    assert_close(got, model, loss, x, y)


def test_gpt2_tiny_with_labels_tied_embeddings_and_shared_positions():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=40,
                                     n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).double()
    model.config._attn_implementation = "eager"
    ids = torch.randint(0, 40, (4, 10))
    def loss(f, a):
        return f(input_ids=a, labels=a).loss
    tracker, got = measured(model, loss, ids)
    assert tracker.unsupported == {} and got.failed == {}
    assert "transformer.h.0.attn.c_attn" in got.modules  # Conv1D: a Linear, weight transposed
    assert_close(got, model, loss, ids)


def test_gram_and_materialised_paths_agree_at_any_chunk_size():
    n, t, p, q = 5, 9, 4, 3
    blocks = [Block(u=torch.randn(n, t, p), v=torch.randn(n, t, q)),
              Block(ids=torch.randint(0, p, (n, 4)), v=torch.randn(n, 4, q), rows=p)]
    explicit = torch.zeros(n, p, q)
    for i in range(n):
        explicit[i] += blocks[0].u[i].T @ blocks[0].v[i]
        for s in range(4):
            explicit[i, blocks[1].ids[i, s]] += blocks[1].v[i, s]
    expected = explicit.pow(2).sum((1, 2))
    for budget in (1, 50, 10**6):
        torch.testing.assert_close(_gram(blocks, n, 13, budget), expected, rtol=1e-12, atol=0)
        torch.testing.assert_close(_materialised(blocks, n, p, q, budget), expected,
                                   rtol=1e-12, atol=0)
    assert 13 * (p + q) > p * q  # squared_norms picks the materialised path here
    torch.testing.assert_close(squared_norms(blocks, 7), expected, rtol=1e-12, atol=0)
    bias = [Block(u=torch.randn(n, t, p)), Block(ids=torch.randint(0, p, (n, 2)), rows=p)]
    summed = bias[0].u.sum(1) + F.one_hot(bias[1].ids, p).sum(1)
    for path in (_gram(bias, n, t + 2, 3), _materialised(bias, n, p, 1, 3)):
        torch.testing.assert_close(path, summed.pow(2).sum(1), rtol=1e-12, atol=0)


def test_unbatched_inputs_and_inputs_that_fold_the_batch_have_no_figure():
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    tracker = PerSampleNorms(model)
    model[0](torch.randn(4)).sum().backward()  # an unbatched call: nothing to tell apart
    assert tracker.take() is None
    folded = nn.Linear(2, 2)
    class Folding(nn.Module):
        def __init__(self):
            super().__init__()
            self.first, self.folded = nn.Linear(4, 2), folded
        def forward(self, x):  # the batch folded into rows: [N, 4] -> [N·2, 2]
            return self.folded(self.first(x).reshape(-1, 2, 1).expand(-1, 2, 2).reshape(-1, 2))
    tracker.remove()
    model = Folding()
    tracker = PerSampleNorms(model)
    model(torch.randn(3, 4)).sum().backward()
    got = tracker.take()
    tracker.remove()
    assert got.failed == {"folded": "its input's first dimension (6) is not the batch's (3)"}
    assert list(got.modules) == ["first"] and got.samples == 3
