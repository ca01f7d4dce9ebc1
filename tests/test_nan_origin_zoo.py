"""The NaN origin names the right op and module on the models people train (issue 45, item 2).

Each model makes NaN/Inf at a known place on its first step; ``gradexplorer run``'s and the
app's observer (``NonFiniteOrigin`` in a ``SessionStack``) must name that op and module — not
a BatchNorm buffer the forward wrote NaN into, not a -inf mask, T5's ``log(0)`` or dropout's
unfilled buffer that became finite again, not "a non-deterministic op" — and never raise out of
``session.step()``.
"""

import json
from pathlib import Path

import pytest
import torch
from script_helpers import load_script
from torch import nn

import gradexplorer as gx
from gradexplorer.core.stack.assembly import SessionStack

CPU = gx.session.SessionConfig(device="cpu")


def first_step(model: nn.Module, batch, loss_fn=nn.MSELoss()) -> dict:
    """The NaN origin the session's stack reports for the first step of ``model`` on ``batch``."""
    torch.manual_seed(0)
    session = gx.TrainingSession(gx.session.Workload(model, lambda step: batch, loss_fn, name="zoo"), CPU)
    SessionStack.on(session, gx.session.GradientMonitor())
    result = session.step()
    assert result.gradients.nonfinite()  # the step really went bad
    return result.nonfinite_origin


def where_op_module(found: dict) -> tuple[str, str, str]:
    return found["where"], found["op"], found["module"]


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class BatchNormCNN(nn.Module):
    """conv → log (NaN where the convolution is negative) → BatchNorm → pool → linear: the
    forward writes NaN into the BatchNorm's running statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = Log()
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.bn(self.act(self.conv(x))).mean((2, 3)))


def images(batch: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return torch.randn(batch, 3, 6, 6, generator=gen), torch.randn(batch, 2, generator=gen)


def test_a_batchnorm_cnn_names_the_log_not_its_running_statistics():
    torch.manual_seed(0)
    model = BatchNormCNN()
    found = first_step(model, images())
    assert where_op_module(found) == ("forward", "log", "act")
    assert found["text"] == "first non-finite value in the forward pass: log in module act"
    assert not torch.isfinite(model.bn.running_mean).all()  # the step's forward wrote NaN there


def test_the_replay_starts_from_the_buffers_the_step_began_with():
    """A BatchNorm in eval mode reads its running statistics: the replay must read those the
    step began with (finite), not the NaN the step's own forward wrote into them later. The
    loss stays finite (``where`` drops the NaN); the gradients do not: BatchNorm's backward
    turns the NaN it saved into NaN gradients — born in the forward's log."""

    class FrozenThenTrained(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(4, 4)
            self.act = Log()
            self.bn = nn.BatchNorm1d(4)
            self.out = nn.Linear(4, 2)

        def forward(self, x):
            self.bn.eval()
            z = self.bn(x)  # reads the running statistics as the step began
            self.bn.train()
            y = self.bn(self.act(self.inp(x)))  # NaN, written into the running statistics
            return self.out(torch.where(torch.isfinite(y), y, 0.0) + z)

    gen = torch.Generator().manual_seed(2)
    batch = torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)
    torch.manual_seed(0)
    found = first_step(FrozenThenTrained(), batch)
    assert where_op_module(found) == ("forward", "log", "act")
    assert found["backward_op"] == "NativeBatchNormBackward0" and found["backward_module"] == "bn"
    assert found["text"] == ("first non-finite value in the forward pass: log in module act; it "
                             "reached the gradients, not the loss: NativeBatchNormBackward0 in "
                             "module bn saved it")


class InPlace(nn.Module):
    """An activation written in place over a copy of its input (its old values are gone when
    the op returns: only its inputs before it ran tell that they were finite)."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x):
        x = x * 1.0
        if self.how == "sqrt_":
            return x.sqrt_()
        if self.how == "log_":
            return x.log_()
        if self.how == "masked_fill_":
            return x.masked_fill_(x < 0, float("-inf"))
        x[:, 0] = float("nan")  # x[i] = ... : fill_ of a view, the NaN a constant
        return x


class InPlaceNet(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.act = InPlace(how)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        return self.out(self.act(self.fc(x)))


@pytest.mark.parametrize(("how", "op"), [("sqrt_", "sqrt_"), ("log_", "log_"),
                                         ("masked_fill_", "masked_fill_"), ("setitem", "fill_")])
def test_an_in_place_op_is_seen_before_it_overwrites_its_input(how, op):
    gen = torch.Generator().manual_seed(3)
    batch = torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)
    torch.manual_seed(0)
    found = first_step(InPlaceNet(how), batch)
    assert where_op_module(found) == ("forward", op, "act")
    constant = " (from a NaN/Inf constant)" if how == "setitem" else ""
    assert found["text"] == f"first non-finite value in the forward pass: {op} in module act{constant}"


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


class CleansThenLogs(nn.Module):
    """Replaces the NaN of its input (``nan_to_num``), then takes a log of negative numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.act = Log()

    def forward(self, x):
        return self.act(self.fc(torch.nan_to_num(x)))


def test_nan_in_the_inputs_names_the_data_when_it_reaches_the_loss():
    gen = torch.Generator().manual_seed(4)
    x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)
    x[2, 1] = float("nan")
    found = first_step(mlp(), (x, y))
    assert (found["where"], found["data"], found["module"]) == ("data", "inputs", "")
    assert found["text"] == "the batch holds NaN/Inf and it reaches the loss: inputs (1 NaN)"
    torch.manual_seed(0)  # the same NaN, replaced before use: the log is the origin
    assert where_op_module(first_step(CleansThenLogs(), (x, y))) == ("forward", "log", "act")


def test_inf_in_the_targets_names_the_data():
    gen = torch.Generator().manual_seed(4)
    x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)
    y[0, 0], y[3, 1] = float("inf"), float("-inf")
    found = first_step(mlp(), (x, y))
    assert (found["where"], found["data"]) == ("data", "target")
    assert found["text"] == "the batch holds NaN/Inf and it reaches the loss: target (2 Inf)"


def nan_once(module: nn.Module) -> dict:
    """Make ``module``'s output NaN (a forward hook returning ``output * nan``) while
    ``state["on"]``: the step and its replay; off afterwards."""
    state = {"on": True}

    def hook(mod, args, output):
        return output * float("nan") if state["on"] else output

    module.register_forward_hook(hook)
    return state


def hf_step(model: nn.Module, ids: torch.Tensor) -> dict:
    return first_step(model, {"input_ids": ids, "labels": ids}, None)


def test_gpt2_names_the_injected_nan_not_its_mask_or_dropout():
    """GPT-2 makes a -inf causal mask before its blocks (softmax absorbs it) and dropout reads
    an ``empty_like`` buffer before filling it; the NaN made in the first block's MLP meets
    the mask again in the second block's attention. Only the injected NaN reaches the loss."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2,
                                                                 vocab_size=64))
    nan_once(model.transformer.h[0].mlp.c_fc)
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(5))
    found = hf_step(model, ids)
    assert where_op_module(found) == ("forward", "mul", "transformer.h.0.mlp.c_fc")


def test_t5_names_the_injected_nan_not_its_relative_position_log():
    """T5's relative position buckets take ``log(0)`` (-inf, turned into integers and clamped)
    in the first block's attention of encoder and decoder; the NaN is made after it, in the
    encoder's first feed-forward."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=2,
                                   num_heads=2, decoder_start_token_id=0)
    model = transformers.T5ForConditionalGeneration(config)
    nan_once(model.encoder.block[0].layer[1].DenseReluDense.wo)
    ids = torch.randint(1, 64, (2, 8), generator=torch.Generator().manual_seed(5))
    found = hf_step(model, ids)
    assert where_op_module(found) == ("forward", "mul", "encoder.block.0.layer.1.DenseReluDense.wo")


CHECKPOINTED = Path(__file__).parent / "data" / "nan_checkpoint_model.py"


def test_a_reentrant_checkpointed_block_names_the_module_inside(run_cli):
    code, out, err = run_cli("run", "--model", f"{CHECKPOINTED}:build", "--steps", "1",
                             "--device", "cpu")
    assert code == 0, err
    assert "first non-finite value in the forward pass: log in module block.act" in out
    workload = gx.load_workload(f"{CHECKPOINTED}:build_backward")  # a finite loss, NaN gradients
    found = first_step(workload.model, workload.make_batch(0), workload.loss_fn)
    assert where_op_module(found) == ("backward", "SqrtBackward0", "block.act")
    x = torch.randn(2, 8, requires_grad=True)  # torch's checkpoint is its own again afterwards
    kept = torch.utils.checkpoint.checkpoint(workload.model.block, x, use_reentrant=True)
    assert type(kept.grad_fn).__name__ == "CheckpointFunctionBackward"


def test_graph_trace_grads_replays_a_reentrant_checkpointed_block_op_by_op(run_cli, tmp_path):
    code, out, err = run_cli("graph", "--model", f"{CHECKPOINTED}:build_backward", "--trace-grads",
                             "--out", tmp_path / "g.json")
    assert code == 0, err
    assert "first non-finite gradient: SqrtBackward0 in module block.act" in out
    names = [n["name"] for n in json.loads((tmp_path / "g.json").read_text())["nodes"]]
    assert "SqrtBackward0" in names and not any(n.startswith("CheckpointFunction") for n in names)


class OnlyOnce(nn.Module):
    """NaN on its first call; every later call (a replay's) fails."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("this model runs once")
        return self.fc(x) * float("nan")


def test_a_replay_that_fails_is_told_in_one_line_and_the_step_completes():
    gen = torch.Generator().manual_seed(6)
    found = first_step(OnlyOnce(), (torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)))
    assert found["where"] == "undecided" and found["module"] == ""
    assert found["text"].startswith("could not tell where the NaN/Inf was born: the replay of the "
                                    "step failed (")
    assert "this model runs once" in found["text"] and "\n" not in found["text"]


def test_a_compiled_model_is_replayed_eagerly_and_names_the_users_module():
    """``torch.compile`` with the ``aot_eager`` backend: the same dynamo capture and AOT autograd
    as the default (one ``CompiledFunctionBackward`` node for the whole model), without
    inductor's C++ build (over 60 s on this 2-core machine)."""
    SqrtNet = load_script("tests", "data", "nan_sqrt_model.py").SqrtNet
    x, y = torch.randn(32, 8, generator=torch.Generator().manual_seed(0)), torch.randn(32, 4)
    torch.manual_seed(0)
    found = first_step(torch.compile(SqrtNet(Log()), backend="aot_eager"), (x, y))
    assert where_op_module(found) == ("forward", "log", "head")
    torch.manual_seed(0)
    found = first_step(torch.compile(SqrtNet(), backend="aot_eager"), (x, y))
    assert where_op_module(found) == ("backward", "SqrtBackward0", "act")
    assert found["text"] == "first non-finite gradient: SqrtBackward0 in module act at nan_sqrt_model.py:17"
    assert found["code"] == "return torch.sqrt(x * (x > 0))"  # line 17, the eager replay's own line


class MaskedAttention(nn.Module):
    """Single-head causal attention on an additive -inf mask, its scores scaled by ``scale²``."""

    def __init__(self, width: int, scale: float) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.scale = Scale(scale)

    def forward(self, x, mask):
        scores = self.scale(self.q(x) @ self.k(x).transpose(-1, -2)) + mask
        return torch.softmax(scores, -1) @ self.v(x)


class Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor * self.factor


class OverflowingAttention(nn.Module):
    """Two attention layers sharing a -inf causal mask (made once, absorbed by the first
    softmax); the second scales its scores by 1e30 twice, which overflows float32 to ±Inf — and
    +Inf + (-inf) is NaN where the overflow meets the mask."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([MaskedAttention(8, 0.5), MaskedAttention(8, 1e30)])
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        mask = torch.full((x.shape[1], x.shape[1]), float("-inf")).triu(1)
        for layer in self.layers:
            x = layer(x, mask)
        return self.out(x).mean(1)


def test_an_overflow_meeting_a_minus_inf_mask_names_the_overflow_not_the_mask():
    gen = torch.Generator().manual_seed(7)
    batch = torch.randn(2, 6, 8, generator=gen), torch.randn(2, 2, generator=gen)
    torch.manual_seed(0)
    found = first_step(OverflowingAttention(), batch)
    assert where_op_module(found) == ("forward", "mul", "layers.1.scale")


class Root(nn.Module):
    def forward(self, x):
        return torch.sqrt(x * (x > 0))


class TwoRoots(nn.Module):
    """Two backward births of non-finite gradients. The first to run (``late``: √ of features
    a ``where`` zeroed, infinite derivative there) is dropped by that ``where``'s backward and
    reaches no parameter; the second (``early``: √ at masked features, 0 · ∞) spoils ``fc``'s."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.early = Root()
        self.late = Root()
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        h = self.early(self.fc(x))
        return self.out(self.late(torch.where(h > 0.3, h, 0.0)))


def test_a_backward_birth_whose_non_finite_gradient_is_dropped_is_not_the_origin():
    gen = torch.Generator().manual_seed(8)
    batch = torch.randn(16, 4, generator=gen), torch.randn(16, 2, generator=gen)
    torch.manual_seed(0)
    found = first_step(TwoRoots(), batch)
    assert where_op_module(found) == ("backward", "SqrtBackward0", "early")


class Scaled(nn.Module):
    """A linear layer whose output is multiplied by a buffer (one that holds NaN from the start)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.register_buffer("gain", torch.tensor([1.0, float("nan")]))

    def forward(self, features):
        return self.fc(features) * self.gain


def test_a_buffer_holding_nan_as_the_step_begins_is_named_as_a_buffer():
    gen = torch.Generator().manual_seed(9)
    x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)
    torch.manual_seed(0)
    found = first_step(Scaled(), (x, y))
    assert (found["where"], found["buffers"]) == ("buffers", ["gain"])
    assert found["text"] == ("the loss went non-finite because buffer gain held NaN/Inf as the "
                             "step began (1 NaN; held before the first step: the model as built)")


def test_keyword_inputs_holding_nan_are_named_by_their_keyword():
    gen = torch.Generator().manual_seed(9)
    x, y = torch.randn(8, 4, generator=gen), torch.randn(8, 2, generator=gen)
    x[0, 0] = float("nan")
    scaled = Scaled()
    scaled.gain.fill_(1.0)
    found = first_step(scaled, {"features": x}, lambda out, target: (out - y).square().mean())
    assert (found["where"], found["data"]) == ("data", "features")
