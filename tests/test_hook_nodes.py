"""Hook nodes added or removed without a trace match what a fresh trace gives."""

from __future__ import annotations

import networkx as nx
import pytest

from gradexplorer import TrainingSession, load_workload
from gradexplorer.core.graph.hook_nodes import add_hook_nodes, remove_hook_nodes
from gradexplorer.core.messages.errors import UserError
from gradexplorer.graph import trace_backward_graph
from gradexplorer.hooks import HookRegistry
from gradexplorer.session import SessionConfig

pytestmark = pytest.mark.filterwarnings("ignore:The hashes produced for directed graphs")


def fingerprint(graph: nx.DiGraph) -> str:
    """A Weisfeiler-Lehman hash over op name, kind, module, shape and edge slots."""
    labelled = nx.DiGraph()
    for node, a in graph.nodes(data=True):
        labelled.add_node(node, label=f"{a['name']}|{a['kind']}|{a['module']}|{a['shape']}")
    for u, v, d in graph.edges(data=True):
        labelled.add_edge(u, v, slot=str(d.get("slots", d["slot"])))
    return nx.weisfeiler_lehman_graph_hash(labelled, node_attr="label", edge_attr="slot",
                                           iterations=6)


@pytest.mark.parametrize("spec", ["example:lenet", "example:mlp", "example:resnet",
                                  "example:transformer", "example:deep:blocks=3"])
def test_modules_match_a_fresh_trace(spec):
    session = TrainingSession(load_workload(spec), SessionConfig(device="cpu"))
    registry = HookRegistry(session.model)
    registry.install(session)
    bare = trace_backward_graph(session)
    bare_print = fingerprint(bare)
    placed = 0
    modules = [(p, m) for p, m in session.model.named_modules() if p]
    for path, module in modules[:: max(1, len(modules) // 8)]:  # up to ~8 of every kind
        try:
            registry.attach(path, "observe")
        except UserError:  # not hookable (a ModuleList, or a module the registry refuses)
            continue
        hooked = trace_backward_graph(session)
        registry.detach(path)
        added = add_hook_nodes(bare, path, module)
        if added is not None:  # None: the caller traces again, which is always right
            placed += 1
            assert fingerprint(added) == fingerprint(hooked), path
        removed = remove_hook_nodes(hooked, path, module)
        if removed is not None:
            assert fingerprint(removed) == bare_print, path
    assert placed >= 2
    assert fingerprint(bare) == bare_print  # the traced graph itself is never changed
