"""The graph functions of gradexplorer.core this view uses (one place to find them)."""

from gradexplorer.core.graph.collapse import (
    collapse_by_module,
    expansions_to_reveal,
    readable_view,
)
from gradexplorer.core.graph.extract import gc_paused, hide_hook_nodes, trace_backward_graph
from gradexplorer.core.graph.hook_nodes import add_hook_nodes, remove_hook_nodes
from gradexplorer.core.graph.layout.positions import LAYOUTS, layout_graph

__all__ = ["LAYOUTS", "add_hook_nodes", "collapse_by_module", "expansions_to_reveal", "gc_paused",
           "hide_hook_nodes", "layout_graph", "readable_view", "remove_hook_nodes",
           "trace_backward_graph"]
