"""Per-op gradient tensors on demand (issue 34): ``trace_gradients(..., keep=)`` keeps the full
gradients chosen backward nodes receive and send, bit for bit what independent hooks on the same
tensors and nodes see; sized before the backward runs, bounded by ``max_bytes``, written into a
snapshot keyed by node id and op name."""

from __future__ import annotations

import inspect

import pytest
import torch

import gradexplorer as gx
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.examples.lenet import LeNet
from gradexplorer.session import SessionConfig, TrainingSession, load_workload


def lenet_session() -> TrainingSession:
    return TrainingSession(load_workload("example:lenet"), SessionConfig())


class Witness:
    """Independent hooks on a module's forward tensors and on its output's autograd node."""

    def __init__(self, module: torch.nn.Module, output_index: int | None = None) -> None:
        self.seen: dict[str, torch.Tensor | tuple] = {}
        self.node = None
        self.handles = [module.register_forward_hook(self._forward)]
        self.output_index = output_index

    def _forward(self, _module, inputs, output) -> None:
        out = output if self.output_index is None else output[self.output_index]
        self.node = out.grad_fn
        self.handles += [
            out.register_hook(lambda g: self.seen.__setitem__("tensor_out", g.clone())),
            inputs[0].register_hook(lambda g: self.seen.__setitem__("tensor_in", g.clone())),
            out.grad_fn.register_prehook(lambda go: self.seen.__setitem__("prehook", tuple(
                None if g is None else g.clone() for g in go))),
            out.grad_fn.register_hook(lambda gi, go: self.seen.__setitem__("hook", tuple(
                None if g is None else g.clone() for g in gi))),
        ]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def test_kept_lenet_fc1_gradients_equal_independent_hooks_bit_for_bit():
    session = lenet_session()
    witness = Witness(session.model.fc1)
    plans = []
    try:
        G = gx.diagnose.trace_gradients(session, keep=["fc1"], on_plan=plans.append)
    finally:
        witness.remove()
    kept = G.graph["kept"]
    addmm = next(n for n, a in G.nodes(data=True) if a["name"] == "AddmmBackward0" and a["module"] == "fc1")
    assert witness.node.name() == "AddmmBackward0"
    mine = kept.of(addmm)
    assert sorted(mine) == ["grad_input.0", "grad_input.1", "grad_input.2", "grad_output.0"]
    assert torch.equal(mine["grad_output.0"], witness.seen["tensor_out"])
    assert torch.equal(mine["grad_output.0"], witness.seen["prehook"][0])
    assert torch.equal(mine["grad_input.1"], witness.seen["tensor_in"])  # fc1's input x
    for k, g in enumerate(witness.seen["hook"]):
        assert torch.equal(mine[f"grad_input.{k}"], g), k
    # every op of fc1 (its weight's transpose too), and nothing else
    assert {op["op"] for op in kept.ops} == {"AddmmBackward0", "TBackward0"}
    lines, first = inspect.getsourcelines(LeNet.forward)
    line = first + next(i for i, text in enumerate(lines) if "self.fc1(x)" in text)
    assert {(op["module"], op["source"], op["code"]) for op in kept.ops} == {
        ("fc1", f"{inspect.getsourcefile(LeNet)}:{line}", "x = F.relu(self.fc1(x))")}
    assert G.nodes[addmm]["kept"] == [f"node{addmm}.AddmmBackward0.{s}" for s in sorted(mine)]
    # the plan said beforehand exactly what was kept
    assert plans[0].bytes == kept.bytes == sum(t.numel() * 4 for t in kept.values())
    assert plans[0].count == len(kept) == 6
    assert all(p.grad is None for p in session.model.parameters())  # training untouched


def test_keep_by_node_id_op_name_and_submodule():
    session = lenet_session()
    G = gx.diagnose.trace_gradients(session)
    addmm = next(n for n, a in G.nodes(data=True) if a["name"] == "AddmmBackward0" and a["module"] == "fc1")
    leaf = next(n for n, a in G.nodes(data=True) if a.get("param") == "fc1.weight")
    for keep in ([addmm], [f"node{addmm}"], [str(addmm)]):
        kept = gx.diagnose.trace_gradients(session, keep=keep).graph["kept"]
        assert {op["node"] for op in kept.ops} == {addmm}
    G2 = gx.diagnose.trace_gradients(session, keep=["AddmmBackward0", leaf])
    names = {op["op"] for op in G2.graph["kept"].ops}
    assert names == {"AddmmBackward0", "AccumulateGrad"}
    assert len(G2.graph["kept"].ops) == sum(a["name"] == "AddmmBackward0" for _, a in G.nodes(data=True)) + 1
    bias = next(n for n, a in G.nodes(data=True) if a.get("param") == "fc3.bias")
    plans = []
    one = gx.diagnose.trace_gradients(session, keep=[bias], on_plan=plans.append).graph["kept"]
    assert plans[0].text() == "keeping 1 gradient tensor of 1 op: 40 B (limit 1 GB)"
    assert str(one) == "1 gradient tensor of 1 op (40 B)"
    weight = G2.graph["kept"][f"node{leaf}.AccumulateGrad.grad_output.0"]
    assert torch.equal(weight, G2.graph["kept"][f"node{addmm}.AddmmBackward0.grad_input.2"].t())


def test_bad_names_and_the_size_limit_are_one_line_errors():
    session = lenet_session()
    with pytest.raises(UserError, match=r"keep 'fc9'.*did you mean fc3, fc2, fc1\?"):
        gx.diagnose.trace_gradients(session, keep=["fc9"])
    with pytest.raises(UserError, match="has no node 9999"):
        gx.diagnose.trace_gradients(session, keep=["node9999"])
    with pytest.raises(UserError, match=r"would take 579 KB, over the limit of 100 KB"):
        gx.diagnose.trace_gradients(session, keep=["fc1"], max_bytes=100_000)
    G = gx.diagnose.trace_gradients(session, keep=["fc1"], max_bytes=578_560)  # exactly its size
    assert G.graph["kept"].bytes == 578_560


def test_kept_gradients_go_into_a_snapshot_keyed_by_node_and_op(tmp_path):
    from gradexplorer.core.snapshot import read_snapshot

    session = lenet_session()
    G = gx.diagnose.trace_gradients(session, keep=["fc2"])
    kept = G.graph["kept"]
    path = kept.write(tmp_path, session)
    assert path.name == "kept-step-000000"
    snap = read_snapshot(path)
    tensors = snap.extra_tensors()
    assert set(tensors) == {f"hooks/{k}" for k in kept}
    addmm = next(op for op in kept.ops if op["op"] == "AddmmBackward0")
    key = f"node{addmm['node']}.AddmmBackward0.grad_input.2"
    assert f"hooks/{key}" in tensors
    for k, t in kept.items():
        assert torch.equal(tensors[f"hooks/{k}"], t)
    described = [h for h in snap.manifest["hooks"] if h.get("op") == "AddmmBackward0"]
    assert described[0]["module"] == "fc2" and described[0]["code"] == "x = F.relu(self.fc2(x))"


def test_kept_gpt2_attention_gradients_equal_independent_hooks_bit_for_bit():
    pytest.importorskip("transformers")
    from tests.data.gpt2_nan_model import build

    session = TrainingSession(build(nan=False), SessionConfig())
    attn = session.model.transformer.h[0].attn
    witness = Witness(attn.c_proj)  # transformers' Conv1D: an addmm on a view
    try:
        G = gx.diagnose.trace_gradients(session, keep=["transformer.h.0.attn.c_proj",
                                                       "transformer.h.0.attn"])
    finally:
        witness.remove()
    kept = G.graph["kept"]
    view = next(n for n, a in G.nodes(data=True) if a["module"] == "transformer.h.0.attn.c_proj"
                and a["name"] == witness.node.name())
    mine = kept.of(view)
    assert torch.equal(mine["grad_output.0"], witness.seen["tensor_out"])
    assert torch.equal(mine["grad_output.0"], witness.seen["prehook"][0])
    for k, g in enumerate(witness.seen["hook"]):
        assert torch.equal(mine[f"grad_input.{k}"], g), k
    assert any(op["source"].rpartition(":")[0].endswith("modeling_gpt2.py") for op in kept.ops)
    assert len(kept.ops) == sum(1 for _, a in G.nodes(data=True) if a["kind"] != "param"
                                and a["module"].startswith("transformer.h.0.attn"))


def test_cli_keep_prints_the_size_first_writes_the_snapshot_and_refuses_past_the_limit(run_cli, tmp_path):
    import json

    from gradexplorer.core.snapshot import read_snapshot

    code, out, err = run_cli("graph", "--model", "example:lenet", "--keep", "fc1",
                             "--out", tmp_path / "g.json")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "keeping 6 gradient tensors of 2 ops: 579 KB (limit 1 GB)"  # before the rest
    assert f"kept 6 gradient tensors of 2 ops (579 KB) of step 0: {tmp_path / 'kept-step-000000'}" in out
    addmm = next(line for line in lines if "AddmmBackward0 in fc1 at lenet.py:" in line)
    assert addmm.endswith("grad_input.0 120, grad_input.1 1×400, grad_input.2 400×120, grad_output.0 1×120")
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["graph"]["kept"]["bytes"] == 578_560
    node = next(n for n in data["nodes"] if n["name"] == "AddmmBackward0" and n["module"] == "fc1")
    assert node["kept"] == [f"node{node['id']}.AddmmBackward0.{s}" for s in
                            ("grad_input.0", "grad_input.1", "grad_input.2", "grad_output.0")]
    snap = read_snapshot(tmp_path / "kept-step-000000")
    assert set(snap.extra_tensors()) == {f"hooks/{k}" for k in data["graph"]["kept"]["tensors"]}
    code, out, err = run_cli("graph", "--model", "example:lenet", "--keep", "fc1",
                             "--out", tmp_path / "h.json")
    assert code == 2 and "kept-step-000000 already exists" in err and not (tmp_path / "h.json").exists()
    code, out, err = run_cli("graph", "--model", "example:lenet", "--keep", "fc1", "--keep-max-bytes",
                             "500KB", "--keep-dir", tmp_path / "k", "--out", tmp_path / "h.json")
    assert code == 2 and out.startswith("keeping 6 gradient tensors of 2 ops: 579 KB (limit 500 KB)")
    assert err.strip().endswith("the kept gradients would take 579 KB, over the limit of 500 KB: keep "
                                "fewer ops or allow more (max_bytes, --keep-max-bytes)")
    assert not (tmp_path / "k").exists()
    code, _, err = run_cli("graph", "--model", "example:lenet", "--keep-max-bytes", "lots", "--out", "x.json")
    assert code == 2 and "--keep-max-bytes: expected a size such as 500MB or 2GB, got 'lots'" in err


def test_the_apps_plan_from_a_traced_graph_matches_the_kept_size():
    from gradexplorer.core.diagnose.kept_grads import graph_plan
    from gradexplorer.graph import trace_backward_graph

    session = lenet_session()
    G = trace_backward_graph(session)
    for keep in (["fc1"], ["conv2"], ["AddmmBackward0", "node0"]):
        plan = graph_plan(G, keep)
        kept = gx.diagnose.trace_gradients(session, keep=keep).graph["kept"]
        assert plan.bytes == kept.bytes and plan.count == len(kept), keep
        assert sorted(plan.nodes) == sorted(op["node"] for op in kept.ops)


def test_the_hooks_hold_the_limit_too_when_a_plan_could_not_see_a_size(monkeypatch):
    from gradexplorer.core.diagnose import kept_grads

    session = lenet_session()
    monkeypatch.setattr(kept_grads, "planned_tensors", lambda fn: [])  # a size the plan missed
    with pytest.raises(UserError, match="the kept gradients passed the limit of 100 KB"):
        gx.diagnose.trace_gradients(session, keep=["fc1"], max_bytes=100_000)
    monkeypatch.undo()
    G = gx.diagnose.trace_gradients(session, keep=["fc1"])  # no hook of the failed trace left
    assert G.graph["kept"].bytes == 578_560 and G.graph["grad_traced"] == G.number_of_nodes()
    assert all(p.grad is None for p in session.model.parameters())
