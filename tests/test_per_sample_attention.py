"""Per-sample gradient norms of nn.MultiheadAttention (core/persample/attention.py) equal
torch.func's per-sample gradients' norms, and watching leaves the model's numbers unchanged."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.overrides import _get_current_function_mode_stack

from gradexplorer.core.persample.tracker import PerSampleNorms
from tests.persample_reference import (  # noqa: F401 - float64: an autouse fixture
    assert_close,
    float64,
    measured,
)

pytestmark = pytest.mark.filterwarnings(  # torch.func's vmap of scaled_dot_product_attention
    "ignore:There is a performance drop:UserWarning")


def check(model, loss_of, *inputs, reduction="mean"):
    """The tracker's figures against torch.func's, every module with parameters included."""
    tracker, got = measured(model, loss_of, *inputs, reduction=reduction)
    assert tracker.unsupported == {} and got.failed == {} and got.trusted
    assert_close(got, model, loss_of, *inputs)
    return got


def padding(n: int, s: int) -> torch.Tensor:
    """A key padding mask [n, s]: sample i pads its last i % 3 keys."""
    return torch.arange(s)[None, :] >= s - (torch.arange(n)[:, None] % 3)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
def test_self_attention_with_masks_either_batch_layout(batch_first, need_weights):
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # (bool, as the padding mask)
    def loss(f, x, mask):  # x batch-first; the MHA gets its own layout (the root's too)
        x = x if batch_first else x.transpose(0, 1)
        out, _ = f(x, x, x, key_padding_mask=mask, attn_mask=causal, need_weights=need_weights)
        return out.pow(2).mean()
    got = check(mha, loss, torch.randn(5, 6, 8), padding(5, 6))
    assert set(got.modules) == {"", "out_proj"}


def test_cross_attention_packed_split_and_separate_weights():
    class Cross(nn.Module):
        def __init__(self):
            super().__init__()
            self.packed = nn.MultiheadAttention(8, 2, batch_first=True)  # k is v: q | kv rows
            self.chunked = nn.MultiheadAttention(8, 4, batch_first=True)  # k, v differ: thirds
            self.separate = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True)

        def forward(self, x, memory, values, mask):
            h, _ = self.packed(x, memory, memory, key_padding_mask=mask)
            h, _ = self.chunked(h, memory, memory * 2.0, need_weights=False)
            return self.separate(h, memory[..., :5], values, key_padding_mask=mask)[0]
    def loss(f, *inputs):
        return f(*inputs).tanh().sum()
    check(Cross(), loss, torch.randn(4, 3, 8), torch.randn(4, 7, 8), torch.randn(4, 7, 3),
          padding(4, 7), reduction="sum")


def test_a_frozen_in_projection_leaves_out_proj_measured():
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    mha.in_proj_weight.requires_grad_(False)
    mha.in_proj_bias.requires_grad_(False)
    def loss(f, x):
        return f(x, x, x)[0].pow(2).mean()
    got = check(mha, loss, torch.randn(4, 5, 8))
    assert list(got.modules) == ["out_proj"]


def test_one_attention_used_whole_and_in_row_blocks_in_one_pass_and_bias_kv_zero_attn():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True, add_bias_kv=True,
                                             add_zero_attn=True)

        def forward(self, x, memory):  # self-attention (whole in_proj), then cross (q | kv)
            h, _ = self.mha(x, x, x)
            return self.mha(h, memory, memory)[0]
    def loss(f, x, memory):
        return f(x, memory).pow(2).sum()
    got = check(Twice(), loss, torch.randn(3, 4, 8), torch.randn(3, 5, 8), reduction="sum")
    assert got.samples == 3


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer(norm_first):
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True,
                                       norm_first=norm_first)
    def loss(f, x, mask):
        return f(x, src_key_padding_mask=mask).pow(2).mean()
    got = check(layer, loss, torch.randn(5, 7, 16), padding(5, 7))
    assert {"self_attn", "self_attn.out_proj", "linear1", "norm2"} <= set(got.modules)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")  # nn.Transformer's
def test_sequence_first_encoder_its_feed_forward_and_norms_take_dimension_1():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)  # batch_first=False: [S, N, E]
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
    def loss(f, x):
        return f(x.transpose(0, 1)).tanh().sum()
    got = check(encoder, loss, torch.randn(4, 6, 8), reduction="sum")
    assert "norm" in got.modules and "layers.1.linear2" in got.modules
    transformer = nn.Transformer(8, 2, 1, 2, 16, dropout=0.0)  # the model's input: [S, N, E]
    def loss2(f, src, tgt):
        return f(src.transpose(0, 1), tgt.transpose(0, 1)).tanh().sum()
    got = check(transformer, loss2, torch.randn(3, 5, 8), torch.randn(3, 4, 8), reduction="sum")
    assert "decoder.layers.1.multihead_attn.out_proj" in got.modules


def test_transformer_decoder_stack_with_memory_and_masks():
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
    decoder = nn.TransformerDecoder(layer, 2)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    def loss(f, tgt, memory, mask):
        out = f(tgt, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=mask)
        return out.pow(2).mean()
    got = check(decoder, loss, torch.randn(4, 5, 8), torch.randn(4, 6, 8), padding(4, 6))
    assert "layers.1.multihead_attn" in got.modules


def test_watching_leaves_the_loss_and_every_gradient_bit_identical():
    torch.set_default_dtype(torch.float32)
    model = nn.Transformer(16, 2, 1, 1, 32, dropout=0.0, batch_first=True)
    src, tgt = torch.randn(4, 7, 16), torch.randn(4, 5, 16)
    def step(tracker=None):
        model.zero_grad()
        loss = model(src, tgt, tgt_mask=model.generate_square_subsequent_mask(5)).pow(2).mean()
        loss.backward()
        figures = tracker.take() if tracker is not None else None
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}, figures
    bare_loss, bare_grads, _ = step()
    tracker = PerSampleNorms(model)
    loss, grads, figures = step(tracker)
    tracker.remove()
    assert figures.failed == {} and "encoder.layers.0.self_attn" in figures.modules
    assert torch.equal(loss, bare_loss)
    assert all(torch.equal(grads[n], g) for n, g in bare_grads.items())


def fused(call) -> bool:
    """(whether ``call()`` ran torch's fused _native_multi_head_attention, its output)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = call()
    return any(e.name == "aten::_native_multi_head_attention" for e in prof.events()), out


def test_the_fused_path_is_taken_where_it_was_and_only_there():
    torch.set_default_dtype(torch.float32)
    mha = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(3, 5, 16)
    def call():
        return mha(x, x, x, need_weights=False)[0]
    bare_grad, bare_out = fused(call)  # eval mode, gradients on: not fused (trainable weights)
    tracker = PerSampleNorms(mha)
    watched_grad, watched_out = fused(call)
    assert not bare_grad and not watched_grad and torch.equal(watched_out, bare_out)
    with torch.no_grad():  # eval inference: fused, watched or not (no mode entered)
        watched_fused, watched_out = fused(call)
        tracker.remove()
        bare_fused, bare_out = fused(call)
    assert watched_fused and bare_fused and torch.equal(watched_out, bare_out)


def test_what_is_not_supported_is_named_and_unbatched_calls_have_no_figure():
    class Custom(nn.MultiheadAttention):
        def forward(self, query, key, value, **kwargs):
            return super().forward(query, key, value, **kwargs)
    model = nn.Sequential(nn.Linear(4, 8))
    model.attn = Custom(8, 2)
    tracker = PerSampleNorms(model)
    tracker.remove()
    assert tracker.unsupported == {
        "attn (Custom)": "Custom overrides nn.MultiheadAttention.forward",
        "attn.out_proj (NonDynamicallyQuantizableLinear)":
            "inside an nn.MultiheadAttention left out, which uses its weights without calling it"}
    mha = nn.MultiheadAttention(8, 2)
    tracker = PerSampleNorms(mha)
    x = torch.randn(5, 8)  # unbatched [L, E]: no samples to tell apart
    mha(x, x, x)[0].sum().backward()
    assert tracker.take() is None
    with pytest.raises(AssertionError, match="embedding dimension"):  # its own error, and
        mha(torch.randn(5, 2, 6), torch.randn(5, 2, 6), torch.randn(5, 2, 6))
    assert not _get_current_function_mode_stack()  # the mode left on the way out
    tracker.remove()


class SequenceFirstClassifier(nn.Module):
    """PyTorch's tutorial layout: token ids [S, N] into an embedding, a batch_first=False
    encoder, a head on the mean over positions ([N, E]); the model itself is no transformer."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 8)
        self.proj = nn.Linear(8, 8)  # on [S, N, E]
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, ids):
        return self.head(self.encoder(self.proj(self.embed(ids))).mean(0))


def test_modules_around_a_sequence_first_encoder_take_the_samples_where_they_are():
    model = SequenceFirstClassifier()
    def loss(f, ids):  # ids batch-first here; the model gets [S, N]
        return f(ids.transpose(0, 1)).logsumexp(-1).sum()
    got = check(model, loss, torch.randint(0, 11, (5, 7)), reduction="sum")  # N 5, S 7
    assert {"embed", "proj", "head", "encoder.layers.0.linear1"} <= set(got.modules)
    assert got.samples == 5


def test_a_sequence_as_long_as_the_batch_is_named_not_guessed():
    model = SequenceFirstClassifier()
    tracker = PerSampleNorms(model, "sum")
    try:
        model(torch.randint(0, 11, (4, 4))).sum().backward()  # S = N = 4: dimension 0 or 1?
        got = tracker.take()
    finally:
        tracker.remove()
    assert {"embed", "proj"} <= set(got.failed) and "cannot be told" in got.failed["proj"]
    assert "head" in got.modules and got.samples == 4  # [N, E]: dimension 1 is no sequence
