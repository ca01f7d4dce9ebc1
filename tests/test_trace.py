"""``gx.trace(model, inputs, loss_fn=None)``: the attributed backward graph in one call."""

import pytest
import torch
from torch import nn

import gradexplorer as gx


def model_and_inputs():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 3))
    return model.train(), torch.randn(8, 4)


def test_trace_names_modules_and_parameters_and_leaves_the_model_as_it_was():
    model, x = model_and_inputs()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    target = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    G = gx.trace(model, x, lambda out: nn.functional.cross_entropy(out, target))
    params = {d["param"]: d["module"] for _, d in G.nodes(data=True) if d["kind"] == "param"}
    assert params == {"0.weight": "0", "0.bias": "0", "1.weight": "1", "1.bias": "1",
                      "3.weight": "3", "3.bias": "3"}
    ops = {d["module"] for _, d in G.nodes(data=True) if d["kind"] == "op"}
    assert {"0", "1", "2", "3"} <= ops  # every module's ops attributed to it
    assert G.nodes[G.graph["root"]]["kind"] == "loss"
    assert G.graph["module_types"]["1"] == "BatchNorm1d"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # buffers back
    assert all(p.grad is None for p in model.parameters())  # no backward ran
    # the same graph as extract_graph over a forward the caller attributes by hand
    from gradexplorer.core.graph.attribution import ModuleAttribution

    with ModuleAttribution(model) as attribution:
        loss = nn.functional.cross_entropy(model(x), target)
    H = gx.graph.extract_graph(loss, model, attribution)
    assert sorted(G.nodes(data="name")) == sorted(H.nodes(data="name"))
    assert sorted(G.nodes(data="module")) == sorted(H.nodes(data="module"))


def test_trace_without_a_loss_fn_takes_the_reported_loss_or_the_output():
    model, x = model_and_inputs()
    G = gx.trace(model, x)  # the output tensor itself
    assert G.nodes[G.graph["root"]]["module"] == "3"

    class Reports(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(4, 1)

        def forward(self, x, labels):
            return {"loss": nn.functional.mse_loss(self.net(x), labels)}

    G = gx.trace(Reports(), {"x": x, "labels": torch.zeros(8, 1)})
    assert {d["param"] for _, d in G.nodes(data=True) if d["kind"] == "param"} == {
        "net.weight", "net.bias"}
    with pytest.raises(gx.UserError, match="nn.Module"):
        gx.trace(lambda t: t, x)
