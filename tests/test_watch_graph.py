"""The graph a run stores is its first backward's, from the loss, with every operation attributed
to its module as the app's own trace attributes it: a run opens collapsed as the live model."""

import json
import sqlite3

import networkx as nx
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.graph.collapse import readable_view
from gradexplorer.core.graph.export.files import node_link_json
from gradexplorer.core.runs.schema import database_path
from gradexplorer.gui.runs.run_view import recorded_graph
from tests.gui_helpers import TIMEOUT_MS


def tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def watch_gpt2(run_dir, steps=2):
    """A tiny GPT-2 trained ``steps`` steps under watch; returns the model, its inputs and the
    first step's loss."""
    model = tiny_gpt2()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    losses = []
    with gx.watch(model, opt, run_dir, bins=8):
        for _ in range(steps):
            opt.zero_grad()
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            losses.append(loss)
            opt.step()
    return model, ids, losses[0]


def node_modules(G):
    return {n: a["module"] for n, a in G.nodes(data=True)}


def test_a_watched_gpt2_runs_graph_is_the_loss_with_its_modules(tmp_path):
    model, ids, loss = watch_gpt2(tmp_path / "run")
    with gx.open_run(tmp_path / "run") as run:
        G = recorded_graph(run)
    live = gx.trace(model, {"input_ids": ids, "labels": ids})  # the app's attributed trace
    assert G.graph["root"] == 0 and G.nodes[0]["kind"] == "loss"
    assert G.nodes[0]["name"] == loss.grad_fn.name().rpartition("::")[2]
    assert G.number_of_nodes() == nx.number_of_nodes(live) == len(nx.descendants(G, 0)) + 1
    ops = [n for n, kind in G.nodes(data="kind") if kind == "op"]
    attributed = [n for n in ops if G.nodes[n]["module"]]
    assert len(attributed) > 0.9 * len(ops)
    assert node_modules(G) == node_modules(live)
    assert G.graph["module_types"] == live.graph["module_types"]
    for depth in (None, 1, 2, 3, 4):  # every collapse the graph panel offers, and its first view
        ours, theirs = gx.graph.collapse_by_module(G, depth), gx.graph.collapse_by_module(live, depth)
        assert set(ours.nodes) == set(theirs.nodes) and set(ours.edges) == set(theirs.edges)
    first, live_first = readable_view(G), readable_view(live)
    assert first.graph["collapsed"] == live_first.graph["collapsed"]
    assert set(first.nodes) == set(live_first.nodes)
    blocks = {a["module"] for _, a in first.nodes(data=True) if a["kind"] == "module"}
    assert {"transformer.h.0", "transformer.h.1"} <= {".".join(m.split(".")[:3]) for m in blocks}
    assert first.number_of_nodes() < G.number_of_nodes()  # collapsing folds, never adds


def test_the_root_is_the_loss_computed_outside_the_model_after_a_no_grad_forward(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 6), torch.randn(16, 3)
    with gx.watch(model, opt, tmp_path / "run"):
        with torch.no_grad():
            model(x)  # an evaluation first: no graph there, nor any note kept
        for _ in range(2):
            opt.zero_grad()
            loss = 2 * nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
    with gx.open_run(tmp_path / "run") as run:
        G = recorded_graph(run)
    live = gx.trace(model, x, lambda out: 2 * nn.functional.mse_loss(out, y))
    assert G.nodes[0]["name"] == "MulBackward0" and G.nodes[0]["kind"] == "loss"
    assert [G.nodes[n]["name"] for n in G.successors(0)] == ["MseLossBackward0"]
    assert node_modules(G) == node_modules(live)
    assert {G.nodes[n]["module"] for n, k in G.nodes(data="kind") if k == "op"} >= {"0", "1", "2"}


def test_a_run_without_module_attribution_still_opens(qtbot, make_window, tmp_path):
    """A run written before the attribution (its graph from the model's output, operations in no
    module) opens as it did: every operation, parameters folded only."""
    model, ids, _ = watch_gpt2(tmp_path / "run", steps=1)
    from gradexplorer.core.graph.extract import extract_graph

    old = extract_graph(model(input_ids=ids).logits, model, saved=False)  # the former capture
    with sqlite3.connect(database_path(tmp_path / "run")) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'graph'",
                   (json.dumps(node_link_json(old, {})),))
    db.close()
    with gx.open_run(tmp_path / "run") as run:
        G = recorded_graph(run)
    assert node_modules(G) == node_modules(old) and G.nodes[0]["name"] == old.nodes[0]["name"]
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    assert window.graph_panel.graph.number_of_nodes() == old.number_of_nodes()


def test_the_app_opens_a_watched_run_collapsed_as_the_live_model(qtbot, make_window, tmp_path):
    model, ids, _ = watch_gpt2(tmp_path / "run")
    live = readable_view(gx.trace(model, {"input_ids": ids, "labels": ids}))
    window = make_window()
    assert window.file_actions.open_run(str(tmp_path / "run")) is not None
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    shown = window.graph_panel.drawing.graph
    assert shown.graph["collapsed"]["depth"] == live.graph["collapsed"]["depth"]
    assert set(shown.nodes) == set(live.nodes)
    assert "module:transformer.h.0.attn" in shown or "module:transformer.h.0" in shown


class Checkpointed(nn.Module):
    """A model whose every layer is recomputed in a reentrant backward nested in the user's."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.net, x, use_reentrant=True)


def test_the_root_is_the_users_loss_when_the_parameters_are_reached_in_a_nested_backward(tmp_path):
    torch.manual_seed(0)
    model = Checkpointed()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 6, requires_grad=True), torch.randn(16, 3)
    with gx.watch(model, opt, tmp_path / "run"):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    with gx.open_run(tmp_path / "run") as run:
        G = recorded_graph(run)
    assert [G.nodes[n]["name"] for n in nx.dfs_preorder_nodes(G, 0)][:2] == [
        "MseLossBackward0", "CheckpointFunctionBackward"]


def test_backward_root_is_found_from_another_thread_as_from_a_devices_worker():
    """A CUDA backward runs the hooks of device operations on a worker thread while the thread
    that called backward waits in torch's entry point: the root is read from that thread."""
    import threading

    from gradexplorer.core.watch.graph_capture import backward_root

    x = torch.randn(4, requires_grad=True)
    loss = (x.sin() * 3).sum()
    inside, found = threading.Event(), []

    def worker():
        inside.wait()
        found.append(backward_root())

    def hook(grad):  # runs inside the backward; the worker looks while it waits here
        inside.set()
        thread.join()

    thread = threading.Thread(target=worker)
    thread.start()
    x.register_hook(hook)
    loss.backward()
    assert found == [loss.grad_fn] and backward_root() is None  # outside any backward: None


def test_a_compiled_models_modules_are_not_hooked(tmp_path):
    """Hooks on a compiled model's modules would break its compiled graph (a warning, and a
    compile again once removed): its run stores the loss's graph without modules."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 6), torch.randn(16, 3)
    counters.clear()
    with gx.watch(compiled, opt, tmp_path / "run"):
        for _ in range(2):
            opt.zero_grad()
            nn.functional.mse_loss(compiled(x), y).backward()
            opt.step()
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 1
    with gx.open_run(tmp_path / "run") as run:
        G = nx.node_link_graph(run.graph, edges="edges")
    assert [G.nodes[n]["name"] for n in nx.dfs_preorder_nodes(G, 0)][:2] == [
        "MseLossBackward0", "CompiledFunctionBackward"]


def module_pre_hooks(model):
    return sum(len(m._forward_pre_hooks) for m in model.modules())


@pytest.mark.parametrize("backward", [True, False])
def test_the_modules_are_hooked_for_the_first_step_only(tmp_path, backward):
    """Every module's hooks note the first step's calls and come off at its end, whether a
    backward came or not: later steps cost nothing, and no notes pile up."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x = torch.randn(16, 6)
    with gx.watch(model, run_dir=tmp_path / "run") as rec:
        assert module_pre_hooks(model) == 4  # the model and its three layers
        loss = model(x).square().mean()
        if backward:
            loss.backward()
        rec.step()
        assert module_pre_hooks(model) == 0
        assert [len(p._post_accumulate_grad_hooks) for p in model.parameters()] == [1] * 4  # the probe's
        model(x).square().mean().backward()
        rec.step()
    with gx.open_run(tmp_path / "run") as run:
        assert (run.graph is not None) == backward
