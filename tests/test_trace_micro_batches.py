"""A gradient trace and the NaN-origin finder of a step of k micro-batches (``SessionConfig.
accumulate``, issue 36) replay the step the model took: all k micro-batches in order, each with
its batch and random state and its loss ÷ k (``core/diagnose/micro_replay.py``). The traced graph
is one micro-batch's (``micro_batch``); its parameters carry the step's accumulated gradient, bit
for bit the session's own ``.grad``; a NaN that only the third micro-batch makes is found there."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.diagnose.nan_origin import NonFiniteOrigin, diagnose_step
from gradexplorer.core.diagnose.trace_grads import trace_gradients
from gradexplorer.core.graph.style import grad_text
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.gui.graph.core_api import traced_graph

K = 3


class Net(nn.Module):
    """Dropout (the random stream), BatchNorm (buffers each forward moves) and a norm whose
    square root makes NaN gradients where a sample is all zeros, Inf where one overflows."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bn, self.drop = nn.Linear(6, 12), nn.BatchNorm1d(12), nn.Dropout(0.3)
        self.out = nn.Linear(12, 3)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x):
        h = self.drop(torch.relu(self.bn(self.fc(x))))
        size = torch.sqrt(self.scale * x.pow(2).sum(1, keepdim=True))
        return self.out(h) * size


class Stream:
    """``make_batch`` drawing from the global random stream; micro-batch ``bad`` of the run
    (a ``make_batch`` index) gets a sample of zeros (or ``fill``)."""

    def __init__(self, bad: int | None = None, fill: float = 0.0) -> None:
        self.bad, self.fill = bad, fill

    def __call__(self, index: int):
        x, y = torch.rand(8, 6) + 0.1, torch.randn(8, 3)
        if index == self.bad:
            x[5] = self.fill
        return x, y


def session(k: int = K, stream: Stream | None = None) -> TrainingSession:
    torch.manual_seed(3)
    workload = gx.session.Workload(Net(), stream or Stream(), nn.MSELoss(), name="net")
    return TrainingSession(workload, SessionConfig("cpu", optimizer="adam", accumulate=k))


def param_nodes(G) -> dict[str, int]:
    return {a["param"]: n for n, a in G.nodes(data=True) if a.get("kind") == "param"}


@pytest.mark.parametrize("chosen", [0, 2])
def test_a_traced_accumulated_step_is_the_step_the_model_takes(chosen):
    """The trace's parameters hold the step's accumulated gradient bit for bit, and training
    after the trace is the training without it, bit for bit."""
    traced, plain = session(), session()
    torch.manual_seed(11)
    traced.step()
    torch.manual_seed(11)
    plain.step()
    rng = torch.random.get_rng_state()  # the two sessions share the global stream
    names = [n for n, _ in traced.model.named_parameters()]
    nodes = param_nodes(trace_gradients(traced, micro_batch=chosen))  # a trace twice: no change
    G = trace_gradients(traced, micro_batch=chosen, keep=list(nodes.values()))
    assert (G.graph["micro_batch"], G.graph["micro_batches"]) == (chosen, K)
    result = traced.step()
    torch.random.set_rng_state(rng)
    want = plain.step()
    assert result.loss == want.loss == G.graph["step_loss"]
    kept = G.graph["kept"]
    assert param_nodes(G) == nodes
    assert set(nodes) == set(names)
    for name, p in traced.model.named_parameters():
        q = dict(plain.model.named_parameters())[name]
        assert torch.equal(p, q), name  # the trace changed nothing of the training
        grad = kept.of(nodes[name])
        assert len(grad) == 1 and torch.equal(next(iter(grad.values())), p.grad), name
        attrs = G.nodes[nodes[name]]
        assert attrs["grad_norm"] == float(torch.linalg.vector_norm(p.grad, dtype=torch.float64))
        assert attrs["grad_micro_norm"] < attrs["grad_norm"] * K  # its own share, not the sum
        assert grad_text(attrs) == (f"the step's accumulated gradient ‖g‖ {attrs['grad_norm']:.4g}, "
                                    f"max |g| {attrs['grad_max']:.4g}; this micro-batch's share "
                                    f"‖g‖ {attrs['grad_micro_norm']:.4g}")
    root = next(n for n, a in G.nodes(data=True) if a.get("grad_order") == 0)
    assert G.nodes[root]["name"] == "DivBackward0"  # the step's own loss ÷ k
    assert G.nodes[root]["grad_norm"] == pytest.approx(1 / K, rel=1e-7)


def test_the_traced_micro_batch_is_that_micro_batch_of_the_step():
    """Micro-batch j's graph: its loss is the loss the step's j-th forward computed (dropout's
    mask, BatchNorm's statistics as the forwards before it left them)."""
    s = session()
    losses = []
    for j in range(K):
        G = trace_gradients(s, micro_batch=j)
        losses.append(G.graph["loss"])
    assert len(set(losses)) == K
    result = s.step()
    assert result.loss == math.fsum(losses) / K
    with pytest.raises(UserError, match="micro-batch 4 asked for, but step 2 has 3"):
        trace_gradients(s, micro_batch=3)


@pytest.mark.parametrize(("fill", "op", "where"), [(0.0, "SqrtBackward0", "backward"),
                                                   (1e20, "pow", "forward")])
def test_nan_origin_finds_a_nan_only_the_third_micro_batch_makes(fill, op, where):
    """A sample of zeros in micro-batch 3 of step 2 (``make_batch(5)``): sqrt's gradient at 0 is
    Inf, times 0 NaN, born in the backward; a sample of 1e20: Inf in the forward's square."""
    s = session(stream=Stream(bad=K + 2, fill=fill))
    origin = NonFiniteOrigin(s)
    s.add_observer(origin)
    assert s.step().nonfinite_origin is None
    result = s.step()
    found = result.nonfinite_origin
    assert found["where"] == where and found["micro_batch"] == 2 and found["step"] == 1
    assert found["op"] == op and found["text"].endswith("(in micro-batch 3 of 3)")
    # the app's trace of that bad step, after the session moved on: micro-batch 3, replayed
    s.step()
    G = traced_graph(s, grads=True)
    assert G.graph["replayed"] and (G.graph["step"], G.graph["micro_batch"]) == (1, 2)
    if where == "backward":
        assert G.nodes[G.graph["nonfinite_origin"]]["name"] == op
    else:
        assert G.graph["forward_origin"] == found["text"]


def test_diagnose_step_of_the_step_under_way_and_a_finite_one():
    bad = session(stream=Stream(bad=2))
    found = diagnose_step(bad)
    assert (found["op"], found["micro_batch"]) == ("SqrtBackward0", 2)
    assert diagnose_step(session()) is None


def test_finite_micro_batches_whose_sum_overflows_are_told_so():
    """Each micro-batch's gradient of ``w`` is 2e38 (finite in float32), their sum 4e38 is Inf:
    no op made it, the accumulation did."""
    torch.manual_seed(0)
    model = nn.Linear(1, 1, bias=False)
    workload = gx.session.Workload(model, lambda i: (torch.full((1, 1), 4.0), torch.zeros(1, 1)),
                                   lambda out, y: (out - y).sum() * 1e38, name="big")
    s = TrainingSession(workload, SessionConfig("cpu", accumulate=2))
    s.add_observer(NonFiniteOrigin(s))
    found = s.step().nonfinite_origin
    assert torch.isinf(model.weight.grad).all()
    assert (found["where"], found["micro_batch"], found["parameters"]) == ("accumulation", 1, ["weight"])
    assert found["text"] == ("the accumulated gradient of weight overflowed to Inf as micro-batch 2 "
                             "of 2 was added (each micro-batch's own gradient finite)")
