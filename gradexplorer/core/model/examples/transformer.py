"""A small transformer encoder learning to reverse token sequences."""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.examples.options import reject_unknown, take_int
from gradexplorer.core.model.workload import Workload


class TinyTransformer(nn.Module):
    """Token + position embeddings, ``layers`` encoder layers, a per-token classifier."""

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(1, seq, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, heads, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens) + self.pos[:, : tokens.shape[1]]))


def build(options: dict[str, str], seed: int) -> Workload:
    """Reverse random sequences of tokens: cross-entropy over every position."""
    layers = take_int(options, "layers", 2, hi=1000)
    d_model = take_int(options, "d_model", 64, lo=4, hi=8192)
    heads = take_int(options, "heads", 4, hi=256)
    seq = take_int(options, "seq", 16, hi=4096)
    batch = take_int(options, "batch", 16, hi=4096)
    vocab = take_int(options, "vocab", 32, lo=2, hi=1_000_000)
    reject_unknown(options, "transformer", ("layers", "d_model", "heads", "seq", "batch", "vocab"))
    if d_model % heads:
        raise UserError(f"example:transformer needs d_model ({d_model}) divisible by heads ({heads})")
    model = TinyTransformer(vocab, d_model, heads, layers, seq)
    base = torch.Generator().manual_seed(seed)
    seed0 = int(torch.randint(0, 2**31 - 1, (1,), generator=base))
    loss = nn.CrossEntropyLoss()

    def make_batch(step: int):
        gen = torch.Generator().manual_seed(seed0 + step)
        tokens = torch.randint(0, vocab, (batch, seq), generator=gen)
        return tokens, tokens.flip(1)

    return Workload(
        model=model,
        make_batch=make_batch,
        loss_fn=lambda out, target: loss(out.reshape(-1, vocab), target.reshape(-1)),
        name="transformer",
        description=f"transformer encoder ({layers} layers, d_model {d_model}) reversing sequences",
    )
