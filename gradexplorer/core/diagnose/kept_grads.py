"""Per-op gradient tensors on demand: the full gradients chosen backward nodes receive and send
in one traced step (``trace_gradients(session, keep=["fc1"])``).

``keep`` names modules (every op their forward made, submodules' too), node ids (``17`` or
``"node17"``) or op names (``"AddmmBackward0"``: every node of that name). Before the backward
runs, the size of what will be kept is known exactly from the nodes' input metadata (the
shapes and dtypes of the gradients they will receive and send); past ``max_bytes`` nothing
runs and one line says so. During the backward, a hook on each chosen node copies its
``grad_inputs`` (what it sends, one per forward input) and ``grad_outputs`` (what it receives,
one per forward output) to the host, exactly as autograd hands them over; a chosen leaf
(``AccumulateGrad``) keeps the gradient ``torch.autograd.grad`` returns for it. Keys are
``node17.AddmmBackward0.grad_input.0``; ``KeptGradients.write`` puts them into a snapshot
(``hooks/node17.AddmmBackward0.grad_input.0``) with each op's module and source line.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx
import torch

from gradexplorer.core.messages.errors import UserError

DEFAULT_MAX_BYTES = 10**9  # 1 GB of kept tensors unless the caller allows more
_NODE_ID = re.compile(r"(?:node)?(\d+)")


def counted(n: int, word: str) -> str:
    """``1 op``, ``6 ops``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def byte_text(size: float) -> str:
    """``812 B``, ``4.2 KB``, ``1.3 MB``, ``2.1 GB`` (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{int(size)} B"


def choose_nodes(G: nx.DiGraph, keep: Sequence[str | int]) -> list[int]:
    """The node ids ``keep`` names in ``G``: module paths (all their ops, submodules' too),
    node ids (``17``, ``"17"``, ``"node17"``) and op names; a name matching none: UserError."""
    if isinstance(keep, (str, int)):
        keep = [keep]
    modules = {m for m in G.graph.get("module_types", {}) if m} | \
        {a["module"] for _, a in G.nodes(data=True) if a.get("module")}
    names = {a["name"] for _, a in G.nodes(data=True)}
    chosen: set[int] = set()
    for item in keep:
        text = str(item).strip()
        match = _NODE_ID.fullmatch(text)
        if isinstance(item, int) or match:
            node = int(item) if isinstance(item, int) else int(match.group(1))
            if node not in G:
                raise UserError(f"keep {item!r}: the graph has no node {node} "
                                f"(ids run 0–{G.number_of_nodes() - 1})")
            chosen.add(node)
        elif text in modules:
            ops = [n for n, a in G.nodes(data=True) if a["kind"] != "param" and (
                a.get("module") == text or (a.get("module") or "").startswith(text + "."))]
            if not ops:
                raise UserError(f"keep {text!r}: module {text} made no op in this step")
            chosen.update(ops)
        elif text in names:
            chosen.update(n for n, a in G.nodes(data=True) if a["name"] == text)
        else:
            close = difflib.get_close_matches(text, sorted(modules | names), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else \
                " (a module path, a node id such as node17, or an op name such as AddmmBackward0)"
            raise UserError(f"keep {text!r}: no module, node or op of that name in the graph{hint}")
    return sorted(chosen)


def _metadata_bytes(meta) -> int:
    return math.prod(meta.shape) * torch.empty((), dtype=meta.dtype).element_size()


def planned_tensors(fn) -> list[tuple[str, int]]:
    """``(slot, bytes)`` of every gradient node ``fn`` will receive and send (``grad_output.0``,
    ``grad_input.1``, …), from its input metadata and its next functions'; an input that needs
    no gradient (no next function) is left out."""
    is_leaf = not fn.next_functions and hasattr(fn, "variable")
    out = [(f"grad_output.{k}", _metadata_bytes(m)) for k, m in enumerate(fn._input_metadata)]
    if is_leaf:
        return out
    for k, (nf, input_nr) in enumerate(fn.next_functions):
        if nf is not None:
            out.append((f"grad_input.{k}", _metadata_bytes(nf._input_metadata[input_nr])))
    return out


@dataclass(frozen=True)
class KeepPlan:
    """What a keep will hold: per node, its (slot, bytes); the total; the limit."""

    nodes: dict[int, list[tuple[str, int]]]
    max_bytes: int

    @property
    def bytes(self) -> int:
        return sum(b for slots in self.nodes.values() for _, b in slots)

    @property
    def count(self) -> int:
        return sum(len(slots) for slots in self.nodes.values())

    def text(self) -> str:
        """``keeping 4 gradient tensors of 2 ops: 1.3 KB (limit 1.07 GB)``."""
        return (f"keeping {counted(self.count, 'gradient tensor')} of {counted(len(self.nodes), 'op')}: "
                f"{byte_text(self.bytes)} (limit {byte_text(self.max_bytes)})")

    def check(self) -> None:
        if self.bytes > self.max_bytes:
            raise UserError(f"the kept gradients would take {byte_text(self.bytes)}, over the "
                            f"limit of {byte_text(self.max_bytes)}: keep fewer ops or allow more "
                            "(max_bytes, --keep-max-bytes)")


def _shape_bytes(shape, dtype: str | None) -> int:
    kind = getattr(torch, dtype or "float32", torch.float32)
    return math.prod(shape) * torch.empty((), dtype=kind).element_size()


def graph_plan(G: nx.DiGraph, keep: Sequence[str | int], max_bytes: int = DEFAULT_MAX_BYTES) -> KeepPlan:
    """The plan of keeping ``keep`` on an already traced graph (the app asks before it traces
    again), from its nodes' shapes: what a node receives is its forward output, what it sends
    along each edge the next node's; exact but for ops of several outputs (their first counted)."""
    nodes: dict[int, list[tuple[str, int]]] = {}
    for i in choose_nodes(G, keep):
        attrs = G.nodes[i]
        slots = [] if attrs.get("shape") is None else \
            [("grad_output.0", _shape_bytes(attrs["shape"], attrs.get("dtype")))]
        if attrs["kind"] != "param":
            for _, j, data in G.out_edges(i, data=True):
                nxt = G.nodes[j]
                if nxt.get("shape") is not None:
                    slots += [(f"grad_input.{s}", _shape_bytes(nxt["shape"], nxt.get("dtype")))
                              for s in data.get("slots", (data["slot"],))]
        nodes[i] = sorted(slots)
    return KeepPlan(nodes, max_bytes)


def key_of(node: int, name: str, slot: str) -> str:
    """``node17.AddmmBackward0.grad_input.0``."""
    return f"node{node}.{name}.{slot}"


def _host_copy(g: torch.Tensor | None) -> torch.Tensor | None:
    """``g`` as it is, copied to the host (a sparse one made dense)."""
    if g is None:
        return None
    g = g.detach()
    if g.is_sparse:
        g = g.to_dense()
    return g.to("cpu", copy=True)


@dataclass(eq=False)
class KeptGradients(Mapping):
    """The kept tensors of one traced step, ``key -> tensor`` (on the host), and per op its
    node, name, module, source line and keys (``ops``)."""

    step: int
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    ops: list[dict] = field(default_factory=list)

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.tensors[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    @property
    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def of(self, node: int) -> dict[str, torch.Tensor]:
        """The tensors kept of ``node``, by slot (``grad_input.0`` …)."""
        prefix = f"node{node}."
        return {k.split(".", 2)[2]: t for k, t in self.tensors.items() if k.startswith(prefix)}

    def to_json(self) -> dict:
        """What the graph's JSON export says of it: the step, the ops and their tensors' shapes."""
        return {"step": self.step, "bytes": self.bytes, "ops": self.ops,
                "tensors": {k: {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
                            for k, t in self.tensors.items()}}

    def __str__(self) -> str:
        return f"{counted(len(self.tensors), 'gradient tensor')} of {counted(len(self.ops), 'op')} " \
            f"({byte_text(self.bytes)})"

    def write(self, directory: str | os.PathLike, session, name: str | None = None,
              replace: bool = True):
        """A snapshot in ``directory`` (``kept-step-000003``) holding the kept tensors under
        ``hooks/<key>`` and each op's description in its ``hooks`` list; the parameters'
        gradients in it are those the model holds (the last step's, not the traced one's)."""
        from gradexplorer.core.snapshot.format import snapshot_name
        from gradexplorer.core.snapshot.write import write_snapshot

        ops = [{"kind": "kept op gradients", **{k: v for k, v in op.items() if k != "keys"},
                "tensors": ",".join(op["keys"])} for op in self.ops]
        return write_snapshot(directory, session, hooks=ops, extra_tensors=dict(self.tensors),
                              name=name or f"kept-{snapshot_name(self.step)}", replace=replace)


class GradientKeeper:
    """Hooks on the chosen nodes of one backward that copy what they receive and send."""

    def __init__(self, G: nx.DiGraph, keep: Sequence[str | int], max_bytes: int = DEFAULT_MAX_BYTES,
                 on_plan: Callable[[KeepPlan], None] | None = None) -> None:
        if max_bytes is None or max_bytes < 0:
            raise UserError(f"max_bytes must be a size in bytes ≥ 0, not {max_bytes!r}")
        self.G, self.max_bytes, self.on_plan = G, int(max_bytes), on_plan
        self.nodes = choose_nodes(G, keep)
        self.kept = KeptGradients(G.graph.get("step", 0))
        self._handles: list = []
        self._taken = 0

    def attach(self, fns: Sequence) -> KeepPlan:
        """Plan (and check against the limit), then hook the chosen nodes of ``fns`` (the
        graph's grad_fns by node id); leaves are filled by ``keep_leaf``."""
        plan = KeepPlan({i: planned_tensors(fns[i]) for i in self.nodes}, self.max_bytes)
        if self.on_plan is not None:
            self.on_plan(plan)
        plan.check()
        for i in self.nodes:
            if self.G.nodes[i]["kind"] != "param":
                self._handles.append(fns[i].register_hook(self._hook(i)))
        return plan

    def _hook(self, i: int):
        name = self.G.nodes[i]["name"]

        def hook(grad_inputs, grad_outputs):
            for kind, grads in (("grad_input", grad_inputs), ("grad_output", grad_outputs)):
                for k, g in enumerate(grads):
                    self._keep(key_of(i, name, f"{kind}.{k}"), g)
        return hook

    def _keep(self, key: str, g: torch.Tensor | None) -> None:
        copy = _host_copy(g)
        if copy is None:
            return
        self._taken += copy.numel() * copy.element_size()
        if self._taken > self.max_bytes:  # the plan's sizes held none that was unknown
            raise UserError(f"the kept gradients passed the limit of {byte_text(self.max_bytes)}")
        self.kept.tensors[key] = copy

    def keep_leaf(self, i: int, grad: torch.Tensor | None) -> None:
        """A chosen leaf's gradient (as ``torch.autograd.grad`` returned it)."""
        if i in self.nodes:
            self._keep(key_of(i, self.G.nodes[i]["name"], "grad_output.0"), grad)

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def finish(self) -> KeptGradients:
        """Note on each chosen node its ``kept`` keys; the graph's ``kept`` is the result."""
        kept = self.kept
        for i in self.nodes:
            attrs = self.G.nodes[i]
            keys = [k for k in kept.tensors if k.startswith(f"node{i}.")]
            attrs["kept"] = keys
            kept.ops.append({"node": i, "op": attrs["name"], "module": attrs.get("module") or "",
                             "source": attrs.get("source") or "", "code": attrs.get("code") or "",
                             "keys": keys})
        self.G.graph["kept"] = kept
        return kept
