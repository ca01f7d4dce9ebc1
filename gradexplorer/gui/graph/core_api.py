"""The graph functions of gradexplorer.core this view uses (one place to find them)."""

from gradexplorer.core.graph.collapse import collapse_by_module
from gradexplorer.core.graph.extract import hide_hook_nodes, trace_backward_graph
from gradexplorer.core.graph.layout.positions import LAYOUTS, layout_graph

__all__ = ["LAYOUTS", "collapse_by_module", "hide_hook_nodes", "layout_graph",
           "trace_backward_graph"]
