"""Every backward op names the line of the user's code that made it (issue 34): a user's
file, an example, transformers' GPT-2; in the graph's attributes, its JSON/GraphML export,
``graph --trace-grads`` and the NaN-origin line."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import networkx as nx
import pytest
import torch

import gradexplorer as gx
from gradexplorer.graph import trace_backward_graph
from gradexplorer.session import SessionConfig, TrainingSession, load_workload

DATA = Path(__file__).parent / "data"
USER_MODEL = '''\
import torch
from torch import nn

from gradexplorer.session import Workload


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 5)
        self.fc2 = nn.Linear(5, 3)

    def forward(self, x):
        x = self.fc1(x)
        x = torch.tanh(x)
        return self.fc2(x)


def build():
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(4, 3)
    return Workload(model=Net(), make_batch=lambda step: (x, y), loss_fn=nn.MSELoss())
'''


def line_of(text: str, code: str) -> int:
    """The 1-based number of the one line of ``text`` that is ``code`` (stripped)."""
    found = [i for i, line in enumerate(text.splitlines(), 1) if line.strip() == code]
    assert len(found) == 1, found
    return found[0]


def op(G: nx.DiGraph, name: str, module: str) -> dict:
    return next(a for _, a in G.nodes(data=True) if a["name"] == name and a["module"] == module)


@pytest.fixture
def user_file(tmp_path) -> Path:
    path = tmp_path / "my_model.py"
    path.write_text(USER_MODEL)
    return path


def test_a_user_files_ops_name_its_lines(user_file):
    G = trace_backward_graph(TrainingSession(load_workload(f"{user_file}:build"), SessionConfig()))
    fc1 = op(G, "AddmmBackward0", "fc1")
    assert fc1["source"] == f"{user_file}:{line_of(USER_MODEL, 'x = self.fc1(x)')}"
    assert (fc1["code"], fc1["function"]) == ("x = self.fc1(x)", "forward")
    assert op(G, "TanhBackward0", "")["source"] == f"{user_file}:{line_of(USER_MODEL, 'x = torch.tanh(x)')}"
    assert op(G, "TBackward0", "fc2")["code"] == "return self.fc2(x)"
    for _, attrs in G.nodes(data=True):  # leaves have none; the loss gradexplorer's own
        assert ("source" in attrs) == (attrs["kind"] == "op"), attrs  # loss_fn computed: none
    untraced = trace_backward_graph(TrainingSession(load_workload(f"{user_file}:build"),
                                                       SessionConfig()), sources=False)
    assert not any("source" in a for _, a in untraced.nodes(data=True))


def test_example_lenet_fc1_names_the_examples_file_and_line():
    from gradexplorer.core.model.examples.lenet import LeNet

    G = trace_backward_graph(TrainingSession(load_workload("example:lenet"), SessionConfig()))
    lines, first = inspect.getsourcelines(LeNet.forward)
    expected = first + next(i for i, line in enumerate(lines) if "self.fc1(x)" in line)
    fc1 = op(G, "AddmmBackward0", "fc1")
    assert fc1["source"] == f"{inspect.getsourcefile(LeNet)}:{expected}"
    assert fc1["code"] == "x = F.relu(self.fc1(x))"


def test_gpt2_attention_ops_point_into_modeling_gpt2():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gpt2 import modeling_gpt2

    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 50, (2, 8))
    G = gx.trace(model, {"input_ids": ids, "labels": ids})
    lines, first = inspect.getsourcelines(modeling_gpt2.GPT2Attention.forward)
    split = first + next(i for i, line in enumerate(lines) if "self.c_attn(hidden_states).split" in line)
    node = op(G, "SplitBackward0", "transformer.h.0.attn")
    assert node["source"] == f"{inspect.getsourcefile(modeling_gpt2)}:{split}"
    assert node["code"].endswith("= self.c_attn(hidden_states).split(self.split_size, dim=2)")
    assert node["function"] == "forward"
    attention = [a for _, a in G.nodes(data=True) if a["module"] == "transformer.h.0.attn"]
    assert sum(Path(a["source"].rpartition(":")[0]).name == "modeling_gpt2.py" for a in attention) >= 6
    assert all("source" in a for _, a in G.nodes(data=True) if a["kind"] in ("op", "loss"))


def test_exports_carry_source_and_code(run_cli, user_file, tmp_path):
    expected = f"{user_file}:{line_of(USER_MODEL, 'x = self.fc1(x)')}"
    for name in ("g.json", "g.graphml"):
        code, _, err = run_cli("graph", "--model", f"{user_file}:build", "--out", tmp_path / name)
        assert code == 0, err
    nodes = json.loads((tmp_path / "g.json").read_text())["nodes"]
    assert {(n["source"], n["code"]) for n in nodes if n["name"] == "AddmmBackward0"
            and n["module"] == "fc1"} == {(expected, "x = self.fc1(x)")}
    assert all(n.get("source") and n.get("code") for n in nodes if n["kind"] == "op")
    H = nx.read_graphml(tmp_path / "g.graphml")
    fc1 = [d for _, d in H.nodes(data=True) if d["name"] == "AddmmBackward0" and d["module"] == "fc1"]
    assert [(d["source"], d["code"], d["function"]) for d in fc1] == [
        (expected, "x = self.fc1(x)", "forward")]


def test_trace_grads_and_the_nan_origin_name_the_line(run_cli, tmp_path):
    from tests.data.nan_sqrt_model import RootAct

    lines, first = inspect.getsourcelines(RootAct.forward)
    line = first + next(i for i, text in enumerate(lines) if "torch.sqrt" in text)
    code, out, err = run_cli("graph", "--model", f"{DATA / 'nan_sqrt_model.py'}:build", "--trace-grads",
                             "--out", tmp_path / "g.json")
    assert code == 0, err
    assert f"first non-finite gradient: SqrtBackward0 in module act at nan_sqrt_model.py:{line}" in out
    nodes = json.loads((tmp_path / "g.json").read_text())["nodes"]
    sqrt = next(n for n in nodes if n["name"] == "SqrtBackward0")
    assert sqrt["source"] == f"{DATA / 'nan_sqrt_model.py'}:{line}"
    assert sqrt["code"] == "return torch.sqrt(x * (x > 0))" and "grad_norm" in sqrt


def test_a_compiled_models_plain_trace_notes_no_lines_and_breaks_nothing():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh()), backend="aot_eager")
    x = torch.randn(4, 6)
    model(x).sum().backward()
    counters.clear()
    G = gx.trace(model, (x,), loss_fn=lambda out: out.sum())
    assert not counters["graph_break"] and not counters["stats"]  # no break, nothing compiled again
    assert "CompiledFunctionBackward" in {a["name"] for _, a in G.nodes(data=True)}
    assert not any("source" in a for _, a in G.nodes(data=True) if a["name"] != "SumBackward0")


def test_an_importable_modules_factory_names_transformers_and_its_own_lines():
    """``package.module:factory`` (any importable module): a tiny GPT-2 from a GPT2Config called
    with ``input_ids=`` and ``labels=``; its attention ops name transformers' modeling file, the
    module the factory put in names the factory's file."""
    pytest.importorskip("transformers")
    from transformers.models.gpt2 import modeling_gpt2

    from tests.data import gpt2_nan_model

    G = trace_backward_graph(TrainingSession(load_workload("tests.data.gpt2_nan_model:build"),
                                             SessionConfig()))
    lines, first = inspect.getsourcelines(modeling_gpt2.GPT2Attention.forward)
    split = first + next(i for i, line in enumerate(lines) if "self.c_attn(hidden_states).split" in line)
    assert op(G, "SplitBackward0", "transformer.h.0.attn")["source"] == \
        f"{inspect.getsourcefile(modeling_gpt2)}:{split}"
    log = op(G, "LogBackward0", "transformer.h.1.mlp.act")
    assert log["source"] == f"{inspect.getsourcefile(gpt2_nan_model)}:" \
        f"{line_of(inspect.getsource(gpt2_nan_model), 'return torch.log(x)')}"
    assert log["code"] == "return torch.log(x)"


def test_a_compiled_models_traced_gradients_name_its_python_lines(user_file, tmp_path):
    """A workload whose model is ``torch.compile``d: the gradient trace replays it eagerly, so
    its ops name the lines of its Python code (modules under ``_orig_mod.``), and keeps them."""
    compiled = tmp_path / "compiled_model.py"
    compiled.write_text(USER_MODEL.replace("return Workload(model=Net(),",
                                           "return Workload(model=torch.compile(Net(), backend='eager'),"))
    G = gx.diagnose.trace_gradients(TrainingSession(load_workload(f"{compiled}:build"), SessionConfig()),
                                    keep=["_orig_mod.fc1"])
    fc1 = op(G, "AddmmBackward0", "_orig_mod.fc1")
    assert (fc1["source"], fc1["code"]) == (f"{compiled}:{line_of(USER_MODEL, 'x = self.fc1(x)')}",
                                            "x = self.fc1(x)")
    assert op(G, "TanhBackward0", "_orig_mod")["source"] == \
        f"{compiled}:{line_of(USER_MODEL, 'x = torch.tanh(x)')}"
    assert {o["source"] for o in G.graph["kept"].ops} == {fc1["source"]}


def test_the_json_exports_leaves_and_hook_nodes_have_no_source(run_cli, user_file, tmp_path):
    code, _, err = run_cli("graph", "--model", f"{user_file}:build", "--hook", "fc1=observe",
                           "--out", tmp_path / "g.json")
    assert code == 0, err
    nodes = json.loads((tmp_path / "g.json").read_text())["nodes"]
    kinds = {n["kind"] for n in nodes}
    assert {"op", "param", "hook"} <= kinds, kinds
    for n in nodes:
        assert ("source" in n and "code" in n) == (n["kind"] == "op"), n


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3))
        self.head = torch.nn.Linear(3, 1)

    def forward(self, x):
        y = x @ self.w
        z = torch.tanh(y) @ self.w
        return self.head(z)


def test_where_used_names_the_first_line_using_a_parameter_or_calling_a_module():
    from gradexplorer.core.graph.style import where_used

    G = gx.trace(Tied(), (torch.randn(2, 3),), loss_fn=lambda out: out.sum())
    text = inspect.getsource(Tied.forward)
    y, z = line_of(text, "y = x @ self.w"), line_of(text, "z = torch.tanh(y) @ self.w")
    first = inspect.getsourcelines(Tied.forward)[1] - 1
    name = Path(__file__).name
    assert where_used(G, param="w") == f"{name}:{first + y} y = x @ self.w (+1 more line)"
    leaf = next(n for n, a in G.nodes(data=True) if a.get("param") == "w")
    assert {G.nodes[u]["source"].rpartition(":")[2] for u in G.predecessors(leaf)} == \
        {str(first + y), str(first + z)}
    assert where_used(G, param="head.weight") == where_used(G, module="head") == \
        f"{name}:{first + line_of(text, 'return self.head(z)')} return self.head(z)"
    assert where_used(G, module="nothing") == "" and where_used(None, param="w") == ""
