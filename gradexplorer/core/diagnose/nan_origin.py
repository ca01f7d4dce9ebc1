"""Where NaN/Inf is born, from one eager replay of the step that made it.

The replay (``diagnose_step``) starts from the step's exact state — parameters before the
update, buffers as the step began (``KeptBuffers``), its random numbers, its own batch — and
runs eagerly (``eager_replay``: compiled code and checkpointed blocks op by op). When the loss
is non-finite, ``NonFiniteFlow`` follows NaN/Inf through the forward op by op (inputs seen
before an in-place op runs) and names what the loss's NaN/Inf came from: an op and its module,
the batch, or parameters or buffers holding it already; NaN/Inf that became finite again (a
-inf mask absorbed by softmax, a clamped ``log(0)``) is never the answer. When the loss is
finite the gradients went bad in the backward: on the traced graph (``trace_gradients``) the
origin is the first node whose received gradients were finite while one it sent on was not
and whose NaN/Inf reaches a parameter's gradient.

``NonFiniteOrigin`` is a session observer doing this for ``run`` and the app: a healthy step
costs no check of its own (the monitor's NaN/Inf counts tell) and one copy of the buffers; a
step with NaN/Inf gradients is replayed (buffers and RNG restored afterwards, ``.grad`` and
optimizer untouched). What it cannot decide it says, in one line, with why.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import networkx as nx
import torch
from psygnal import Signal
from torch import nn

from gradexplorer.core.diagnose.eager_replay import user_path
from gradexplorer.core.diagnose.micro_replay import Accumulated, MicroBatches
from gradexplorer.core.diagnose.nan_texts import (
    describe_backward_origin,
    describe_source,
    earlier,
    undecided,
    untraced_loss,
)
from gradexplorer.core.diagnose.nonfinite_flow import NonFiniteFlow
from gradexplorer.core.diagnose.trace_grads import step_replay, to_host, trace_gradients
from gradexplorer.core.messages.errors import emit_guarded, first_line
from gradexplorer.core.model.training_state import KeptBuffers, SavedState, rng_snapshot
from gradexplorer.core.session.step_batches import StepDraws
from gradexplorer.core.stats.measured import measured_tensor


def nonfinite_origin(G: nx.DiGraph) -> int | None:
    """The first traced node whose inputs were finite and whose outputs were not, and whose
    non-finite gradient reaches a parameter's; marks it.

    A node that makes NaN/Inf of finite gradients whose flow then ends (a masked branch's
    gradient zeroed by ``where``) is passed over for the first one whose NaN/Inf flows, along
    non-finite edges, into a parameter's non-finite gradient (where none can be followed so
    far: the first such node). Sets ``nonfinite_origin: True`` on that node only (and removes
    it from any other). None when every gradient is finite, and when the traced loss itself is
    non-finite: then the NaN/Inf was born in the forward pass (``forward_origin``), not in any
    backward node.
    """
    for n in [n for n, flag in G.nodes(data="nonfinite_origin") if flag]:
        del G.nodes[n]["nonfinite_origin"]
    G.graph.pop("nonfinite_origin", None)
    if not math.isfinite(G.graph.get("loss", 0.0)):
        return None
    traced = sorted((a["grad_order"], n) for n, a in G.nodes(data=True) if "grad_order" in a)
    births = [n for _, n in traced if G.nodes[n]["grad_in_finite"] and not G.nodes[n]["grad_finite"]]
    if not births:
        return None
    node = next((n for n in births if _reaches_a_parameter(G, n)), births[0])
    G.nodes[node]["nonfinite_origin"] = True
    G.graph["nonfinite_origin"] = node
    return node


def _reaches_a_parameter(G: nx.DiGraph, node: int) -> bool:
    """Whether ``node``'s non-finite gradient flows, edge by non-finite edge, into a parameter
    whose gradient is non-finite."""
    seen, todo = {node}, [node]
    while todo:
        for _, v, finite in G.out_edges(todo.pop(), data="grad_finite"):
            if finite is False and v not in seen:
                if G.nodes[v].get("kind") == "param" and G.nodes[v].get("grad_finite") is False:
                    return True
                seen.add(v)
                todo.append(v)
    return False


def forward_origin(session, step: int | None = None, rng_state: dict | None = None,
                   buffers: KeptBuffers | None = None, micro_batch: int = 0,
                   draws: StepDraws | None = None) -> dict | None:
    """Replay the forward and loss of ``step`` (eagerly, no gradients; of a step of several
    micro-batches, those before ``micro_batch`` and then it) following NaN/Inf: where the
    NaN/Inf that reached the loss came from; None when the replayed loss is finite."""
    step = session.step_count if step is None else step
    parts = MicroBatches(session, step, draws)
    chosen, flow = parts.choose(micro_batch), NonFiniteFlow()
    with step_replay(session, step, rng_state, buffers, first=parts.first()) as (batch, where), \
            torch.no_grad():
        for j in range(1, chosen + 1):  # the forwards before it: the buffers as they left them
            session.model_loss(*batch)
            batch = parts.enter(j)
        flow.where = where.current
        flow.mark_held(session.model, batch)
        with flow:  # keyword inputs and loss_fn=None as the training step runs them
            loss = session.model_loss(*batch)
        if not isinstance(loss, torch.Tensor):
            return None
        flow.reached(loss)
    return _forward_finding(flow, step)


def _forward_finding(flow: NonFiniteFlow, step: int) -> dict | None:
    if flow.loss_finite:
        return None
    return describe_source(flow.loss_source, step) if flow.loss_source else untraced_loss(flow, step)


def diagnose_step(session, step: int | None = None, rng_state: dict | None = None,
                  buffers: KeptBuffers | None = None, draws: StepDraws | None = None) -> dict | None:
    """Where the NaN/Inf of ``step`` was born, from one eager replay of it (its batch, its
    random state, its buffers as the step began where ``buffers`` kept them): what the loss's
    NaN/Inf came from when the loss is non-finite (an op of the forward, the batch, parameters
    or buffers holding it already), else the first backward node whose NaN/Inf reaches a
    parameter's gradient; None when the replayed step is finite everywhere. A step of several
    micro-batches (``micro_replay``; a past one's as ``draws`` kept them) is told in its first
    micro-batch whose loss or gradients went non-finite (``micro_batch``, its text says which),
    or where finite ones overflowed as they were summed."""
    step = session.step_count if step is None else step
    chosen = 0
    if MicroBatches(session, step, draws).count > 1:
        chosen = first_nonfinite_part(session, step, rng_state, buffers, draws)
        if not isinstance(chosen, int):
            return chosen
    flow = NonFiniteFlow()
    G = trace_gradients(session, step, saved=False, rng_state=rng_state, buffers=buffers,
                        flow=flow, micro_batch=chosen, draws=draws)
    if not math.isfinite(G.graph["loss"]):
        return in_micro_batch(_forward_finding(flow, step), G)
    node = nonfinite_origin(G)
    if node is None:
        return None
    found = describe_backward_origin(G, node)
    source = G.nodes[node].get("forward_source")  # NaN/Inf it saved: born in the forward
    return in_micro_batch(found if source is None else describe_source(source, step, through=found), G)


def in_micro_batch(found: dict | None, G: nx.DiGraph) -> dict | None:
    """``found`` of a traced step of several micro-batches: which one (``micro_batch``, 0-based)."""
    k = G.graph.get("micro_batches")
    if found is not None and k:
        j = G.graph["micro_batch"]
        found.update(micro_batch=j, text=f"{found['text']} (in micro-batch {j + 1} of {k})")
    return found


def first_nonfinite_part(session, step: int, rng_state: dict | None, buffers: KeptBuffers | None,
                         draws: StepDraws | None) -> int | dict | None:
    """The first of ``step``'s micro-batches whose loss or own gradients hold NaN/Inf, from a
    replay of them all (``micro_replay``); a finding where each was finite and their sum
    overflowed; None where the replay stayed finite."""
    parts = MicroBatches(session, step, draws)
    totals = Accumulated(session.model)
    named = [(user_path(n), p) for n, p in session.model.named_parameters()]
    with step_replay(session, step, rng_state, buffers, first=parts.first()) as (batch, _):
        for j in range(parts.count):
            batch = parts.enter(j) if j else batch
            loss = session.forward_loss(step, batch)
            grads = torch.autograd.grad(parts.scaled(loss), totals.params, allow_unused=True)
            if not math.isfinite(float(loss.detach())) or nonfinite_names(
                    [(str(i), g) for i, g in enumerate(grads)]):
                return j
            totals.add(totals.params, grads)
            bad = nonfinite_names([(n, totals.of(p, None)) for n, p in named])
            if bad:
                return {"where": "accumulation", "op": "", "module": bad[0].rpartition(".")[0],
                        "parameters": bad, "step": step, "micro_batch": j,
                        "text": f"the accumulated gradient of {', '.join(bad[:3])} overflowed to "
                                f"Inf as micro-batch {j + 1} of {parts.count} was added (each "
                                "micro-batch's own gradient finite)"}
    return None


def loss_origin(session, G: nx.DiGraph, rng_state: dict | None = None,
                draws: StepDraws | None = None) -> dict | None:
    """For a traced graph whose loss is non-finite: where its NaN/Inf came from (else None)."""
    if math.isfinite(G.graph.get("loss", 0.0)):
        return None
    return in_micro_batch(forward_origin(session, G.graph.get("step"), rng_state,
                                         micro_batch=G.graph.get("micro_batch", 0), draws=draws), G)


def nonfinite_names(named: list[tuple[str, torch.Tensor]]) -> list[str]:
    """Names of the floating tensors holding NaN/Inf (one fused norm, one transfer per device;
    a tensor whose norm is not finite is then checked element-wise, as a float64 norm
    overflows on finite values of 1e155 and more)."""
    named = [(n, measured_tensor(t.coalesce()._values() if t.is_sparse else t)) for n, t in named
             if t is not None and (t.is_floating_point() or t.is_complex()) and t.numel()]
    if not named:
        return []
    norms = to_host(list(torch._foreach_norm([t for _, t in named], 2, dtype=torch.float64)))
    return [name for (name, t), norm in zip(named, norms, strict=True)
            if not math.isfinite(norm) and not bool(torch.isfinite(t).all())]


def _nonfinite_parameters(session, step: int | None) -> dict | None:
    """Parameters that already hold NaN/Inf as the step begins (its forward has not touched them:
    buffers it wrote, BatchNorm statistics, are not counted), or None."""
    step = session.step_count if step is None else step
    bad = [user_path(n) for n in nonfinite_names(list(session.model.named_parameters()))]
    if not bad:
        return None
    more = f", … {len(bad) - 3} more" if len(bad) > 3 else ""
    return {"where": "parameters", "op": "", "module": bad[0].rpartition(".")[0],
            "text": f"the loss is non-finite because parameters already hold NaN/Inf: "
                    f"{', '.join(bad[:3])}{more} ({earlier(step)})",
            "parameters": bad, "step": step}


def unreproduced(session, step: int) -> dict:
    """The one line for a non-finite step whose replay (same parameters, batch and random
    numbers) came out finite: a non-deterministic op, or state the replay cannot restore."""
    bad = [user_path(n) for n in nonfinite_names([(n, p.grad) for n, p in session.model.named_parameters()])]
    more = f", … {len(bad) - 3} more" if len(bad) > 3 else ""
    return {"where": "unreproduced", "op": "", "module": bad[0].rpartition(".")[0] if bad else "",
            "text": f"could not reproduce the non-finite gradients of {', '.join(bad[:3])}{more} "
                    "in a replay of the step with its own batch, buffers and random numbers (the "
                    "replay was finite: a non-deterministic op or state the replay cannot restore)",
            "parameters": bad, "step": step}


def grads_finite(model: nn.Module) -> bool:
    """True when every parameter gradient is finite (one fused norm, one host sync; exact)."""
    return not nonfinite_names([(n, p.grad) for n, p in model.named_parameters()])


class NonFiniteOrigin:
    """Session observer: on a step with NaN/Inf gradients, find where they were born.

    The finding goes to ``result.nonfinite_origin`` (a dict with ``text``, ``op``,
    ``module``...), before the alarm and snapshot observers added after this one read it, and
    by its ``event`` signal as ``("error", module, "step N: text")`` (the signature of
    ``HookRegistry.event``, so the app's event log can take both). A step whose parameters
    already hold NaN/Inf is reported without a replay; only the first bad step of a run is
    replayed. Whatever goes wrong in the replay is the finding's text (``undecided``), never an
    exception out of the step.

    With ``monitor`` (a GradientMonitor measuring the same step, begun before this observer
    runs, as ``SessionStack`` orders them) a healthy step costs nothing more: whether the
    gradients hold NaN/Inf is read from the counts the monitor already took
    (``pending_nonfinite``); without one, or where its measuring failed, the session's own
    global norm of the step tells (``accumulated_norm``; one host sync), else a fused norm.
    The only other work of a healthy step is keeping the model's buffers as the next step
    begins (``KeptBuffers``: one fused copy on the device, none without buffers).
    """

    event = Signal(str, str, str)

    def __init__(self, session, monitor=None) -> None:
        self._rng = rng_snapshot(session.device)  # random state at the start of the next step
        self._buffers = KeptBuffers(session.model)  # the buffers the next step begins with
        self._monitor = monitor
        self._found: dict | None = None
        self.found: list[dict] = []
        # the first replayed step: (step, its parameters before the update, its random state),
        # and its buffers as it began
        self.replayed: tuple[int, list[torch.Tensor], dict | None] | None = None
        self.replayed_buffers: KeptBuffers | None = None
        self.replayed_draws: StepDraws | None = None  # its batches (a StepDraws)

    def gradients_nonfinite(self, session) -> bool:
        """Whether this step's parameter gradients hold NaN/Inf: the monitor's counts where it
        has them, else the session's global norm of the step (``accumulated_norm``), else one
        fused norm of its own."""
        counted = None if self._monitor is None else self._monitor.pending_nonfinite()
        if counted is not None:
            return counted
        norm = session.accumulated_norm
        if norm is not None and math.isfinite(float(norm)):
            return False
        return not grads_finite(session.model)  # exact where a norm overflowed (|g| ~ 1e200)

    def after_backward(self, session, step: int) -> None:
        self._found = None
        if not self.gradients_nonfinite(session):
            return
        try:
            found = self._diagnose(session, step)
        except Exception as exc:  # noqa: BLE001 - a monitor never breaks the loop it watches
            found = undecided(step, f"the replay of the step failed ({first_line(exc)})")
        self._found = found
        self.found.append(found)
        emit_guarded(self.event, "a subscriber of the NaN origins", "error",
                     found.get("module", ""), f"step {step + 1}: {found['text']}")

    def _diagnose(self, session, step: int) -> dict:
        rng = session.forward_rng(step) if hasattr(session, "forward_rng") else None
        rng = rng if rng is not None else self._rng
        found = _nonfinite_parameters(session, step)
        if found is None:  # finite weights: the step is replayed; kept for a later trace
            if self.replayed is None:
                self.replayed = (step, [p.detach().clone() for p in session.model.parameters()], rng)
                self.replayed_buffers = self._buffers.copy()
                draws = getattr(session, "step_draws", None)  # its micro-batches, by reference
                self.replayed_draws = None if draws is None else draws(step)
            found = diagnose_step(session, step, rng, self._buffers) or unreproduced(session, step)
        return found

    def after_step(self, session, result) -> None:
        if self._found is not None:
            result.nonfinite_origin = self._found
            self._found = None
        self._rng = rng_snapshot(session.device)
        self._buffers.keep()


@contextmanager
def weights_before(model: nn.Module, replayed,
                   buffers: KeptBuffers | None = None) -> Iterator[dict | None]:
    """Inside, ``model``'s parameters are those before the update of the step ``replayed``
    (``NonFiniteOrigin.replayed``) — swapped in, no copy — and its buffers those the step began
    with (``buffers``: ``NonFiniteOrigin.replayed_buffers``); it yields that step's random
    state. Afterwards parameters and buffers are the model's own again. Without a kept step
    (or for a model whose parameters no longer match) nothing changes and it yields None."""
    params = list(model.parameters())
    kept = replayed[1] if replayed is not None else []
    if replayed is None or len(kept) != len(params) or any(
            k.shape != p.shape or k.dtype != p.dtype or k.device != p.device
            for k, p in zip(kept, params, strict=True)):
        yield None
        return
    own = [p.data for p in params]
    own_buffers = SavedState(model)
    try:
        for p, k in zip(params, kept, strict=True):
            p.data = k
        if buffers is not None:
            buffers.restore()
        yield replayed[2]
    finally:
        for p, o in zip(params, own, strict=True):
            p.data = o
        own_buffers.restore()
