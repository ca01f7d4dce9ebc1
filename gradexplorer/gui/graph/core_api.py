"""The graph functions of gradexplorer.core this view uses (one place to find them)."""

from gradexplorer.core.graph.collapse import (
    collapse_by_module,
    expansions_to_reveal,
    readable_view,
)
from gradexplorer.core.graph.extract import hide_hook_nodes, trace_backward_graph
from gradexplorer.core.graph.layout.positions import LAYOUTS, layout_graph

__all__ = ["LAYOUTS", "collapse_by_module", "expansions_to_reveal", "hide_hook_nodes",
           "layout_graph", "readable_view", "trace_backward_graph"]
