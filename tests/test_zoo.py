"""The model zoo (tests/zoo_models.py: transformers from tiny configs called with keyword
arguments and ``labels=``, torchvision-shaped CNNs with BatchNorm, depthwise convolutions, SE
and in-place residual adds) through what a user does first: the backward graph with its modules
and a layout, ``watch`` in a hand-written loop, and the gradient on every op. Every figure
against an independent float64 computation."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch
from zoo_models import ZOO

import gradexplorer as gx

ZOO_IDS = [m.name for m in ZOO]


def batch_call(model, batch):
    """One forward as the model's users call it: keywords (and its own loss) or (x, y)."""
    if isinstance(batch, dict):
        return model(**batch).loss
    x, y = batch
    return torch.nn.functional.cross_entropy(model(x), y)


def norm64(tensors) -> float:
    return math.sqrt(sum(float((t.detach().double() ** 2).sum()) for t in tensors))


@pytest.mark.parametrize("zoo", ZOO, ids=ZOO_IDS)
def test_graph_modules_layout_and_every_op_gradient(zoo):
    session = gx.TrainingSession(zoo.build(), gx.session.SessionConfig(device="cpu", optimizer="sgd"))
    session.step()
    G = gx.graph.trace_backward_graph(session)
    roots = [n for n, d in G.nodes(data=True) if d["kind"] == "loss"]
    assert len(roots) == 1 and G.in_degree(roots[0]) == 0  # the loss, at the top
    ops = [d for _, d in G.nodes(data=True) if d["kind"] == "op"]
    attributed = [d for d in ops if d.get("module") is not None]  # "" is the model itself
    assert len(attributed) >= 0.9 * len(ops), f"{len(attributed)} of {len(ops)} ops tied to a module"
    names = dict(session.model.named_modules())
    assert {d["module"] for d in attributed} <= set(names)
    collapsed = gx.graph.collapse_by_module(G, depth=1)
    assert len(collapsed) < len(G) / 3
    assert set(gx.graph.layout_graph(collapsed)) == set(collapsed)

    traced = gx.diagnose.trace_gradients(session)  # the next step, a hook on every node
    result = session.step()  # ... which is that step: the same batch, RNG and weights
    assert math.isfinite(result.loss)
    params = dict(session.model.named_parameters())
    leaves = [d for _, d in traced.nodes(data=True) if d.get("param")]
    assert len({d["param"] for d in leaves}) >= 0.9 * sum(p.grad is not None for p in params.values())
    for d in leaves:
        expected = norm64([params[d["param"]].grad])
        assert d["grad_in_norm"] == pytest.approx(expected, rel=1e-9, abs=1e-30), d["param"]
    assert all(d.get("grad_finite", True) for _, d in traced.nodes(data=True))


@pytest.mark.parametrize("zoo", ZOO, ids=ZOO_IDS)
def test_watch_in_a_hand_written_loop(zoo, tmp_path):
    workload = zoo.build()
    model = workload.model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rec = gx.watch(model, opt, tmp_path / "run")
    for step in range(2):
        opt.zero_grad()
        loss = batch_call(model, workload.make_batch(step))
        loss.backward()
        rec.note_loss(loss)
        grads = {n: p.grad.detach().double().clone() for n, p in model.named_parameters()
                 if p.grad is not None}
        opt.step()
    rec.close()
    run = gx.open_run(tmp_path / "run")
    info = run.step_info(run.steps[-1])
    assert info["grad_norm_accumulated"] == pytest.approx(norm64(grads.values()), rel=1e-12)
    assert info["clip_coef"] == 1.0 and info["loss"] == pytest.approx(loss.detach().item())
    stats = run.stats(run.steps[-1])
    for name, g in grads.items():
        values = g.numpy().ravel()
        assert stats[name].norm == pytest.approx(float(np.sqrt((values ** 2).sum())), rel=1e-12,
                                                 abs=1e-300), name
        assert (stats[name].min, stats[name].max) == (values.min(), values.max()), name
    # the run's graph is the first backward's, its operations in the modules the app's trace of
    # the same call finds: the run opens collapsed as the live model
    graph = nx.node_link_graph(run.graph, edges="edges")
    batch = workload.make_batch(0)
    live = gx.trace(model, batch) if isinstance(batch, dict) else gx.trace(
        model, batch[0], lambda out: torch.nn.functional.cross_entropy(out, batch[1]))
    assert dict(graph.nodes(data="module")) == dict(live.nodes(data="module"))
    assert set(gx.graph.collapse_by_module(graph, 1)) == set(gx.graph.collapse_by_module(live, 1))


def _param_grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _reference_grads(workload, path: str, change) -> dict[str, torch.Tensor]:
    """One backward with ``change(x)`` applied by hand to every tensor input of ``path``
    (positional or keyword) that needs a gradient — what a full backward hook on positional
    inputs would do to grad_input."""
    model = workload.model
    module = model.get_submodule(path)

    def pre(_module, args, kwargs):
        swap = lambda v: change(v) if isinstance(v, torch.Tensor) and v.requires_grad else v  # noqa: E731
        return tuple(swap(a) for a in args), {k: swap(v) for k, v in kwargs.items()}

    handle = module.register_forward_pre_hook(pre, with_kwargs=True)
    try:
        model.zero_grad(set_to_none=True)
        torch.manual_seed(7)
        batch_call(model, workload.make_batch(0)).backward()
        return _param_grads(model)
    finally:
        handle.remove()


def _scaled(x: torch.Tensor) -> torch.Tensor:
    y = x.view_as(x)
    y.register_hook(lambda g: g * 0.5)
    return y


ATTENTION_ZOO = [m for m in ZOO if m.attention]


@pytest.mark.parametrize("action", ["block", "scale:0.5"])
@pytest.mark.parametrize("zoo", ATTENTION_ZOO, ids=[m.name for m in ATTENTION_ZOO])
def test_a_hook_on_an_attention_module_acts_as_on_its_inputs(zoo, action):
    """``block``/``scale`` on an attention module (transformers call it with keywords) change the
    upstream gradients exactly as the same change of its inputs' gradients, written by hand."""
    workload = zoo.build()
    workload.model.train()
    change = (lambda x: x.detach()) if action == "block" else _scaled
    expected = _reference_grads(workload, zoo.attention, change)
    untouched = _reference_grads(workload, zoo.attention, lambda x: x)

    registry = gx.hooks.HookRegistry(workload.model)
    registry.attach(zoo.attention, action)
    try:
        workload.model.zero_grad(set_to_none=True)
        torch.manual_seed(7)
        batch_call(workload.model, workload.make_batch(0)).backward()
        got = _param_grads(workload.model)
    finally:
        registry.detach_all()
    assert set(got) == set(expected)
    changed = [n for n in expected if not torch.equal(expected[n], untouched[n])]
    assert changed, "the reference changed nothing: the attention's inputs carry no gradient?"
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-6, atol=1e-9, msg=name)


@pytest.mark.parametrize("zoo", ATTENTION_ZOO, ids=[m.name for m in ATTENTION_ZOO])
def test_hooks_advice_calls_every_attention_module_safe(zoo):
    """`gradexplorer hooks` (``hookable_modules``) says a hook on the attention acts: its
    keyword input needs a gradient."""
    workload = zoo.build()
    rows = {row.path: row for row in gx.hooks.hookable_modules(workload.model, workload.make_batch(0))}
    assert rows[zoo.attention].safe, rows[zoo.attention].reason
