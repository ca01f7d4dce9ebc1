"""Diagnosis on the graph: gradients on every op, where NaN is born, what each op computes."""

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.diagnose.explain import explain_node
from gradexplorer.core.graph.collapse import module_node_id

DATA = Path(__file__).parent / "data"
NAN_MODEL = f"{DATA / 'nan_sqrt_model.py'}:build"
LOG_MODEL = f"{DATA / 'nan_sqrt_model.py'}:build_forward_nan"
RESNET = "example:resnet:width=4,batch=2,size=16"  # BatchNorm buffers


def cpu_session(spec: str) -> gx.TrainingSession:
    return gx.TrainingSession(gx.load_workload(spec), gx.session.SessionConfig(device="cpu"))


def float64_norm(t: torch.Tensor) -> float:
    return math.sqrt(float(t.detach().double().square().sum()))


def test_lenet_every_op_traced_with_exact_figures():
    session = cpu_session("example:lenet")
    G = gx.diagnose.trace_gradients(session)
    assert G.graph["grad_traced"] == G.number_of_nodes() == 26
    assert all("grad_norm" in a and a["grad_finite"] for _, a in G.nodes(data=True))
    assert all(p.grad is None for p in session.model.parameters())  # .grad untouched

    reference = cpu_session("example:lenet")  # an ordinary backward of the same step
    reference.forward_loss().backward()
    grads = dict(reference.model.named_parameters())
    params = {a["param"]: (n, a) for n, a in G.nodes(data=True) if a["kind"] == "param"}
    assert set(params) == set(grads)
    for name, (node, attrs) in params.items():
        g = grads[name].grad
        assert attrs["grad_norm"] == pytest.approx(float64_norm(g), rel=1e-12)
        assert attrs["grad_max"] == float(g.abs().max())
        (edge,) = G.in_edges(node, data=True)  # the gradient flowing into the leaf
        assert edge[2]["grad_norm"] == pytest.approx(float64_norm(g), rel=1e-12)
    # the loss node sends d(loss)/d(output) of fc3: its norm is the norm of fc3's bias gradient
    assert G.nodes[0]["grad_in_norm"] == 1.0
    assert G.nodes[0]["grad_norm"] == pytest.approx(float64_norm(grads["fc3.bias"].grad), rel=1e-12)


def test_tracing_leaves_training_unchanged():
    traced, plain = cpu_session(RESNET), cpu_session(RESNET)
    gx.diagnose.trace_gradients(traced)
    assert [traced.step().loss for _ in range(2)] == [plain.step().loss for _ in range(2)]


class DropoutNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 12)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(12, 3)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.fc(x))))


def dropout_workload() -> gx.session.Workload:
    torch.manual_seed(3)
    x, y = torch.randn(16, 6), torch.randn(16, 3)
    return gx.session.Workload(DropoutNet(), lambda step: (x + step, y), nn.MSELoss(), name="dropout")


def test_replay_with_the_steps_random_state_is_bit_identical():
    """The NaN-origin replay draws the same dropout masks as the step it diagnoses."""
    from gradexplorer.core.model.training_state import rng_snapshot

    session = gx.TrainingSession(dropout_workload(), gx.session.SessionConfig(device="cpu"))
    seen = []

    class Check:
        def __init__(self):
            self.rng = rng_snapshot()

        def after_backward(self, s, step):
            G = gx.diagnose.trace_gradients(s, step, rng_state=self.rng)
            norms = {a["param"]: a["grad_norm"] for _, a in G.nodes(data=True) if a["kind"] == "param"}
            seen.append(all(norms[n] == pytest.approx(float64_norm(p.grad), rel=1e-12)
                            for n, p in s.model.named_parameters()))

        def after_step(self, s, result):
            self.rng = rng_snapshot()

    session.add_observer(Check())
    losses = [session.step().loss for _ in range(3)]
    plain = gx.TrainingSession(dropout_workload(), gx.session.SessionConfig(device="cpu"))
    assert seen == [True, True, True]
    assert losses == [plain.step().loss for _ in range(3)]


def test_nan_origin_is_the_square_root_and_only_it():
    G = gx.diagnose.trace_gradients(cpu_session(NAN_MODEL))
    origin = gx.diagnose.nonfinite_origin(G)
    assert G.nodes[origin]["name"] == "SqrtBackward0" and G.nodes[origin]["module"] == "act"
    assert [n for n, flag in G.nodes(data="nonfinite_origin") if flag] == [origin]
    assert G.nodes[origin]["grad_in_finite"] and not G.nodes[origin]["grad_finite"]
    assert not any(a["grad_finite"] for _, a in G.nodes(data=True) if (a["param"] or "").startswith("fc."))


def test_run_alarm_and_snapshot_name_the_origin(run_cli, tmp_path):
    code, out, err = run_cli("run", "--model", NAN_MODEL, "--steps", "1", "--device", "cpu",
                             "--export", tmp_path)
    assert code == 0, err
    assert "first non-finite gradient: SqrtBackward0 in module act" in out
    manifest = json.loads((tmp_path / "step-000001" / "manifest.json").read_text())
    assert manifest["nonfinite_origin"]["op"] == "SqrtBackward0"
    assert manifest["nonfinite_origin"]["sent_norm"] == "inf"


def test_forward_nan_is_traced_to_the_op_that_made_it(run_cli):
    found = gx.diagnose.diagnose_step(cpu_session(LOG_MODEL))
    assert (found["where"], found["op"], found["module"]) == ("forward", "log", "head")
    code, out, _ = run_cli("run", "--model", LOG_MODEL, "--steps", "2", "--device", "cpu")
    assert code == 0
    assert "first non-finite value in the forward pass: log in module head" in out
    assert "parameters already hold NaN/Inf" in out  # step 2: the update spread it


def test_a_nan_loss_marks_no_backward_node(run_cli, tmp_path):
    G = gx.diagnose.trace_gradients(cpu_session(LOG_MODEL))
    assert math.isnan(G.graph["loss"]) and gx.diagnose.nonfinite_origin(G) is None
    assert not any(flag for _, flag in G.nodes(data="nonfinite_origin"))
    code, out, _ = run_cli("graph", "--model", LOG_MODEL, "--trace-grads", "--out", tmp_path / "g.json")
    assert code == 0 and "first non-finite value in the forward pass: log in module head" in out
    assert "first non-finite gradient" not in out


def test_healthy_run_says_nothing_about_origins(run_cli):
    code, out, _ = run_cli("run", "--model", "example:mlp", "--steps", "2", "--device", "cpu")
    assert code == 0 and "non-finite" not in out


def test_graph_export_carries_traced_gradients_and_origin(run_cli, tmp_path):
    path = tmp_path / "g.json"
    code, out, err = run_cli("graph", "--model", NAN_MODEL, "--trace-grads", "--out", path)
    assert code == 0, err
    assert "first non-finite gradient: SqrtBackward0 in module act" in out
    data = json.loads(path.read_text())  # valid JSON: non-finite figures are strings
    assert all("grad_norm" in n and n["explanation"] for n in data["nodes"])
    assert [n["name"] for n in data["nodes"] if n.get("nonfinite_origin")] == ["SqrtBackward0"]
    assert all("grad_norm" in e for e in data["edges"])
    svg = tmp_path / "g.svg"
    assert run_cli("graph", "--model", "example:lenet", "--trace-grads", "--out", svg)[0] == 0
    text = svg.read_text()
    assert text.count("gradient out ‖g‖") == 26 and "grad_mat2" in text


def test_graph_names_a_hidden_origin_and_explains_collapsed_modules(run_cli, tmp_path):
    hook = f"blocks.10=file:{DATA / 'nan_hook.py'}:divide_by_zero"
    code, out, err = run_cli("graph", "--model", "example:deep:blocks=20", "--hook", hook, "--trace-grads",
                             "--hide-hooks", "--collapse", "1", "--out", tmp_path / "g.json")
    assert code == 0, err
    assert "first non-finite gradient: BackwardHookFunctionBackward in module blocks.10" in out
    nodes = json.loads((tmp_path / "g.json").read_text())["nodes"]
    assert all(n["explanation"] for n in nodes)
    assert any("folded into one" in n["explanation"] for n in nodes if n["kind"] == "module")


def gpt2_graph():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 50, (2, 8))
    return gx.diagnose.explain_graph(gx.graph.extract_graph(model(ids, labels=ids).loss, model))


def test_gpt2_every_op_has_its_own_explanation():
    G = gpt2_graph()
    names = {a["name"] for _, a in G.nodes(data=True)}
    assert {"EmbeddingBackward0", "NativeLayerNormBackward0", "TanhBackward0", "BmmBackward0",
            "LogSoftmaxBackward0", "ViewBackward0", "SplitBackward0"} <= names
    assert any("Softmax" in n for n in names)
    for _, attrs in G.nodes(data=True):
        assert attrs["explanation"] and "no op-specific text" not in attrs["explanation"], attrs["name"]
    qkv = next(a for _, a in G.nodes(data=True)
               if a["name"] == "AddmmBackward0" and a["saved"]["mat2"] == (16, 48))
    assert "grad_mat1 16×16 = grad_output 16×48 · mat2ᵀ" in qkv["explanation"]
    assert "grad_bias 48" in qkv["explanation"] and "mat1 16×16" in qkv["explanation"]
    embed = next(a for _, a in G.nodes(data=True) if a["name"] == "EmbeddingBackward0"
                 and "50×16" in a["explanation"])
    assert "scatter-add" in embed["explanation"] and "indices 2×8" in embed["explanation"]


def test_unknown_op_gets_an_honest_generic_text():
    x = torch.randn(5, requires_grad=True)
    G = gx.graph.extract_graph(torch.cumsum(x, 0).sum())
    cumsum = next(n for n, a in G.nodes(data=True) if a["name"].startswith("Cumsum"))
    assert "no op-specific text" in explain_node(G, cumsum)


def ab_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("step ")]


def test_ab_scale_one_is_bit_identical(run_cli):
    ab = gx.session.ABRun(dropout_workload, gx.session.SessionConfig(device="cpu"), "out", "scale:1.0")
    results = list(ab.run(3))
    assert all(r.identical and r.divergence == 0.0 and r.grad_cosine == 1.0 for r in results)
    code, out, _ = run_cli("run", "--model", "example:lenet", "--ab", "fc1=scale:1.0", "--steps", "2")
    assert code == 0
    assert all("divergence 0  grad-cos 1  (bit-identical)" in line for line in ab_lines(out))


def test_ab_scale_half_diverges(run_cli):
    ab = gx.session.ABRun(dropout_workload, gx.session.SessionConfig(device="cpu"), "out", "scale:0.5")
    results = list(ab.run(3))
    assert results[0].plain.loss == results[0].hooked.loss  # same start, same batch
    assert 0 < results[0].divergence < results[1].divergence < results[2].divergence
    assert all(not r.identical and r.grad_cosine < 1 for r in results)
    code, out, _ = run_cli("run", "--model", "example:lenet", "--ab", "fc1=scale:0.5", "--steps", "2")
    assert code == 0 and all("bit-identical" not in line for line in ab_lines(out))


def test_ab_arms_are_each_observed_by_a_session_stack():
    """Both arms assembled like every session (core/stack/assembly.py): one SessionStack each,
    the hooked arm's holding the hook registry, which observes nothing by itself."""
    from gradexplorer.core.stack.assembly import SessionStack

    ab = gx.session.ABRun(dropout_workload, gx.session.SessionConfig(device="cpu"), "out", "scale:0.5")
    plain, hooked = ab.plain.observers, ab.hooked.observers
    assert [type(o) for o in plain] == [SessionStack] and plain[0].hooks is None
    assert [type(o) for o in hooked] == [SessionStack] and hooked[0].hooks is ab.hooks
    step = ab.step()
    assert [h["module"] for h in step.hooked.hooks] == ["out"] and step.plain.hooks is None


def test_ab_bad_module_is_one_line(run_cli):
    code, _, err = run_cli("run", "--model", "example:lenet", "--ab", "nope=scale:0.5", "--steps", "1")
    assert code == 2 and err.count("\n") == 1 and "no module 'nope'" in err


def test_collapsed_modules_carry_their_largest_traced_gradient():
    """A folded module is tinted by its operations' largest gradient, and marked non-finite as
    soon as one of them sent NaN/Inf (it is drawn in the alarm colour)."""
    G = gx.diagnose.trace_gradients(cpu_session("example:lenet"))
    H = gx.graph.collapse_by_module(G, depth=1)
    for module in ("fc1", "conv2"):
        members = [a for _, a in G.nodes(data=True) if (a["module"] or "").split(".")[0] == module
                   and a["kind"] != "loss"]
        attrs = H.nodes[module_node_id(module)]
        assert attrs["grad_norm"] == max(a["grad_norm"] for a in members)
        assert attrs["grad_max"] == max(a["grad_max"] for a in members) and attrs["grad_finite"]
    G = gx.diagnose.trace_gradients(cpu_session(NAN_MODEL))
    H = gx.graph.collapse_by_module(G, depth=1)
    folded = [a for _, a in H.nodes(data=True) if a["kind"] == "module"]
    assert any(not a["grad_finite"] for a in folded)
    assert all(a["grad_finite"] == all(m["grad_finite"] for _, m in G.nodes(data=True)
                                       if (m["module"] or "").split(".")[0] == a["module"]
                                       and m["kind"] != "loss") for a in folded)
