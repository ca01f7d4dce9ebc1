"""GPT-2 from transformers, built from a GPT2Config (nothing downloaded).

    gradexplorer gui --model examples/gpt2_small.py:gpt2_small   # GPT-2 small: 124M, 148 tensors
    gradexplorer gui --model examples/gpt2_small.py:build        # 4 layers of width 256: quick
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from gradexplorer.session import Workload


class NextTokenLoss(nn.Module):
    """Cross-entropy of the logits against the next tokens."""

    def forward(self, output, target: torch.Tensor) -> torch.Tensor:
        logits = output.logits if hasattr(output, "logits") else output[0]
        return nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())


def gpt2_small() -> Workload:
    """The GPT-2 small architecture (12 layers, width 768, 12 heads, 50,257 tokens)."""
    return build(layers=12, width=768, heads=12, batch=1, tokens=32, vocab=50257)


def build(layers: int = 4, width: int = 256, heads: int = 4, batch: int = 2, tokens: int = 32,
          vocab: int = 2048, seed: int = 0) -> Workload:
    """A small GPT-2 language model on a fixed batch of random tokens."""
    config = GPT2Config(n_layer=int(layers), n_embd=int(width), n_head=int(heads),
                        vocab_size=int(vocab), n_positions=max(64, int(tokens)),
                        attn_pdrop=0.0, embd_pdrop=0.0, resid_pdrop=0.0)
    torch.manual_seed(int(seed))
    model = GPT2LMHeadModel(config)
    model.config.use_cache = False
    gen = torch.Generator().manual_seed(int(seed))
    ids = torch.randint(0, int(vocab), (int(batch), int(tokens) + 1), generator=gen)
    inputs, target = ids[:, :-1], ids[:, 1:]
    return Workload(model=model, make_batch=lambda step: (inputs, target), loss_fn=NextTokenLoss(),
                    name="gpt2", description=f"GPT-2 ({layers} layers, width {width}) from a config")
