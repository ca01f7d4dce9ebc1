"""Gradient flow on every op: autograd node hooks on every node of one step's backward graph.

``trace_gradients(session)`` runs the session's next forward pass and a backward pass with a
hook on every node (``Node.register_hook``), recording what each node received and sent: the
float64 L2 norm, max |g| and whether every value is finite, per input slot too (the gradient that
flows along each edge). Parameters' ``.grad``, buffers, random state and the optimizer are left as
they were (the backward is ``torch.autograd.grad``; buffers and RNG are restored).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import networkx as nx
import torch

from gradexplorer.core.diagnose.eager_replay import eager_replay
from gradexplorer.core.diagnose.kept_grads import DEFAULT_MAX_BYTES, GradientKeeper, KeepPlan
from gradexplorer.core.diagnose.micro_replay import Accumulated, MicroBatches
from gradexplorer.core.diagnose.nonfinite_flow import NonFiniteFlow, following
from gradexplorer.core.graph.attribution import ModuleAttribution
from gradexplorer.core.graph.extract import extract_graph, gc_paused, walk_grad_fns
from gradexplorer.core.model.training_state import KeptBuffers, preserved_state, restore_rng
from gradexplorer.core.session.step_batches import StepDraws
from gradexplorer.core.stats.measured import measured_tensor


@dataclass(frozen=True)
class GradFigures:
    """One gradient tensor (or several together): float64 L2 norm, max |g|, all finite."""

    norm: float
    abs_max: float
    finite: bool

    @staticmethod
    def combine(parts: Sequence[GradFigures]) -> GradFigures:
        """The figures of several tensors taken together."""
        if not parts:
            return GradFigures(0.0, 0.0, True)
        norm = math.sqrt(math.fsum(p.norm * p.norm for p in parts))
        return GradFigures(norm, max(p.abs_max for p in parts), all(p.finite for p in parts))


def _figures(g: torch.Tensor | None) -> torch.Tensor | None:
    """(float64 norm, max |g|) of ``g`` as a tensor on its device (no host sync).

    max |g| is NaN when ``g`` holds a NaN and Inf when it holds an Inf, so it alone says
    whether every value is finite.
    """
    if g is None:
        return None
    if g.is_sparse:
        g = g.coalesce()._values()
    if g.numel() == 0:
        return torch.zeros(2, dtype=torch.float64, device=g.device)
    g = measured_tensor(g)  # a complex one as its real and imaginary parts
    if not g.is_floating_point():
        g = g.double()
    return torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64), g.abs().amax().double()])


class NodeRecorder:
    """Hooks on autograd nodes that keep, per node, the figures of received and sent gradients."""

    def __init__(self, nodes: Sequence[tuple[int, object]]) -> None:
        self.order: list[int] = []  # node ids in execution order
        self._received: dict[int, list] = {}
        self._sent: dict[int, list] = {}
        self._handles = [fn.register_hook(self._hook(i)) for i, fn in nodes]

    def _hook(self, i: int):
        def hook(grad_inputs, grad_outputs):
            self.order.append(i)
            self._received[i] = [_figures(g) for g in grad_outputs]
            self._sent[i] = [_figures(g) for g in grad_inputs]
        return hook

    def record_leaf(self, i: int, grad: torch.Tensor | None) -> None:
        """A leaf (AccumulateGrad) whose gradient came back from ``torch.autograd.grad``."""
        self.order.append(i)
        self._received[i] = [_figures(grad)]
        self._sent[i] = []

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def results(self) -> dict[int, tuple[list[GradFigures | None], list[GradFigures | None]]]:
        """``node -> (received per output, sent per input slot)``, with one host transfer per device."""
        flat = [t for i in self.order for t in (*self._received[i], *self._sent[i]) if t is not None]
        it = iter(to_host(flat))

        def convert(items: list) -> list[GradFigures | None]:
            out = []
            for t in items:
                if t is None:
                    out.append(None)
                else:
                    n, m = next(it)
                    out.append(GradFigures(n, m, math.isfinite(m)))
            return out

        return {i: (convert(self._received[i]), convert(self._sent[i])) for i in self.order}


def to_host(tensors: list[torch.Tensor]) -> list:
    """The values of many small tensors, in order: one stack and transfer per device."""
    out: list = [None] * len(tensors)
    by_device: dict[torch.device, list[int]] = {}
    for k, t in enumerate(tensors):
        by_device.setdefault(t.device, []).append(k)
    for indices in by_device.values():
        for k, values in zip(indices, torch.stack([tensors[k] for k in indices]).cpu().tolist(),
                             strict=True):
            out[k] = values
    return out


def annotate_graph(G: nx.DiGraph, recorder: NodeRecorder) -> int:
    """Put the recorded figures on ``G``'s nodes and edges; returns how many nodes ran.

    Node attributes: ``grad_order`` (execution order), ``grad_norm``, ``grad_max``,
    ``grad_finite`` (the gradients the node sends on; for a leaf, the one it receives), and
    ``grad_in_norm``, ``grad_in_finite`` (what it received). Edges: ``grad_norm``,
    ``grad_max``, ``grad_finite`` of the gradient flowing along them.
    """
    results = recorder.results()
    for order, i in enumerate(recorder.order):
        received, sent = results[i]
        got = GradFigures.combine([r for r in received if r is not None])
        out = GradFigures.combine([s for s in sent if s is not None]) if sent else got
        attrs = G.nodes[i]
        attrs.update(grad_order=order, grad_norm=out.norm, grad_max=out.abs_max,
                     grad_finite=out.finite, grad_in_norm=got.norm, grad_in_finite=got.finite)
        for _, _dst, data in G.out_edges(i, data=True):
            slots = data.get("slots", (data["slot"],))
            parts = [sent[s] for s in slots if s < len(sent) and sent[s] is not None]
            if parts:
                edge = GradFigures.combine(parts)
                data.update(grad_norm=edge.norm, grad_max=edge.abs_max, grad_finite=edge.finite)
    G.graph["grad_traced"] = len(recorder.order)
    return len(recorder.order)


def traced_backward(loss: torch.Tensor, G: nx.DiGraph, flow: NonFiniteFlow | None = None,
                    keeper: GradientKeeper | None = None) -> int:
    """Run the backward of ``loss`` (graph ``G`` extracted from it) with every node recorded.

    Leaves' ``.grad`` are not touched: their gradients are returned by ``torch.autograd.grad``.
    With ``flow`` (that followed the forward) a node that made NaN/Inf of finite gradients
    and saved NaN/Inf from the forward gets ``forward_source``: where that came from.
    ``keeper`` (a ``GradientKeeper``) keeps its chosen nodes' full gradients (``G.graph["kept"]``).
    """
    return TracedBackward(loss, G, flow, keeper).finish()


class TracedBackward:
    """``traced_backward`` in two halves: the backward runs at once; ``finish`` puts the figures
    on the graph, a leaf's gradient taken from ``totals`` (an ``Accumulated``: the step's sum
    over its micro-batches' backwards, run after this one) where given."""

    def __init__(self, loss: torch.Tensor, G: nx.DiGraph, flow: NonFiniteFlow | None = None,
                 keeper: GradientKeeper | None = None) -> None:
        self.G, self.flow, self.keeper = G, flow, keeper
        with gc_paused():
            self.fns, _ = walk_grad_fns(loss.grad_fn)
        self.leaves = [(i, fn.variable) for i, fn in enumerate(self.fns) if G.nodes[i]["kind"] == "param"]
        if keeper is not None:
            keeper.attach(self.fns)  # the size planned and checked before anything runs
        self.recorder = NodeRecorder([(i, fn) for i, fn in enumerate(self.fns)
                                      if G.nodes[i]["kind"] != "param"])
        try:
            self.grads = torch.autograd.grad(loss, [v for _, v in self.leaves], allow_unused=True,
                                             retain_graph=flow is not None)  # saved tensors read
        finally:
            self.recorder.remove()
            if keeper is not None:
                keeper.remove()

    def finish(self, totals=None) -> int:
        """The figures on ``G``; how many nodes ran."""
        G, keeper, flow = self.G, self.keeper, self.flow
        shares = {}  # a leaf's share of the step's gradient: this micro-batch's own
        for (i, variable), g in zip(self.leaves, self.grads, strict=True):
            if totals is not None:
                shares[i] = _figures(g)
                g = totals.of(variable, g)
            self.recorder.record_leaf(i, g)
            if keeper is not None:
                keeper.keep_leaf(i, g)
        if keeper is not None:
            keeper.finish()
        count = annotate_graph(G, self.recorder)
        shown = [i for i, t in shares.items() if t is not None]
        for i, (norm, top) in zip(shown, to_host([shares[i] for i in shown]), strict=True):
            G.nodes[i].update(grad_micro_norm=norm, grad_micro_max=top)
        if flow is not None:
            for i, fn in enumerate(self.fns):
                attrs = G.nodes[i]
                if attrs.get("grad_in_finite") and attrs.get("grad_finite") is False:
                    source = flow.saved_source(fn)
                    if source is not None:
                        attrs["forward_source"] = source
        return count


def trace_gradients(session, step: int | None = None, *, saved: bool = True,
                    rng_state: dict | None = None, buffers: KeptBuffers | None = None,
                    flow: NonFiniteFlow | None = None, keep: Sequence[str | int] | None = None,
                    max_bytes: int = DEFAULT_MAX_BYTES,
                    on_plan: Callable[[KeepPlan], None] | None = None,
                    micro_batch: int | None = None, draws: StepDraws | None = None) -> nx.DiGraph:
    """The backward graph of the session's next step with gradient figures on every node.

    Forward and backward run once more with the session's parameters on the step's own batch
    (``TrainingSession.batch``: the step under way draws it once, as the step itself would,
    and keeps it, so the training step uses the same one and a stream-reading ``make_batch``
    is not advanced twice); buffers and the random state are restored afterwards,
    parameters' ``.grad`` and the optimizer are untouched, so training continues as if this
    had not run. ``rng_state`` (from ``rng_snapshot``) replays a step's forward with the random
    numbers it drew, ``buffers`` (``KeptBuffers``) from the buffers it began with. The replay
    is eager (``eager_replay``: a compiled model's own ops, checkpointed blocks run directly).
    ``flow`` (a ``NonFiniteFlow``) follows NaN/Inf through the forward: it is told the batch,
    the parameters and buffers that hold NaN/Inf, and the loss (``reached``). Graph attribute
    ``loss`` holds the loss.

    A step of ``k`` ≥ 2 micro-batches (``SessionConfig.accumulate``; a past step's as
    ``draws``, ``StepDraws``, kept them) is replayed whole (``micro_replay``): all ``k``
    forwards and backwards in order, each with its batch and random state, each loss ÷ k.
    The graph is micro-batch ``micro_batch``'s (0-based, default the first: graph attributes
    ``micro_batch``, ``micro_batches`` = k, ``loss`` its loss, ``step_loss`` the mean of the
    ``k``; its root the division by k): its op nodes carry what that micro-batch's backward
    sent, its parameters the step's accumulated gradient — the sum of the ``k`` backwards',
    bit for bit the step's ``.grad`` — with that micro-batch's own share as
    ``grad_micro_norm`` / ``grad_micro_max``.

    ``keep`` (module paths, node ids, op names) keeps the full gradients the chosen nodes
    receive and send, bit for bit as autograd hands them over: ``G.graph["kept"]`` (a
    ``KeptGradients``: ``key -> tensor``, ``.write(directory, session)`` a snapshot), each
    chosen node's ``kept`` its keys. Their size is planned before the backward runs
    (``on_plan`` is told it: a ``KeepPlan``); past ``max_bytes`` a UserError, nothing kept.
    """
    step = session.step_count if step is None else step
    parts = MicroBatches(session, step, draws)
    chosen = parts.choose(micro_batch)
    totals = Accumulated(session.model) if parts.count > 1 else None
    losses: list[float] = []
    with step_replay(session, step, rng_state, buffers, first=parts.first()) as (batch, attribution):
        for j in range(parts.count):
            if j:
                batch = parts.enter(j)
            if j != chosen:
                loss = session.forward_loss(step, batch)
                losses.append(float(loss.detach()))
                totals.backward(parts.scaled(loss))
                continue
            if flow is not None:
                flow.where = attribution.current
                flow.mark_held(session.model, batch)
            with following(flow):
                loss = session.forward_loss(step, batch)
            losses.append(float(loss.detach()))
            if flow is not None:
                flow.reached(loss)
            root = parts.scaled(loss)
            G = extract_graph(root, session.model, attribution, saved=saved)
            G.graph.update(step=step, loss=losses[-1])
            keeper = None if not keep else GradientKeeper(G, keep, max_bytes, on_plan)
            traced = TracedBackward(root, G, flow, keeper)
            if totals is not None:
                totals.add([v for _, v in traced.leaves], traced.grads)
        traced.finish(totals)
    if parts.count > 1:
        G.graph.update(micro_batch=chosen, micro_batches=parts.count,
                       step_loss=math.fsum(losses) / parts.count)
    return G


@contextmanager
def step_replay(session, step: int, rng_state: dict | None = None,
                buffers: KeptBuffers | None = None, flow: NonFiniteFlow | None = None,
                first: tuple | None = None) -> Iterator[tuple[tuple, ModuleAttribution]]:
    """Inside, ``step`` is ready to run again; yields its batch (its first micro-batch's:
    ``first`` where given) and the ``ModuleAttribution`` recording its module calls. The batch
    is the step's own (the step under way draws it outside the restored state, as the step
    itself would, and keeps it), the random state ``rng_state``'s, the buffers those
    ``buffers`` kept; the replay is eager (``eager_replay``); ``flow`` is told what holds NaN/Inf
    as it begins. Buffers and the random state are restored on exit."""
    model = session.model
    batch = first
    if batch is None and step == session.step_count:
        batch = session.batch(step)
    with preserved_state(model, session.device), eager_replay(), \
            ModuleAttribution(model, sources=True) as attribution:
        batch = session.batch(step) if batch is None else batch
        if buffers is not None:
            buffers.restore()
        if rng_state is not None:
            restore_rng(rng_state)
        if flow is not None:
            flow.where = attribution.current
            flow.mark_held(model, batch)
        yield batch, attribution
