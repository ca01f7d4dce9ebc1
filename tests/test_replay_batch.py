"""Replays see the step's own batch (issue 19, item 6): a gradient trace, the NaN-origin replay
and the A/B arms use the batch the step drew (kept by reference), so a ``make_batch`` reading a
stream gives the same answers as a fixed one and the training's data is never advanced by them.
The NaN replay runs keyword inputs and ``loss_fn=None`` as training does; a replay that cannot
reproduce a non-finite step says so in one line; the A/B gradient cosine counts a missing
gradient as zeros."""

import math
from pathlib import Path

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.diagnose.nan_origin import NonFiniteOrigin
from gradexplorer.core.session.ab import ABRun

CPU = gx.session.SessionConfig(device="cpu")
GPT2_FILE = Path(__file__).parent / "data" / "gpt2_nan_model.py"


def gpt2_nan() -> gx.session.Workload:
    return gx.load_workload(f"{GPT2_FILE}:build")


class DropoutNet(nn.Module):
    def __init__(self, head: nn.Module | None = None):
        super().__init__()
        self.fc = nn.Linear(6, 12)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(12, 3)
        self.head = head or nn.Identity()

    def forward(self, x):
        return self.head(self.out(self.drop(torch.relu(self.fc(x)))))


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class LogInput(nn.Module):
    """log of its input first: NaN exactly on a batch holding a negative value."""

    def __init__(self) -> None:
        super().__init__()
        self.log = Log()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(self.log(x))


class Stream:
    """An iterator of batches that ``make_batch`` reads, as a DataLoader-fed loop would."""

    def __init__(self, count: int = 40, bad: int | None = None) -> None:
        g = torch.Generator().manual_seed(5)
        self.batches = [(torch.rand(16, 6, generator=g) + 0.1, torch.randn(16, 3, generator=g))
                        for _ in range(count)]
        if bad is not None:  # one negative input: log(x) is NaN on that batch only
            self.batches[bad][0][0, 0] = -1.0
        self.taken = 0
        self._it = iter(self.batches)

    def __call__(self, step):
        self.taken += 1
        return next(self._it)


def stream_workload(stream: Stream, head=None, seed: int = 3) -> gx.session.Workload:
    torch.manual_seed(seed)
    return gx.session.Workload(DropoutNet(head), stream, nn.MSELoss(), name="stream")


def test_a_trace_sees_the_steps_batch_and_leaves_training_unchanged():
    plain_stream, traced_stream = Stream(), Stream()
    plain = gx.TrainingSession(stream_workload(plain_stream), CPU)  # seeds the global RNG
    expected = [plain.step().loss for _ in range(4)]
    traced = gx.TrainingSession(stream_workload(traced_stream), CPU)
    losses = []
    for _ in range(4):
        G = gx.diagnose.trace_gradients(traced)
        result = traced.step()
        assert G.graph["loss"] == result.loss  # the trace's forward is the step's
        losses.append(result.loss)
    assert losses == expected  # the trace advanced neither the data nor the random numbers
    assert traced_stream.taken == plain_stream.taken == 4


def test_ab_arms_on_a_shared_stream_are_identical_with_scale_one():
    stream = Stream()
    ab = ABRun(lambda: stream_workload(stream), CPU, "out", "scale:1.0")
    results = list(ab.run(3))
    assert all(r.identical and r.divergence == 0.0 and r.grad_cosine == 1.0 for r in results)
    assert stream.taken == 3  # one batch per step, for both arms
    alone = gx.TrainingSession(stream_workload(Stream()), CPU)
    assert [r.plain.loss for r in results] == [alone.step().loss for _ in range(3)]


def test_blocking_a_module_lowers_the_gradient_cosine():
    """A blocked module's parameters have no gradient in the hooked arm: they count as zeros
    (docs/diagnose.md), so the cosine is that of the whole gradients, not 1.0."""
    ab = ABRun(lambda: stream_workload(Stream()), CPU, "out", "block")
    first = ab.step()
    pairs = list(zip(ab.plain.model.parameters(), ab.hooked.model.parameters(), strict=True))
    assert any(b.grad is None for _, b in pairs)
    plain = torch.cat([a.grad.double().flatten() for a, _ in pairs])
    hooked = torch.cat([(b.grad if b.grad is not None else torch.zeros_like(b)).double().flatten()
                        for _, b in pairs])
    expected = float(plain @ hooked) / math.sqrt(float(plain @ plain) * float(hooked @ hooked))
    # float64 both, summed in another order (per parameter there, over the whole vector here):
    # equal to float64 rounding, not bit for bit (a CPU whose BLAS dot splits the vector
    # differently gave 0.8097630271214868 against 0.8097630271214867)
    assert first.grad_cosine == pytest.approx(expected, rel=1e-12) and 0 < expected < 0.99


def observed(session) -> list[dict]:
    origin = NonFiniteOrigin(session)
    session.add_observer(origin)
    return origin.found


def test_the_nan_replay_uses_the_steps_own_batch_from_a_stream():
    stream = Stream(bad=1)  # step 2's batch makes log(negative); the one after is fine
    torch.manual_seed(0)
    session = gx.TrainingSession(gx.session.Workload(LogInput(), stream, nn.MSELoss()), CPU)
    found = observed(session)
    session.step()
    assert found == []
    result = session.step()
    assert result.nonfinite_origin["text"] == \
        "first non-finite value in the forward pass: log in module log"
    assert stream.taken == 2  # the replay drew nothing


class OnceNaN(nn.Module):
    """NaN on its first call only: a replay of that step comes out finite."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * float("nan") if self.calls == 1 else x


def test_a_replay_that_cannot_reproduce_says_so_in_one_line():
    session = gx.TrainingSession(stream_workload(Stream(), OnceNaN()), CPU)
    messages = []
    origin = NonFiniteOrigin(session)
    origin.event.connect(lambda kind, module, text: messages.append(text))
    session.add_observer(origin)
    result = session.step()
    text = result.nonfinite_origin["text"]
    assert text.startswith("could not reproduce the non-finite gradients of fc.weight")
    assert messages == [f"step 1: {text}"] and "\n" not in text


def test_gpt2_keyword_inputs_nan_names_its_forward_op(run_cli):
    session = gx.TrainingSession(gpt2_nan(), CPU)
    found = observed(session)
    result = session.step()
    assert math.isnan(result.loss)
    origin = result.nonfinite_origin
    assert (origin["where"], origin["op"], origin["module"]) == \
        ("forward", "log", "transformer.h.1.mlp.act")
    assert found == [origin]
    assert gx.diagnose.diagnose_step(gx.TrainingSession(gpt2_nan(), CPU))["op"] == "log"
    code, out, err = run_cli("run", "--model", f"{GPT2_FILE}:build", "--steps", "1",
                             "--device", "cpu")
    assert code == 0, err
    assert "first non-finite value in the forward pass: log in module transformer.h.1.mlp.act" \
        in out


def test_ab_arms_record_the_same_two_points_as_every_loop():
    """Each arm's step carries its StepLedger: the gradient as accumulated and as applied
    (the session neither scales nor clips: equal), each the float64 norm of that arm's own
    gradients (a hook that clips the module's input gradients changes the hooked arm's)."""
    ab = ABRun(lambda: stream_workload(Stream()), CPU, "out", "clip:0.01")
    first = ab.step()
    norms = []
    for result, session in ((first.plain, ab.plain), (first.hooked, ab.hooked)):
        grads = [p.grad.double() for p in session.model.parameters() if p.grad is not None]
        want = math.sqrt(sum(float((g * g).sum()) for g in grads))
        led = result.ledger
        assert (led.optimizer_step, led.micro_batches, led.skipped) == (1, 1, False)
        assert abs(led.grad_norm_accumulated - want) <= 1e-12 * want
        assert led.grad_norm_applied == led.grad_norm_accumulated and led.clip_coef == 1.0
        assert led.loss == result.loss
        norms.append(want)
    assert norms[0] != norms[1]
