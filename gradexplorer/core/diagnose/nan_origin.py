"""Where NaN/Inf is born: the first backward node that turns finite gradients non-finite.

On a traced graph (``trace_gradients``) that is the first node, in execution order, whose
received gradients were all finite while one it sent on was not. When the loss itself is
non-finite the problem is in the forward pass: ``forward_origin`` replays the forward under a
dispatch mode and names the first op whose inputs were finite and whose output was not.

``NonFiniteOrigin`` is a session observer doing this for ``run``: a healthy step costs one
gradient norm; a step with NaN/Inf gradients is replayed (same parameters, batch and random
numbers; buffers and RNG restored; ``.grad`` and optimizer untouched) to find the origin.
Whether a step is healthy comes from the gradient monitor's NaN/Inf counts when the stack has
one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import networkx as nx
import torch
from psygnal import Signal
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gradexplorer.core.diagnose.trace_grads import to_host, trace_gradients
from gradexplorer.core.errors import emit_guarded
from gradexplorer.core.model.training_state import preserved_state, restore_rng, rng_snapshot
from gradexplorer.core.stats.measured import measured_tensor


def nonfinite_origin(G: nx.DiGraph) -> int | None:
    """The first traced node whose inputs were finite and whose outputs were not; marks it.

    Sets ``nonfinite_origin: True`` on that node only (and removes it from any other). None
    when every gradient is finite, and when the traced loss itself is non-finite: then the
    NaN/Inf was born in the forward pass (``forward_origin``), not in any backward node.
    """
    for n in [n for n, flag in G.nodes(data="nonfinite_origin") if flag]:
        del G.nodes[n]["nonfinite_origin"]
    if not math.isfinite(G.graph.get("loss", 0.0)):
        G.graph.pop("nonfinite_origin", None)
        return None
    traced = sorted((a["grad_order"], n) for n, a in G.nodes(data=True) if "grad_order" in a)
    for _, n in traced:
        attrs = G.nodes[n]
        if attrs["grad_in_finite"] and not attrs["grad_finite"]:
            attrs["nonfinite_origin"] = True
            G.graph["nonfinite_origin"] = n
            return n
    G.graph.pop("nonfinite_origin", None)
    return None


def origin_text(attrs: dict[str, Any]) -> str:
    """``SqrtBackward0 in module fc`` (or ``at the model's top level``)."""
    where = f"in module {attrs['module']}" if attrs.get("module") else "at the model's top level"
    return f"{attrs['name']} {where}"


def describe_backward_origin(G: nx.DiGraph, node: int) -> dict[str, Any]:
    """A JSON-able account of the origin node: op, module, what it received and sent."""
    attrs = G.nodes[node]
    return {
        "where": "backward", "node": node, "op": attrs["name"], "module": attrs.get("module", ""),
        "text": f"first non-finite gradient: {origin_text(attrs)}",
        "received_norm": attrs["grad_in_norm"], "sent_norm": attrs["grad_norm"],
        "inputs": [G.nodes[v]["name"] for v in G.successors(node)],
        "outputs": [G.nodes[u]["name"] for u in G.predecessors(node)],
        "step": G.graph.get("step"),
    }


def _floats(values) -> list[torch.Tensor]:
    return [t for t in tree_leaves(values) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _all_finite(tensors: list[torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.numel())


class _FirstNonFinite(TorchDispatchMode):
    """Notes the first op whose floating inputs were finite and whose output was not."""

    def __init__(self, modules: list[str]) -> None:
        super().__init__()
        self.modules = modules  # the running module stack
        self.found: dict[str, Any] | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.found is None:
            outs = _floats(out)
            if outs and not _all_finite(outs) and _all_finite(_floats((args, kwargs))):
                self.found = {"op": str(func.overloadpacket.__name__),
                              "module": self.modules[-1] if self.modules else ""}
        return out


def forward_origin(session, step: int | None = None, rng_state: dict | None = None) -> dict | None:
    """Replay the forward and loss of ``step``; the first op that made NaN/Inf from finite inputs."""
    model: nn.Module = session.model
    stack: list[str] = []

    def enter(path: str):
        def hook(module, args) -> None:
            stack.append(path)
        return hook

    def leave(path: str):
        def hook(module, args, output) -> None:
            if stack and stack[-1] == path:
                stack.pop()
        return hook

    handles = []
    for path, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(enter(path)))
        handles.append(module.register_forward_hook(leave(path), always_call=True))
    mode = _FirstNonFinite(stack)
    try:
        with preserved_state(model, session.device), torch.no_grad():
            if rng_state is not None:
                restore_rng(rng_state)
            inputs, target = session.batch(session.step_count if step is None else step)
            with mode:  # keyword inputs and loss_fn=None as the training step runs them
                session.model_loss(inputs, target)
    finally:
        for h in handles:
            h.remove()
    if mode.found is None:
        return None
    found = mode.found
    where = f"in module {found['module']}" if found["module"] else "at the model's top level"
    return {"where": "forward", "op": found["op"], "module": found["module"],
            "text": f"first non-finite value in the forward pass: {found['op']} {where}",
            "step": session.step_count if step is None else step}


def diagnose_step(session, step: int | None = None, rng_state: dict | None = None) -> dict | None:
    """Where the NaN/Inf of ``step`` was born: the forward op when the loss is non-finite, else
    the first backward node; None when the replayed step is finite everywhere."""
    G = trace_gradients(session, step, saved=False, rng_state=rng_state)
    if not math.isfinite(G.graph["loss"]):
        return forward_origin(session, step, rng_state) or _nonfinite_parameters(session, step)
    node = nonfinite_origin(G)
    return describe_backward_origin(G, node) if node is not None else None


def loss_origin(session, G: nx.DiGraph) -> dict | None:
    """For a traced graph whose loss is non-finite: where the forward made it (else None)."""
    if math.isfinite(G.graph.get("loss", 0.0)):
        return None
    step = G.graph.get("step")
    return forward_origin(session, step) or _nonfinite_parameters(session, step)


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
    """When no op made the NaN: parameters (or buffers) that already hold NaN/Inf."""
    model = session.model
    bad = nonfinite_names([*model.named_parameters(), *model.named_buffers()])
    if not bad:
        return None
    more = f", … {len(bad) - 3} more" if len(bad) > 3 else ""
    return {"where": "parameters", "op": "", "module": bad[0].rpartition(".")[0],
            "text": f"the loss is non-finite because parameters already hold NaN/Inf: "
                    f"{', '.join(bad[:3])}{more} (an earlier step's update)",
            "parameters": bad, "step": session.step_count if step is None else step}


def unreproduced(session, step: int) -> dict:
    """The one line for a non-finite step whose replay (same parameters, batch and random
    numbers) came out finite: a non-deterministic op, or state the replay cannot restore."""
    bad = nonfinite_names([(n, p.grad) for n, p in session.model.named_parameters()])
    more = f", … {len(bad) - 3} more" if len(bad) > 3 else ""
    return {"where": "unreproduced", "op": "", "module": bad[0].rpartition(".")[0] if bad else "",
            "text": f"could not reproduce the non-finite gradients of {', '.join(bad[:3])}{more} "
                    "in a replay of the step with its own batch and random numbers (the replay "
                    "was finite: a non-deterministic op or state the replay cannot restore)",
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
    replayed.

    With ``monitor`` (a GradientMonitor measuring the same step, begun before this observer
    runs, as ``SessionStack`` orders them) a healthy step costs nothing more: whether the
    gradients hold NaN/Inf is read from the counts the monitor already took
    (``pending_nonfinite``); without one, or where its measuring failed, the session's own
    global norm of the step tells (``accumulated_norm``; one host sync), else a fused norm.
    """

    event = Signal(str, str, str)

    def __init__(self, session, monitor=None) -> None:
        self._rng = rng_snapshot(session.device)  # random state at the start of the next step
        self._monitor = monitor
        self._found: dict | None = None
        self.found: list[dict] = []
        # the first replayed step: (step, its parameters before the update, its random state)
        self.replayed: tuple[int, list[torch.Tensor], dict | None] | None = None

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
        rng = session.forward_rng(step) if hasattr(session, "forward_rng") else None
        rng = rng if rng is not None else self._rng
        found = _nonfinite_parameters(session, step)
        if found is None:  # finite weights: the step is replayed; kept for a later trace
            if self.replayed is None:
                self.replayed = (step, [p.detach().clone() for p in session.model.parameters()], rng)
            found = diagnose_step(session, step, rng) or unreproduced(session, step)
        if found is not None:
            self._found = found
            self.found.append(found)
            emit_guarded(self.event, "a subscriber of the NaN origins", "error",
                         found.get("module", ""), f"step {step + 1}: {found['text']}")

    def after_step(self, session, result) -> None:
        if self._found is not None:
            result.nonfinite_origin = self._found
            self._found = None
        self._rng = rng_snapshot(session.device)


@contextmanager
def weights_before(model: nn.Module, replayed) -> Iterator[dict | None]:
    """Inside, ``model``'s parameters are those before the update of the step ``replayed``
    (``NonFiniteOrigin.replayed``) — swapped in, no copy — and it yields that step's random
    state; afterwards the parameters are the model's own again. Without a kept step (or for a
    model whose parameters no longer match) nothing changes and it yields None."""
    params = list(model.parameters())
    kept = replayed[1] if replayed is not None else []
    if replayed is None or len(kept) != len(params) or any(
            k.shape != p.shape or k.dtype != p.dtype or k.device != p.device
            for k, p in zip(kept, params, strict=True)):
        yield None
        return
    own = [p.data for p in params]
    try:
        for p, k in zip(params, kept, strict=True):
            p.data = k
        yield replayed[2]
    finally:
        for p, o in zip(params, own, strict=True):
            p.data = o
