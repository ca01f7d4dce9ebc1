"""The words of a NaN/Inf finding (``nan_origin``): where it was born, as one line a person
reads and as JSON-able fields (``where``, ``op``, ``module``, ``text``, …)."""

from __future__ import annotations

from typing import Any

import networkx as nx

from gradexplorer.core.diagnose.eager_replay import user_path
from gradexplorer.core.diagnose.nonfinite_flow import NonFiniteFlow, Source
from gradexplorer.core.graph.style import short_source


def where_text(module: str) -> str:
    """``in module fc`` (the user's path: without ``_orig_mod``), or ``at the model's top level``."""
    return f"in module {user_path(module)}" if module and user_path(module) else "at the model's top level"


def origin_text(attrs: dict[str, Any]) -> str:
    """``SqrtBackward0 in module fc at model.py:17`` (or ``at the model's top level``; the
    source line where the graph trace noted one)."""
    text = f"{attrs['name']} {where_text(attrs.get('module') or '')}"
    return f"{text} at {short_source(attrs['source'])}" if attrs.get("source") else text


def describe_backward_origin(G: nx.DiGraph, node: int) -> dict[str, Any]:
    """A JSON-able account of the origin node: op, module, what it received and sent."""
    attrs = G.nodes[node]
    return {
        "where": "backward", "node": node, "op": attrs["name"],
        "module": user_path(attrs.get("module") or ""),
        "source": attrs.get("source"), "code": attrs.get("code"),
        "text": f"first non-finite gradient: {origin_text(attrs)}",
        "received_norm": attrs["grad_in_norm"], "sent_norm": attrs["grad_norm"],
        "inputs": [G.nodes[v]["name"] for v in G.successors(node)],
        "outputs": [G.nodes[u]["name"] for u in G.predecessors(node)],
        "step": G.graph.get("step"),
    }


def earlier(step: int) -> str:
    return "an earlier step's update" if step else "held before the first step: the model as built"


def describe_source(source: Source, step: int, through: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-able account of where the forward's NaN/Inf came from: that which reached the
    loss, or (``through``: the backward origin that saved it) that which reached the gradients
    only."""
    found: dict[str, Any] = {"where": "forward", "op": "", "module": "", "step": step}
    reached = "the gradients (not the loss)" if through else "the loss"
    if source.kind == "op":
        entered = " (from a NaN/Inf constant)" if source.constant else ""
        found.update(op=source.name, module=user_path(source.module),
                     text=f"first non-finite value in the forward pass: {source.name} "
                          f"{where_text(source.module)}{entered}")
    elif source.kind == "data":
        found.update(where="data", data=source.name,
                     text=f"the batch holds NaN/Inf and it reaches {reached}: {source.name} "
                          f"({source.detail})")
    elif source.kind == "parameter":
        found.update(where="parameters", module=source.name.rpartition(".")[0],
                     parameters=[source.name],
                     text=f"{reached} went non-finite because parameters already hold NaN/Inf: "
                          f"{source.name} ({source.detail}; {earlier(step)})")
    else:
        found.update(where="buffers", module=source.name.rpartition(".")[0], buffers=[source.name],
                     text=f"{reached} went non-finite because buffer {source.name} held NaN/Inf "
                          f"as the step began ({source.detail}; "
                          f"{earlier(step).replace('update', 'forward')})")
    if through is not None:
        found.update(node=through["node"], backward_op=through["op"], backward_module=through["module"])
        if source.kind == "op":
            found["text"] += (f"; it reached the gradients, not the loss: {through['op']} "
                              f"{where_text(through['module'])} saved it")
    return found


def undecided(step: int, why: str) -> dict[str, Any]:
    """The one line for a non-finite step whose origin could not be told, and why."""
    return {"where": "undecided", "op": "", "module": "", "step": step,
            "text": f"could not tell where the NaN/Inf was born: {why}"}


def untraced_loss(flow: NonFiniteFlow, step: int) -> dict[str, Any]:
    births = ", ".join(f"{b.name} {where_text(b.module)}" for b in flow.births[:3])
    seen = (f"; NaN/Inf the replay saw made, none of which reached the loss: {births}"
            if births else "")
    return undecided(step, "the replayed loss is non-finite, but no op the replay watched made its "
                           f"NaN/Inf (written outside torch's ops?){seen}")
