"""The graph functions of gradexplorer.core this view uses (one place to find them), and the
one trace the app runs on the training thread (``traced_graph``)."""

from gradexplorer.core.diagnose.explain import explain_graph, explain_node
from gradexplorer.core.diagnose.micro_replay import MicroBatches
from gradexplorer.core.diagnose.nan_origin import loss_origin, nonfinite_origin, weights_before
from gradexplorer.core.diagnose.trace_grads import trace_gradients
from gradexplorer.core.graph.collapse import (
    collapse_by_module,
    expansions_to_reveal,
    readable_view,
)
from gradexplorer.core.graph.extract import gc_paused, hide_hook_nodes, trace_backward_graph
from gradexplorer.core.graph.hook_nodes import add_hook_nodes, remove_hook_nodes
from gradexplorer.core.graph.layout.positions import LAYOUTS, layout_graph
from gradexplorer.core.stack.assembly import origin_of

__all__ = ["LAYOUTS", "add_hook_nodes", "collapse_by_module", "expansions_to_reveal", "explain_graph",
           "explain_node", "gc_paused", "hide_hook_nodes", "layout_graph", "nonfinite_origin",
           "readable_view", "remove_hook_nodes", "trace_backward_graph", "trace_gradients", "traced_graph",
           "first_bad_step"]


def first_bad_step(session) -> int | None:
    """The first step of this session whose gradients held NaN/Inf (as the session's
    ``NonFiniteOrigin`` found it), or None: Trace gradients replays that step, where the
    NaN/Inf was born — with its batch, its random numbers and its weights as before its update
    (kept by the finder) — instead of a next step whose weights the bad update already spoilt."""
    origin = origin_of(session)
    return origin.found[0].get("step") if origin is not None and origin.found else None


def traced_graph(session, grads: bool = False, micro_batch: int = 0):
    """The session's next backward graph; with ``grads``, every node's gradient too and the
    NaN/Inf origin marked (or, for a non-finite loss, the forward op that made it in the graph
    attribute ``forward_origin``); after a step with NaN/Inf gradients, that step's replay
    (graph attribute ``replayed``: True). Explanations are written lazily (``explain_node`` on hover
    or selection): ``explain_graph`` costs ~1.3 s on a 12k-node graph, before the first view.
    A step of several micro-batches is replayed whole, its graph micro-batch ``micro_batch``'s
    (0-based; the last where the step has fewer), the bad step's the one its NaN/Inf was born in
    (``trace_gradients``: graph attributes ``micro_batch``, ``micro_batches``)."""
    if grads:
        step = first_bad_step(session)
        origin = origin_of(session)
        replayed = origin.replayed if origin is not None and step is not None else None
        kept = replayed if replayed and replayed[0] == step else None
        draws = origin.replayed_draws if kept else None  # its micro-batches, as it drew them
        if step is not None:
            micro_batch = origin.found[0].get("micro_batch", 0)
        count = MicroBatches(session, session.step_count if step is None else step, draws).count
        # the bad step's own weights (before its update), buffers and random numbers
        with weights_before(session.model, kept, origin.replayed_buffers if kept else None) as rng:
            graph = trace_gradients(session, step, rng_state=rng, draws=draws,
                                    micro_batch=min(max(micro_batch, 0), count - 1))
            graph.graph["replayed"] = step is not None
            nonfinite_origin(graph)
            forward = loss_origin(session, graph, rng, draws)
        if forward is not None:
            graph.graph["forward_origin"] = forward["text"]
    else:
        graph = trace_backward_graph(session)
    return graph
