"""A tiny GPT-2 (transformers, built from a GPT2Config) fed keyword inputs, its loss read from
the output (``loss_fn=None``), with a NaN made in its forward: the second block's MLP activation
is a log, of negative pre-activations (for the NaN-origin replay tests)."""

import torch
from torch import nn

from gradexplorer.session import Workload


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


def build(nan: bool = True) -> Workload:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=2,
                                       n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    if nan:
        model.transformer.h[1].mlp.act = Log()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    return Workload(model, lambda step: {"input_ids": ids, "labels": ids}, None, name="gpt2-nan")
