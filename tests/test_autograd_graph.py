"""Backward-graph extraction: the tutorial's LeNet chain, module attribution, hook nodes, depth."""

import sys
import textwrap

import networkx as nx
import pytest
import torch
from torch import nn

from gradexplorer.core.graph.attribution import ModuleAttribution
from gradexplorer.core.graph.extract import extract_graph, hide_hook_nodes, trace_backward_graph
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession


def session_for(spec, **options):
    return TrainingSession(load_workload(spec, ModelOptions(**options)), SessionConfig(device="cpu"))


@pytest.fixture(scope="module")
def lenet_graph():
    session = session_for("example:lenet")
    return session, trace_backward_graph(session)


def names_along_first_slots(G):
    """Op names from the root down, preferring ops over parameter leaves at each step."""
    node, names = G.graph["root"], []
    while True:
        names.append(G.nodes[node]["name"])
        nexts = sorted(G.out_edges(node, data="slot"), key=lambda e: e[2])
        if not nexts:
            return names
        node = next((v for _, v, _ in nexts if G.nodes[v]["kind"] != "param"), nexts[0][1])


def test_lenet_graph_is_the_tutorials_chain(lenet_graph):
    session, G = lenet_graph
    root = G.graph["root"]
    assert G.nodes[root]["name"] == "MseLossBackward0" and G.nodes[root]["kind"] == "loss"
    assert G.in_degree(root) == 0 and nx.is_directed_acyclic_graph(G)
    chain = names_along_first_slots(G)
    assert chain[:2] == ["MseLossBackward0", "AddmmBackward0"]
    assert chain.count("ConvolutionBackward0") == 2 and chain[-1] == "AccumulateGrad"
    leaves = {a["param"]: a for _, a in G.nodes(data=True) if a["name"] == "AccumulateGrad"}
    params = dict(session.model.named_parameters())
    assert set(leaves) == set(params) and len(leaves) == 10
    for name, attrs in leaves.items():
        assert attrs["kind"] == "param"
        assert attrs["shape"] == tuple(params[name].shape) and attrs["dtype"] == "float32"
        assert attrs["module"] == name.rpartition(".")[0]
        assert G.out_degree(next(n for n, a in G.nodes(data=True) if a is attrs)) == 0


def test_every_op_names_its_module(lenet_graph):
    session, G = lenet_graph
    top = next(iter(G.successors(G.graph["root"])))
    assert G.nodes[top]["name"] == "AddmmBackward0" and G.nodes[top]["module"] == "fc3"
    paths = {p for p, _ in session.model.named_modules()}
    by_module = {}
    for _, a in G.nodes(data=True):
        assert a["module"] in paths
        by_module.setdefault(a["module"], set()).add(a["name"])
    assert {"ConvolutionBackward0"} <= by_module["conv1"] and "AddmmBackward0" in by_module["fc1"]
    # F.relu / max_pool2d / flatten run in LeNet.forward itself, the loss outside the model
    assert {"ReluBackward0", "MaxPool2DWithIndicesBackward0", "MseLossBackward0"} <= by_module[""]
    assert "ReluBackward0" not in by_module["fc1"]
    assert G.graph["module_types"]["fc3"] == "Linear"


def test_saved_tensor_shapes_and_slots(lenet_graph):
    _, G = lenet_graph
    top = next(iter(G.successors(G.graph["root"])))
    saved = G.nodes[top]["saved"]
    assert saved["mat1"] == (1, 84) and saved["mat2"] == (84, 10)
    assert G.nodes[top]["shape"] == (1, 10) and G.nodes[top]["dtype"] == "float32"  # fc3's output
    slots = sorted(s for _, _, s in G.out_edges(top, data="slot"))
    assert slots == [0, 1, 2]  # bias, input, weight.t()
    assert extract_graph(session_for("example:lenet").forward_loss(), saved=False).nodes[top]["saved"] == {}


def test_ids_are_stable_between_extractions(lenet_graph):
    session, G = lenet_graph
    again = trace_backward_graph(session)
    assert list(again.nodes(data="name")) == list(G.nodes(data="name"))
    assert sorted(again.edges(data="slot")) == sorted(G.edges(data="slot"))


def test_trace_leaves_training_untouched():
    traced, plain = session_for("example:resnet"), session_for("example:resnet")
    bn = traced.model.stem[1]
    before = (bn.running_mean.clone(), int(bn.num_batches_tracked), torch.random.get_rng_state())
    G = trace_backward_graph(traced)
    assert torch.equal(bn.running_mean, before[0]) and int(bn.num_batches_tracked) == before[1]
    assert torch.equal(torch.random.get_rng_state(), before[2])
    assert traced.step_count == 0 and all(p.grad is None for p in traced.model.parameters())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in traced.model.modules())
    assert any(a["name"] == "NativeBatchNormBackward0" for _, a in G.nodes(data=True))
    assert [r.loss for r in traced.run(2)] == [r.loss for r in plain.run(2)]


USER_MODEL = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)
            self.act = nn.Tanh()

        def forward(self, x):
            return self.act(self.lin(x)) * 2

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.out = nn.Linear(6, 3)

        def forward(self, x):
            h = self.block(x)
            return self.out(self.block(h))  # the same block twice

    def make():
        return Net()
    """
)


def test_user_model_file_is_attributed_the_same_way(tmp_path):
    path = tmp_path / "user_net.py"
    path.write_text(USER_MODEL)
    session = session_for(f"{path}:make", input_shape=(2, 6))
    G = trace_backward_graph(session)
    modules = {}
    for _, a in G.nodes(data=True):
        modules.setdefault(a["name"], []).append(a["module"])
    assert modules["TanhBackward0"] == ["block.act", "block.act"]  # both calls of the shared block
    assert modules["MulBackward0"] == ["block", "block"]  # * 2 runs in Block.forward itself
    assert sorted(modules["AddmmBackward0"]) == ["block.lin", "block.lin", "out"]
    params = {a["param"] for _, a in G.nodes(data=True) if a["kind"] == "param"}
    assert params == {"block.lin.weight", "block.lin.bias", "out.weight", "out.bias"}
    sys.modules.pop("user_net", None)


def test_full_backward_hook_nodes_are_shown_attributed_and_hideable():
    session = session_for("example:lenet")
    handle = session.model.fc2.register_full_backward_hook(lambda module, gin, gout: None)
    try:
        G = trace_backward_graph(session)
    finally:
        handle.remove()
    hooks = [n for n, a in G.nodes(data=True) if a["kind"] == "hook"]
    assert len(hooks) == 2  # one for fc2's input, one for its output
    assert all(G.nodes[n]["name"] == "BackwardHookFunctionBackward" for n in hooks)
    assert all(G.nodes[n]["module"] == "fc2" for n in hooks)
    H = hide_hook_nodes(G)
    assert H.number_of_nodes() == G.number_of_nodes() - 2
    assert all(a["kind"] != "hook" for _, a in H.nodes(data=True))
    root = H.graph["root"]
    reachable = nx.descendants(H, root)
    assert {a["param"] for n, a in H.nodes(data=True) if a["kind"] == "param"} == {
        H.nodes[n]["param"] for n in reachable if H.nodes[n]["kind"] == "param"
    }
    assert G.number_of_nodes() == H.number_of_nodes() + 2  # G itself is unchanged


def test_deep_graph_extracts_without_recursion():
    workload = load_workload("example:deep:blocks=3000", ModelOptions())
    inputs, target = workload.make_batch(0)
    with ModuleAttribution(workload.model) as attribution:
        loss = workload.loss_fn(workload.model(inputs), target)
    limit = sys.getrecursionlimit()
    G = extract_graph(loss, workload.model, attribution)
    assert sys.getrecursionlimit() == limit
    assert G.number_of_nodes() == 6 * 3000 + 9
    deepest = [a for _, a in G.nodes(data=True) if a["module"] == "blocks.0.fc"]
    assert {a["name"] for a in deepest} == {"AddmmBackward0", "TBackward0", "AccumulateGrad"}
    assert nx.dag_longest_path_length(G) > 3 * 3000


def test_loss_without_graph_is_a_user_error():
    with pytest.raises(UserError, match="no grad_fn"):
        extract_graph(torch.tensor(1.0))
    model = nn.Linear(2, 1)
    G = extract_graph(model(torch.ones(1, 2)).sum(), model)
    assert G.nodes[G.graph["root"]]["name"] == "SumBackward0"
    assert all(a["module"] == "" for _, a in G.nodes(data=True) if a["kind"] != "param")
