"""The backward graph a run stores: its first backward's, from that backward's root (the loss),
with every operation attributed to the module that ran it, as the app's own trace attributes it.

From the moment ``watch`` opens the run until the end of the first step, the app's
``ModuleAttribution`` notes every module call (a forward pre- and post-hook on each module: a
few Python calls a module call, on the first step only; none kept under ``no_grad``, where no
autograd node is made). When the first backward reaches one of the model's parameters, its root
is read once, from the frame of torch's backward entry point on the thread that called it: the
tensor of ``loss.backward()``, ``scaler.scale(loss).backward()``, Lightning's or the Trainer's
own, whichever module (or none) computed it. At the end of that step (the recorder's optimizer
step, or ``rec.step()``: no backward is running then, not even a reentrant one nested in
another) the hooks come off, whether a backward came or not, and the graph is built by
``extract_graph`` with those notes, as ``trace_backward_graph`` builds the app's (without saved
tensors' shapes). Nothing the user's step computes is touched: the hooks only note sequence
numbers, and the graph is read after the backward, from the nodes it left.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradexplorer.core.graph.attribution import ModuleAttribution, compiled

# torch's one entry to the engine for backward() and grad(), and the local naming its roots
_ENTRY = getattr(torch.autograd.graph, "_engine_run_backward", None)
ENTRY_CODE, ENTRY_ROOTS = (_ENTRY.__code__, "t_outputs") if _ENTRY is not None else (
    torch.autograd.backward.__code__, "tensors")  # torch < 2.3: the engine called from here


def _first_node(roots: Any):
    """The autograd node of the first root (a tensor or a GradientEdge) that has one."""
    for root in roots if isinstance(roots, (tuple, list)) else (roots,):
        node = root.grad_fn if isinstance(root, torch.Tensor) else getattr(root, "node", None)
        if node is not None:
            return node
    return None


def _outermost_entry(frame):
    """The outermost frame of torch's backward entry point on a thread's stack, or None (a
    reentrant backward, ``checkpoint(..., use_reentrant=True)``, runs inside the user's)."""
    found = None
    while frame is not None:
        if frame.f_code is ENTRY_CODE:
            found = frame
        frame = frame.f_back
    return found


def backward_root():
    """The autograd node the backward under way began from, or None when it cannot be told.

    Called from an autograd hook: on the thread that called ``backward`` (CPU work) or on a
    device's worker thread while that thread waits in torch's entry point (then the one other
    thread inside it).
    """
    frames = sys._current_frames()
    here = threading.get_ident()
    entry = _outermost_entry(frames.get(here))
    if entry is None:
        others = [e for ident, top in frames.items() if ident != here
                  and (e := _outermost_entry(top)) is not None]
        entry = others[0] if len(others) == 1 else None
    return None if entry is None else _first_node(entry.f_locals.get(ENTRY_ROOTS))


class GraphCapture:
    """Notes module calls and reads the root of the first backward that reaches ``model``'s
    parameters; ``settle()`` at the first step's end removes the hooks and calls ``on_graph``
    with that backward's graph (node-link data), if one came; ``remove()`` settles. A compiled
    model's modules are not hooked (``compiled``): its graph is the loss's, without modules.
    A monitor: nothing here ever raises into the user's step."""

    def __init__(self, model: nn.Module, on_graph: Callable[[dict], Any]) -> None:
        # what ``settle`` needs, imported here (at ``watch``, before the loop): imported at the
        # first step's end they were most of its cost above a later step's (networkx's ~300
        # modules: ~150 ms of its 200, bench/first_step.py --modes rundir)
        import gradexplorer.core.graph.export.files  # noqa: F401
        import gradexplorer.core.graph.extract  # noqa: F401

        self.model = model
        self._on_graph = on_graph
        self._root = None
        self._reached = self._settled = False  # a parameter reached; the hooks off
        self._attribution: ModuleAttribution | None = None if compiled(model) else \
            ModuleAttribution(model).__enter__()
        self._handles = [p.register_post_accumulate_grad_hook(self._on_parameter)
                         for p in model.parameters() if p.requires_grad]

    def _on_parameter(self, _param) -> None:
        if not self._reached:
            self._reached = True
            try:
                self._root = backward_root()
            except Exception:  # noqa: BLE001 - the graph is a nicety; never break the user's step
                self._root = None

    def settle(self) -> None:
        """The first step is over (no backward running, even a reentrant one): remove the hooks,
        build the first backward's graph from the nodes it left, and write it."""
        if self._settled:
            return
        root, attribution = self._root, self._attribution
        self._root, self._attribution, self._settled = None, None, True
        if attribution is not None:
            attribution.__exit__(None, None, None)
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if root is None:
            return
        try:
            from gradexplorer.core.graph.export.files import node_link_json
            from gradexplorer.core.graph.extract import extract_graph

            graph = extract_graph(root, self.model, attribution, saved=False)
            self._on_graph(node_link_json(graph, {}))
        except Exception:  # noqa: BLE001 - the graph is a nicety; never break the user's step
            return

    remove = settle  # what the recorder calls on every part it closes
