"""The autograd graph behind a loss, as a plain ``networkx.DiGraph``.

Nodes are the loss's ``grad_fn`` and everything reachable through ``next_functions``,
walked iteratively (no recursion limit). Edges point from a node to its next function
(loss → parameters) and carry the input ``slot``. Node ids are integers in discovery
order, so the same model gives the same ids every time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx
import torch
from torch import nn

from gradexplorer.core.gc_pause import gc_paused
from gradexplorer.core.graph.attribution import ROOT, ModuleAttribution, compiled, parameter_names
from gradexplorer.core.graph.source_lines import annotate_sources
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.training_state import preserved_state

if TYPE_CHECKING:
    from gradexplorer.core.session.engine import TrainingSession

KINDS = ("loss", "op", "param", "hook", "other")
HOOK_NODE_NAMES = frozenset({"BackwardHookFunctionBackward"})
_OP_NAME = re.compile(r"Backward\d*$")
_DTYPE_NAMES = {d: str(d).removeprefix("torch.") for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool)}
_SKIPPED_SAVED = ("_sym_sizes", "_sym_strides", "_sym_argsize_dim")


@dataclass(frozen=True)
class OpType:
    """What every grad_fn of one Python type shares: name, kind, saved-tensor attributes."""

    name: str
    kind: str
    saved_attrs: tuple[tuple[str, str], ...]  # (attribute, key in the node's ``saved``)
    has_metadata: bool  # exposes ``_input_metadata`` (torch >= 2.1)


def op_type(fn) -> OpType:
    """Describe the type of autograd node ``fn`` (computed once per type)."""
    name = fn.name().rpartition("::")[2]
    if name == "AccumulateGrad":
        kind = "param"
    elif name in HOOK_NODE_NAMES:
        kind = "hook"
    elif _OP_NAME.search(name):
        kind = "op"
    else:
        kind = "other"
    attrs = tuple((a, a.removeprefix("_saved_")) for a in dir(fn) if _holds_tensors(fn, a))
    return OpType(name, kind, attrs, hasattr(fn, "_input_metadata"))


def _holds_tensors(fn, attr: str) -> bool:
    if not (attr.startswith("_saved_") or attr == "saved_tensors") or attr.endswith(_SKIPPED_SAVED):
        return False
    try:
        value = getattr(fn, attr)
    except Exception:  # noqa: BLE001 - freed buffers, unsupported types
        return attr == "saved_tensors"
    if value is None or isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list)) and all(
        v is None or isinstance(v, torch.Tensor) for v in value
    ) and (len(value) > 0 or attr == "saved_tensors")


def saved_shapes(fn, attrs: tuple[tuple[str, str], ...]) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors ``fn`` saved for backward, keyed by attribute without ``_saved_``."""
    out: dict[str, tuple[int, ...]] = {}
    for attr, key in attrs:
        try:
            value = getattr(fn, attr)
        except Exception:  # noqa: BLE001 - released after backward
            continue
        if isinstance(value, torch.Tensor):
            out[key] = tuple(value.shape)
        elif isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                if isinstance(v, torch.Tensor):
                    out[f"{key}[{i}]"] = tuple(v.shape)
    return out


def walk_grad_fns(root) -> tuple[list, list[tuple[int, int, int]]]:
    """Every node reachable from ``root`` (depth-first discovery order) and (src, dst, slot) edges."""
    index = {root: 0}
    order = [root]
    edges: list[tuple[int, int, int]] = []
    stack = [root]
    while stack:
        fn = stack.pop()
        src = index[fn]
        new = []
        for slot, (nf, _) in enumerate(fn.next_functions):
            if nf is None:
                continue
            dst = index.get(nf)
            if dst is None:
                dst = index[nf] = len(order)
                order.append(nf)
                new.append(nf)
            edges.append((src, dst, slot))
        stack.extend(reversed(new))  # explore slot 0's inputs first
    return order, edges


def extract_graph(
    loss: torch.Tensor,
    model: nn.Module | None = None,
    attribution: ModuleAttribution | None = None,
    *,
    saved: bool = True,
    shapes: bool = True,
) -> nx.DiGraph:
    """The backward graph of ``loss``; ``model`` names parameters, ``attribution`` names modules.

    Node attributes: ``name``, ``kind`` (loss/op/param/hook/other), ``module`` (dotted path,
    "" for the root or unknown), ``param`` (dotted name or None), ``shape`` and ``dtype`` (a
    leaf's tensor; for an op its forward output, i.e. the gradient it receives; None with
    ``shapes=False``), ``saved`` (attribute → shape of each saved tensor; empty with
    ``saved=False``); where ``attribution`` noted source lines (``sources=True``), each op's
    ``source`` (``path:line``), ``code`` (that line) and ``function`` (leaves, hook nodes, ops
    made by gradexplorer's own code: none).
    Graph attributes: ``root`` (the loss node), ``module_types`` (path → class name).
    """
    root = getattr(loss, "grad_fn", None) if isinstance(loss, torch.Tensor) else loss
    if root is None:
        raise UserError("the loss has no grad_fn: it does not depend on anything that requires grad")
    if model is None and attribution is not None:
        model = attribution.model
    with gc_paused():  # building ~10^5 small objects; the cyclic collector only slows that down
        fns, edges = walk_grad_fns(root)
        G = nx.DiGraph(root=0, module_types=_module_types(model, attribution))
        if attribution is not None:
            names = attribution.parameter_names
        else:
            names = parameter_names(model) if model is not None else {}
        ops, seqs = _add_nodes(G, fns, names, saved, shapes)
        if attribution is not None:
            _attribute(G._node, ops, seqs, attribution)
            if attribution.sources is not None:
                annotate_sources(G._node, ops, seqs, attribution.sources)
        _add_edges(G, edges)
    G.nodes[0]["kind"] = "loss"
    return G


def _add_nodes(G: nx.DiGraph, fns: list, param_names: dict[int, str], saved: bool,
               shapes: bool) -> tuple[list[int], list[int]]:
    """Add a node per grad_fn; returns the non-leaf nodes and their sequence numbers."""
    types: dict[type, OpType] = {}
    nodes, succ, pred = G._node, G._adj, G._pred  # filled directly: networkx's own layout
    ops: list[int] = []
    seqs: list[int] = []
    for i, fn in enumerate(fns):
        info = types.get(type(fn))
        if info is None:
            info = types[type(fn)] = op_type(fn)
        kind = info.kind
        nodes[i] = attrs = {
            "name": info.name, "kind": kind, "module": ROOT, "param": None, "shape": None,
            "dtype": None, "saved": saved_shapes(fn, info.saved_attrs) if saved and info.saved_attrs else {},
        }
        succ[i] = {}
        pred[i] = {}
        if kind == "param":
            _describe_leaf(fn, attrs, param_names)
            continue
        ops.append(i)
        seqs.append(fn._sequence_nr())
        meta = fn._input_metadata if shapes and info.has_metadata else None
        if meta:  # the op's (first) forward output: the gradient this node receives
            attrs["shape"] = tuple(meta[0].shape)
            dtype = meta[0].dtype
            attrs["dtype"] = _DTYPE_NAMES.get(dtype) or str(dtype).removeprefix("torch.")
    return ops, seqs


def _attribute(nodes: dict, ops: list[int], seqs: list[int], attribution: ModuleAttribution) -> None:
    for i, seq, module in zip(ops, seqs, attribution.modules_of(seqs), strict=True):
        attrs = nodes[i]
        attrs["module"] = attribution.module_of(seq, is_hook=True) if attrs["kind"] == "hook" else module


def _describe_leaf(fn, attrs: dict, param_names: dict[int, str]) -> None:
    var = fn.variable
    attrs["shape"] = tuple(var.shape)
    attrs["dtype"] = _DTYPE_NAMES.get(var.dtype) or str(var.dtype).removeprefix("torch.")
    name = param_names.get(id(var))
    if name is not None:
        attrs["param"] = name
        attrs["module"] = name.rpartition(".")[0]


def _add_edges(G: nx.DiGraph, edges: list[tuple[int, int, int]]) -> None:
    """Fill networkx's adjacency directly: several times faster than add_edges_from."""
    succ, pred = G._adj, G._pred
    for src, dst, slot in edges:
        data = succ[src].get(dst)
        if data is None:
            succ[src][dst] = pred[dst][src] = {"slot": slot}
        else:  # the same function feeds several slots (x * x)
            data["slots"] = (*data.get("slots", (data["slot"],)), slot)
            data["slot"] = min(data["slots"])


def _module_types(model: nn.Module | None, attribution: ModuleAttribution | None) -> dict[str, str]:
    if attribution is not None:
        return dict(attribution.module_types)
    if model is not None:
        return {path: type(m).__name__ for path, m in model.named_modules()}
    return {}


def hide_hook_nodes(G: nx.DiGraph) -> nx.DiGraph:
    """A copy of ``G`` without hook nodes; their inputs connect straight to their outputs."""
    H = G.copy()
    for node in [n for n, kind in G.nodes(data="kind") if kind == "hook"]:
        for u, _, data in H.in_edges(node, data=True):
            for v in H.successors(node):
                if u != v and not H.has_edge(u, v):
                    H.add_edge(u, v, **data)
        H.remove_node(node)
    return H


def trace_backward_graph(session: TrainingSession, step: int | None = None, *,
                         saved: bool = True, sources: bool = True) -> nx.DiGraph:
    """Run the session's forward pass and loss with module attribution; return its graph.

    No backward pass, no optimizer step; buffers (BatchNorm statistics) and random state are
    restored afterwards, so training continues exactly as if this had not run. Call it
    between steps (the app posts it as a job to its training thread), never during one.
    ``sources``: note each op's source line (``source``, ``code``, ``function``); not for a
    compiled model (its ops are compiled nodes, and the noting would break its graph).
    """
    model = session.model
    with preserved_state(model, session.device), \
            ModuleAttribution(model, sources=sources and not compiled(model)) as attribution:
        loss = session.forward_loss(step)
    graph = extract_graph(loss, model, attribution, saved=saved)
    graph.graph["step"] = session.step_count if step is None else step
    return graph


def trace(model: nn.Module, inputs, loss_fn=None, *, saved: bool = True,
          shapes: bool = True, sources: bool = True) -> nx.DiGraph:
    """The attributed backward graph of one forward pass, in one call (torchlens style).

    Runs ``model(inputs)`` (a dict: keyword inputs; a tuple or list: positional ones) with
    module attribution, then ``loss_fn(output)``; without a ``loss_fn``, the loss the model
    reports (``output.loss``, ``output["loss"]``) or the output tensor itself. No backward; the
    model's buffers and the random state are restored, so training goes on as if it had not run.
    Each op carries the source line that made it (``source``, ``code``, ``function``) unless
    ``sources=False``.
    """
    from gradexplorer.core.model.workload import as_model_inputs, call_model, loss_from_output

    if not isinstance(model, nn.Module):
        raise UserError(f"trace needs an nn.Module, got {type(model).__name__}")
    sources = sources and not compiled(model)
    with preserved_state(model), ModuleAttribution(model, sources=sources) as attribution, \
            torch.enable_grad():
        output = call_model(model, as_model_inputs(inputs))
        if loss_fn is not None:
            loss = loss_fn(output)
        else:
            loss = output if isinstance(output, torch.Tensor) else loss_from_output(output)
    if not isinstance(loss, torch.Tensor):
        raise UserError(f"trace: the loss is a {type(loss).__name__}, not a tensor")
    return extract_graph(loss, model, attribution, saved=saved, shapes=shapes)
