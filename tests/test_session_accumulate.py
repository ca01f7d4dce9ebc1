"""A session of k micro-batches a step (``SessionConfig.accumulate``, issue 36) is the
hand-written accumulation loop, bit for bit: ``make_batch`` drawn k times in order (the random
stream as the loop draws it), each loss ÷ k, one optimizer step; a redone step and the A/B's
hooked arm replay the same k batches. Its noise scale and per-parameter SNR (``result.noise``)
equal a float64 computation from each micro-batch's own gradient."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.commands.table_text import number
from gradexplorer.core.hooks import HookRegistry
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.ab import ABRun
from gradexplorer.core.session.batch_ids import batch_text
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.core.watch.session_noise import SessionNoise

K, STEPS = 4, 3


def digits(k: int = K) -> TrainingSession:
    workload = load_workload("example:digits", ModelOptions(batch_size=16))
    return TrainingSession(workload, SessionConfig("cpu", accumulate=k))


def test_four_micro_batches_are_the_hand_written_accumulation_loop():
    session = digits()
    results = [session.step() for _ in range(STEPS)]
    loop = load_workload("example:digits", ModelOptions(batch_size=16))  # same seed, same init
    model, losses = loop.model, []
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # digits' suggestion
    for step in range(STEPS):
        opt.zero_grad()
        parts = []
        for j in range(K):
            x, y = loop.make_batch(step * K + j)
            loss = loop.loss_fn(model(x), y)
            (loss / K).backward()
            parts.append(float(loss.detach()))
        opt.step()
        losses.append(math.fsum(parts) / K)
    for (name, p), q in zip(session.model.named_parameters(), model.parameters(), strict=True):
        assert torch.equal(p, q), name
        assert torch.equal(p.grad, q.grad), f"{name}.grad"
    assert [r.loss for r in results] == losses
    last = results[-1]
    assert last.batch == {"make_batch": [8, 9, 10, 11]}
    assert batch_text(last.batch) == "make_batch(8–11)"  # as spike lines and views name it
    assert (last.ledger.micro_batches, last.ledger.iteration) == (K, STEPS * K)
    grads = [q.grad.double() for q in model.parameters()]
    assert last.grad_norm == pytest.approx(math.sqrt(sum(float((g * g).sum()) for g in grads)),
                                           rel=1e-12)


class Dropped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.drop, self.out = nn.Linear(6, 12), nn.Dropout(0.5), nn.Linear(12, 3)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.fc(x))))


class Stream:
    """``make_batch`` drawing from the global random stream (as a loop's augmentation does)."""

    def __init__(self) -> None:
        self.taken: list[int] = []

    def __call__(self, index: int):
        self.taken.append(index)
        return torch.rand(8, 6) + 0.1, torch.randn(8, 3)


def dropped(k: int, stream: Stream | None = None, optimizer: str = "adam") -> TrainingSession:
    torch.manual_seed(7)
    workload = gx.session.Workload(Dropped(), stream or Stream(), nn.MSELoss(), name="dropped")
    return TrainingSession(workload, SessionConfig("cpu", optimizer=optimizer, accumulate=k))


def test_the_random_stream_is_drawn_as_the_loop_draws_it():
    """Batch j is drawn just before its forward (dropout's masks and the batch share one
    stream): a loop that draws, forwards and backwards each micro-batch in turn."""
    session = dropped(3)
    torch.manual_seed(11)
    losses = [session.step().loss for _ in range(2)]
    torch.manual_seed(7)
    model, stream = Dropped(), Stream()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch.manual_seed(11)
    want = []
    for step in range(2):
        opt.zero_grad()
        parts = []
        for j in range(3):
            x, y = stream(step * 3 + j)
            loss = nn.functional.mse_loss(model(x), y)
            (loss / 3).backward()
            parts.append(float(loss.detach()))
        opt.step()
        want.append(math.fsum(parts) / 3)
    assert losses == want
    assert all(torch.equal(p, q) for p, q in zip(session.model.parameters(), model.parameters(),
                                                 strict=True))


def test_a_step_redone_at_its_third_micro_batch_replays_the_same_batches():
    """A hook that raises in the third micro-batch's backward: the step is redone from its
    start, micro-batches 1 and 2 taken as kept (not drawn again) with the random state right
    after their draw, so it is the step a session without the hook takes, bit for bit."""
    plain_stream, stream = Stream(), Stream()
    plain = dropped(3, plain_stream)
    plain.batch(0)  # drawn before the loop, as the registry's install draws it below
    torch.manual_seed(3)
    plain_losses = [plain.step().loss for _ in range(2)]
    session = dropped(3, stream)
    registry = HookRegistry(session.model)
    SessionStack.on(session, hooks=registry)
    calls = []

    def explode(module, grad_input, grad_output):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")

    registry.attach("out", explode)
    torch.manual_seed(3)
    losses = [session.step().loss for _ in range(2)]
    assert len(calls) == 3 and not registry.attached() and "boom" in registry.events[-1]
    assert losses == plain_losses
    assert stream.taken == plain_stream.taken == list(range(6))  # no batch drawn twice
    for p, q in zip(session.model.parameters(), plain.model.parameters(), strict=True):
        assert torch.equal(p, q) and torch.equal(p.grad, q.grad)


def test_ab_arms_share_every_micro_batch():
    stream = Stream()
    ab = ABRun(lambda: gx.session.Workload(Dropped(), stream, nn.MSELoss(), name="dropped"),
               SessionConfig("cpu", accumulate=2), "out", "scale:1.0")
    results = list(ab.run(3))
    assert all(r.identical and r.divergence == 0.0 for r in results)
    assert stream.taken == list(range(6))  # two a step, for both arms
    assert results[-1].plain.batch == results[-1].hooked.batch == {"make_batch": [4, 5]}


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "4", 10**6])
def test_a_bad_number_of_micro_batches_is_refused_in_one_line(bad):
    with pytest.raises(UserError, match=r"^micro-batches a step \(accumulate\) must be"):
        TrainingSession(gx.session.Workload(Dropped(), Stream(), nn.MSELoss()),
                        SessionConfig("cpu", accumulate=bad))


def reference(session: TrainingSession, k: int) -> dict[str, tuple[float, float, torch.Tensor]]:
    """Per parameter, in float64 from each micro-batch's own gradient (``autograd.grad`` of its
    mean loss on a float64 copy of the model, on the batches the next step will draw):
    (mean_i |g_i|², |mean_i g_i|², the g_i)."""
    twin = load_workload("example:digits", ModelOptions(batch_size=16)).model
    twin.load_state_dict(session.model.state_dict())
    twin.double()
    names, params = zip(*twin.named_parameters(), strict=True)
    grads = []
    for j in range(k):
        x, y = session.workload.make_batch(session.micro_drawn + j)
        grads.append(torch.autograd.grad(nn.functional.cross_entropy(twin(x.double()), y), params))
    per = {}
    for i, name in enumerate(names):
        g = torch.stack([grads[j][i] for j in range(k)])
        per[name] = (float(g.pow(2).flatten(1).sum(1).mean()), float(g.mean(0).pow(2).sum()), g)
    return per


def test_the_sessions_noise_scale_equals_float64_from_each_micro_batch():
    session = digits()
    stack = SessionStack.on(session)
    noise = SessionNoise.on(session, stack)
    for _ in range(STEPS):
        ref = reference(session, K)
        got = session.step().noise
        assert got is noise.latest and (got.parts, got.batch, got.divisor) == (K, 16, K)
        per = {n: [got.per[c][i] for c in ("small", "big", "g_sq", "trace", "snr")]
               for i, n in enumerate(got.names)}
        assert set(per) == set(ref)
        for name, (small, big, g) in ref.items():
            b_small, b_big = 16, 16 * K
            g_sq = (b_big * big - b_small * small) / (b_big - b_small)
            trace = (small - big) / (1 / b_small - 1 / b_big)
            assert per[name][0] == pytest.approx(small, rel=2e-5)
            assert per[name][1] == pytest.approx(big, rel=2e-5)
            assert per[name][2] == pytest.approx(g_sq, rel=1e-4, abs=1e-9)
            assert per[name][3] == pytest.approx(trace, rel=2e-5)
            variance = float((g - g.mean(0)).pow(2).sum()) / (K - 1)  # the SNR's definition
            assert per[name][4] == pytest.approx(
                (float(g.mean(0).pow(2).sum()) - variance / K) / variance, rel=1e-4, abs=1e-9)
        small = math.fsum(s for s, _, _ in ref.values())
        big = math.fsum(v for _, v, _ in ref.values())
        g_sq = (16 * K * big - 16 * small) / (16 * K - 16)
        trace = (small - big) / (1 / 16 - 1 / (16 * K))
        assert got.whole.trace == pytest.approx(trace, rel=2e-5)
        assert got.whole.b_simple == pytest.approx(trace / g_sq, rel=1e-4)
    assert got.smoothed.low < got.smoothed.b_simple < got.smoothed.high  # the band, from step 2


def test_steps_of_one_micro_batch_have_no_noise_scale_and_the_capture_comes_and_goes():
    session = digits(1)
    stack = SessionStack.on(session)
    noise = SessionNoise.on(session, stack)
    assert session.step().noise is None and noise.watch is None
    session.config.accumulate = 2  # between steps, as the app's job sets it
    result = session.step()
    assert result.noise is not None and result.noise.parts == 2
    assert result.batch == {"make_batch": [1, 2]}
    session.config.accumulate = 1
    assert session.step().noise is None and noise.watch is None
    assert not any(p._backward_hooks for p in session.model.parameters())  # hooks taken off


def test_run_accumulate_prints_the_noise_scale_of_each_step(run_cli):
    code, out, err = run_cli("run", "--steps", 3, "--accumulate", K, "--batch-size", 16,
                             "--device", "cpu")
    assert code == 0, err
    session = digits()  # the same session in-process: the figures the lines must give
    stack = SessionStack.on(session)
    SessionNoise.on(session, stack)
    steps = [session.step().noise for _ in range(3)]
    assert "; 4 micro-batches a step" in out.splitlines()[0]
    lines = [line.strip() for line in out.splitlines() if line.startswith("  noise scale:")]
    assert len(lines) == 3
    for line, got in zip(lines, steps, strict=True):
        assert line.startswith(f"noise scale: {K} micro-batches of 16: B_simple "
                               f"{number(got.whole.b_simple)} this step, smoothed "
                               f"{number(got.smoothed.b_simple)}")
    assert f"±1 s.e. {number(got.smoothed.low)}..{number(got.smoothed.high)}" in lines[-1]
    assert "lowest SNR modules: " in out.splitlines()[-1]


@pytest.mark.parametrize("bad", ["0", "x", "5000"])
def test_run_refuses_a_bad_accumulate_in_one_line(run_cli, bad):
    code, out, err = run_cli("run", "--accumulate", bad)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "argument --accumulate:" in err


def test_a_new_optimizer_in_the_app_keeps_the_micro_batches_and_one_capture():
    from gradexplorer.gui.training.live_session import give_cores_back, open_live_session, reconfigure

    live = open_live_session("example:digits", ModelOptions(batch_size=8),
                             SessionConfig("cpu", accumulate=3))
    try:
        assert live.session.step().noise.parts == 3
        hooks = [len(p._backward_hooks or {}) for p in live.session.model.parameters()]
        new = reconfigure(live, optimizer="adam")
        result = new.session.step()
        assert result.batch == {"make_batch": [3, 4, 5]}  # the data goes on where it was
        assert result.noise.parts == 3 and result.noise.step == 2
        assert [len(p._backward_hooks or {}) for p in new.session.model.parameters()] == hooks
    finally:
        live.hooks.detach_all()
        give_cores_back(None)
