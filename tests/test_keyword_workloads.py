"""Transformers-style workloads: keyword inputs from make_batch, the loss read from the output."""

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from gradexplorer import TrainingSession, UserError
from gradexplorer.session import SessionConfig, Workload


@dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor | None = None


class TinyLM(nn.Module):
    """Takes input_ids/labels as keywords and returns an object with .loss, like transformers."""

    def __init__(self, kind: str = "object") -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 6)
        self.head = nn.Linear(6, 11)
        self.kind = kind

    def forward(self, input_ids, labels=None):
        logits = self.head(self.embed(input_ids))
        loss = None if labels is None else nn.functional.cross_entropy(
            logits.reshape(-1, 11), labels.reshape(-1))
        if self.kind == "dict":
            return {"logits": logits, "loss": loss}
        if self.kind == "scalar":
            return loss
        return Output(logits, loss)


def batch(step, labels=True):
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, 11, (3, 5), generator=g)
    return {"input_ids": ids, "labels": ids} if labels else {"input_ids": ids}


def manual_loss(model, step):
    b = batch(step)
    logits = model.head(model.embed(b["input_ids"]))
    return nn.functional.cross_entropy(logits.reshape(-1, 11), b["labels"].reshape(-1))


@pytest.mark.parametrize("kind", ["object", "dict", "scalar"])
def test_loss_from_output_trains_like_a_hand_written_loop(kind):
    torch.manual_seed(0)
    model = TinyLM(kind)
    reference = TinyLM(kind)
    reference.load_state_dict(model.state_dict())
    session = TrainingSession(Workload(model, batch, None), SessionConfig(device="cpu", lr=0.1))
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        result = session.step()
        opt.zero_grad()
        loss = manual_loss(reference, step)
        loss.backward()
        opt.step()
        assert result.loss == loss.item()
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.equal(a, b)


def test_dict_inputs_with_a_target_go_to_loss_fn():
    model = TinyLM()
    seen = []

    def loss_fn(output, target):
        seen.append(target)
        return output.logits.square().mean()

    session = TrainingSession(Workload(model, lambda s: (batch(s, labels=False), "t"), loss_fn),
                              SessionConfig(device="cpu"))
    session.step()
    assert seen == ["t"]


def test_no_loss_in_output_is_one_clear_line():
    session = TrainingSession(Workload(TinyLM(), lambda s: batch(s, labels=False), None),
                              SessionConfig(device="cpu"))
    with pytest.raises(UserError, match="has no loss") as info:
        session.step()
    assert "\n" not in str(info.value)


def test_non_scalar_output_without_loss_fn_is_refused():
    model = nn.Linear(3, 2)
    session = TrainingSession(Workload(model, lambda s: (torch.ones(4, 3), None), None),
                              SessionConfig(device="cpu"))
    with pytest.raises(UserError, match=r"shape \[4, 2\]"):
        session.step()


def test_bad_batch_shape_is_refused():
    session = TrainingSession(Workload(nn.Linear(3, 1), lambda s: torch.ones(2, 3), None),
                              SessionConfig(device="cpu"))
    with pytest.raises(UserError, match="make_batch"):
        session.step()


def test_hooks_probe_keyword_inputs():
    from gradexplorer.hooks import HookRegistry

    model = TinyLM()
    session = TrainingSession(Workload(model, batch, None), SessionConfig(device="cpu"))
    hooks = HookRegistry(model)
    hooks.install(session)
    hooks.attach("head", "scale:0")
    session.step()
    assert hooks.attached()["head"].calls == 1
    assert model.embed.weight.grad.abs().sum() == 0  # nothing flows past the zeroed head
