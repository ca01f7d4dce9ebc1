"""The one look of a backward graph: palette, node labels and node sizes.

Used by the app's canvas (and so by its PNG export and ``gradexplorer graph --out x.png``),
by the SVG and DOT exports and by the layouts, so every picture of a graph matches the window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# -- palette: light fills (labels are dark text), one border colour, edges, marks ----------
KIND_FILL = {
    "op": "#b0bec5",
    "param": "#a5d6a7",
    "hook": "#e1bee7",
    "loss": "#80deea",
    "module": "#90caf9",
    "other": "#eceff1",
}
BORDER_COLOUR = "#455a64"
EDGE_COLOUR = "#9aa9b1"
TEXT_COLOUR = "#17252c"
HOOK_MARK = "#8e24aa"  # ring around the nodes of a hooked module

# -- geometry: every box is the same size, in the app (scene units) and the exports (px) ---
NODE_W, NODE_H = 190.0, 44.0  # two lines of text, elided in the middle when too long
NODE_HEIGHT = NODE_H
LAYER_STEP = NODE_H * 1.6  # vertical distance between layers (the app's row spacing)
FONT_SIZE = 16  # pixels, a sans-serif font
CHAR_WIDTH = 9.4  # an average character of it (capitals count), for eliding without font metrics (SVG)
FONT_FAMILY = "DejaVu Sans, Verdana, Arial, sans-serif"


def format_shape(shape: Any) -> str:
    """``(4, 8)`` as ``4×8``; ``()`` as ``scalar``; None as nothing. Every view writes shapes so."""
    if shape is None:
        return ""
    return "×".join(str(d) for d in shape) if len(shape) else "scalar"


def node_lines(attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The two text lines of a node: what it is, and where it comes from (and, on a graph
    traced with gradients, the norm of the gradient the node sends on)."""
    name, detail = _plain_lines(attrs)
    norm = attrs.get("grad_norm")
    if norm is None:
        return name, detail
    text = f"{norm:.2g}" if isinstance(norm, float) else str(norm)
    return name, f"{detail} · ‖g‖ {text}" if detail else f"‖g‖ {text}"


def _plain_lines(attrs: Mapping[str, Any]) -> tuple[str, str]:
    kind = attrs.get("kind", "other")
    if kind == "module":
        members = attrs.get("members")
        detail = " · ".join(t for t in (attrs.get("name"), f"{members} nodes" if members else "") if t)
        return attrs.get("module") or "(model)", detail
    if kind == "hook":  # BackwardHookFunctionBackward, inserted by a full backward hook
        return "backward hook", attrs.get("module") or ""
    if kind == "param":
        return attrs.get("param") or "AccumulateGrad", format_shape(attrs.get("shape") or ())
    return str(attrs.get("name", "?")), attrs.get("module") or ""


def node_label(attrs: Mapping[str, Any]) -> str:
    """A node's first line: its name where one line must do (DOT labels, search)."""
    return node_lines(attrs)[0]


def node_tooltip(attrs: Mapping[str, Any]) -> str:
    """Details shown on hover: op, module, parameter shape, saved tensors."""
    lines = [node_label(attrs)]
    if attrs.get("kind") == "module":
        lines.append(f"{attrs.get('members', 0)} nodes collapsed")
    else:
        if attrs.get("name") and attrs.get("name") != lines[0]:
            lines.append(str(attrs["name"]))
        lines.append(f"module: {attrs.get('module') or '(root)'}")
    if attrs.get("shape") is not None:
        lines.append(f"shape: {format_shape(attrs['shape'])} {attrs.get('dtype') or ''}".rstrip())
    for key, shape in (attrs.get("saved") or {}).items():
        lines.append(f"saved {key}: {format_shape(shape)}")
    if attrs.get("grad_norm") is not None:
        lines.append(grad_text(attrs))
    if attrs.get("nonfinite_origin"):
        lines.append("NaN/Inf born here: finite gradients in, non-finite out")
    if attrs.get("explanation"):
        lines.append(str(attrs["explanation"]))
    return "\n".join(lines)


def node_width(attrs: Mapping[str, Any]) -> float:  # noqa: ARG001 - one size for every node
    """Drawn width of a node (layouts space nodes by it)."""
    return NODE_W


def elide_middle(text: str, width: float = NODE_W - 10) -> str:
    """``text`` shortened in the middle (``Convoluti…Backward0``) to about ``width`` pixels."""
    fits = max(3, int(width / CHAR_WIDTH))
    if len(text) <= fits:
        return text
    head = (fits - 1) // 2
    return text[:head] + "…" + text[len(text) - (fits - 1 - head):]


def grad_text(attrs: Mapping[str, Any]) -> str:
    """``gradient out ‖g‖ 0.0123, max |g| 0.004 (in ‖g‖ 0.0456)`` of a traced node; a parameter
    of a traced step of micro-batches: the step's accumulated gradient and the micro-batch's
    own share."""
    flag = "" if attrs.get("grad_finite", True) else ", NON-FINITE"
    peak = attrs.get("grad_max", float("nan"))
    if attrs.get("kind") == "module":  # folded: the largest of its operations' (collapse)
        return f"largest gradient out of its operations ‖g‖ {attrs['grad_norm']:.4g}, max |g| " \
               f"{peak:.4g}{flag}"
    text = f"gradient out ‖g‖ {attrs['grad_norm']:.4g}, max |g| {peak:.4g}{flag}"
    if attrs.get("grad_in_norm") is not None and attrs.get("kind") != "param":
        text += f" (in ‖g‖ {attrs['grad_in_norm']:.4g})"
    if attrs.get("grad_micro_norm") is not None:  # a step of micro-batches (trace_gradients)
        text = text.replace("gradient out", "the step's accumulated gradient") + \
            f"; this micro-batch's share ‖g‖ {attrs['grad_micro_norm']:.4g}"
    return text


def short_source(source: str) -> str:
    """``file.py:17`` of a node's ``source`` attribute ``/path/to/file.py:17``
    (``source_lines``; here, without torch, for the app's details pane)."""
    return source.replace("\\", "/").rsplit("/", 1)[-1]


def where_used(G: Any, *, param: str | None = None, module: str | None = None) -> str:
    """Where the model's code uses a parameter (the line of the op that takes it) or calls a
    module (its ops' lines), short: ``lenet.py:28 x = F.relu(self.fc1(x))``, ``… (+2 more lines)``
    for several; "" when the graph notes none (no graph, a compiled model's plain trace)."""
    if G is None:
        return ""
    if param is not None:
        leaves = [n for n, a in G.nodes(data=True) if a.get("param") == param]
        ops = [u for leaf in leaves for u in G.predecessors(leaf)]
    else:
        ops = [n for n, a in G.nodes(data=True) if a.get("kind") != "param" and module is not None
               and (a.get("module") == module or (a.get("module") or "").startswith(module + "."))]
    lines: dict[str, str] = {}
    for node in sorted(ops, reverse=True):  # the forward's first op first (ids run loss → leaves)
        attrs = G.nodes[node]
        if attrs.get("source"):
            lines.setdefault(attrs["source"], attrs.get("code") or "")
    if not lines:
        return ""
    source, code = next(iter(lines.items()))
    more = f" (+{len(lines) - 1} more line{'s' if len(lines) > 2 else ''})" if len(lines) > 1 else ""
    return f"{short_source(source)} {code}{more}".strip()
