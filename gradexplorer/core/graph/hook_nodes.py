"""Add or remove one module's backward-hook nodes in a traced graph, without tracing again.

A full backward hook on module ``M`` (``register_full_backward_hook``, or the registry's
``register_all_inputs_hook``, which also wraps the tensors passed by keyword) wraps, on every
call, the tensors ``M`` receives in one ``BackwardHookFunctionBackward`` node (when any of them
requires grad) and the tensors it returns in another. In the backward graph (edges go from
a node to the nodes it sends gradient to):

- output side: every edge from a node outside ``M`` into an op of ``M`` now goes into the
  output hook node, which has one edge into that op;
- input side: every edge from an op of ``M`` to a non-parameter node outside ``M`` now goes
  into the input hook node, which has one edge to that node.

Both hook nodes belong to ``M``. When the graph does not say enough to place them exactly
(``M``'s forward takes more than one argument, as attention's ``(query, key, value)``: the
hook makes equal arguments distinct tensors, and the module may take another path; ``M``
returns or receives several tensors whose order the graph does not record; ``M`` is the whole
model, or runs more than once), the functions return None and the caller traces again.
``tests/test_hook_nodes.py`` checks the result against fresh traces of the examples' modules.
"""

from __future__ import annotations

import inspect

import networkx as nx
from torch import nn

from gradexplorer.core.model.membership import in_module

HOOK_NAME = "BackwardHookFunctionBackward"


def edit_copy(graph: nx.DiGraph) -> nx.DiGraph:
    """A copy whose nodes and edges can be added and removed without touching ``graph``; the
    attribute dicts are shared (never change them in place). Several times faster than
    ``graph.copy()`` on a large graph."""
    result = graph.__class__()
    result.graph.update(graph.graph)
    result._node.update(graph._node)
    result._adj.update({u: dict(nbrs) for u, nbrs in graph._adj.items()})
    result._pred.update({v: dict(nbrs) for v, nbrs in graph._pred.items()})
    return result


def takes_one_argument(module: nn.Module) -> bool:
    """Whether ``module.forward`` has exactly one parameter without a default."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return False
    return sum(p.kind in kinds and p.default is inspect.Parameter.empty for p in params) == 1


def add_hook_nodes(graph: nx.DiGraph, path: str, module: nn.Module) -> nx.DiGraph | None:
    """A copy of ``graph`` with the hook nodes a full backward hook on ``module`` (at
    ``path``) inserts, or None when a trace is needed to know."""
    if not path or not takes_one_argument(module):
        return None
    nodes = graph.nodes
    inside = {n for n, m in nodes(data="module") if in_module(m, path)}
    if any(nodes[n]["kind"] == "hook" and nodes[n]["module"] == path for n in inside):
        return None  # already hooked: leave it to a trace
    out_edges = [(u, v, d) for v in inside for u, _, d in graph.in_edges(v, data=True)
                 if u not in inside]
    in_edges = [(u, v, d) for u in inside if nodes[u]["kind"] != "param"
                for _, v, d in graph.out_edges(u, data=True) if v not in inside]
    outputs = {v for _, v, _ in out_edges}
    inputs = {v for _, v, _ in in_edges}
    if len(outputs) != 1 or len(inputs) > 1:
        return None  # several returned/received tensors (order unknown), or none
    if any(nodes[v]["kind"] == "param" for v in inputs | outputs):
        return None  # a parameter shared with another module: not a tensor passed in or out
    result = edit_copy(graph)
    fresh = max(graph.nodes, default=-1) + 1
    for edges, target in ((out_edges, next(iter(outputs))),
                          (in_edges, next(iter(inputs)) if inputs else None)):
        if target is None:
            continue
        hook = fresh
        fresh += 1
        source = nodes[target]
        result.add_node(hook, name=HOOK_NAME, kind="hook", module=path, param=None,
                        shape=source.get("shape"), dtype=source.get("dtype"), saved={})
        for u, v, data in edges:
            result.remove_edge(u, v)
            result.add_edge(u, hook, **data)
        result.add_edge(hook, target, slot=0)
    return result


def remove_hook_nodes(graph: nx.DiGraph, path: str, module: nn.Module) -> nx.DiGraph | None:
    """A copy of ``graph`` without the hook nodes of ``module`` (at ``path``), or None when a
    trace is needed to know."""
    if not takes_one_argument(module):
        return None
    hooks = [n for n, a in graph.nodes(data=True) if a["kind"] == "hook" and a["module"] == path]
    if not hooks or len(hooks) > 2:
        return None
    result = edit_copy(graph)
    for hook in hooks:
        targets = list(result.successors(hook))
        if len(targets) != 1:
            return None
        for u, _, data in list(result.in_edges(hook, data=True)):
            if result.has_edge(u, targets[0]):
                return None  # the edge existed before the hook: slots would merge
            result.add_edge(u, targets[0], **data)
        result.remove_node(hook)
    return result
