"""How graph nodes are labelled and sized: shared by layouts and every drawing of the graph."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NODE_HEIGHT = 26.0
CHAR_WIDTH = 7.0  # of the 12 px monospace font the drawings use
PADDING = 8.0
LAYER_STEP = 58.0  # vertical distance between layers
FONT_SIZE = 12

KIND_FILL = {
    "loss": "#f4a259",
    "op": "#dfe7f2",
    "param": "#9fd89f",
    "hook": "#f28b82",
    "other": "#e0e0e0",
    "module": "#c6b3e6",
}
KIND_STROKE = {
    "loss": "#a8541a",
    "op": "#6d86a8",
    "param": "#3f8f3f",
    "hook": "#b3261e",
    "other": "#8a8a8a",
    "module": "#6b4fa0",
}


def format_shape(shape: Any) -> str:
    """``(4, 8)`` as ``4×8``; scalars as ``()``."""
    if shape is None:
        return ""
    return "×".join(str(d) for d in shape) if len(shape) else "()"


def node_label(attrs: Mapping[str, Any]) -> str:
    """The one-line text drawn in a node."""
    kind = attrs.get("kind")
    if kind == "param" and attrs.get("param"):
        return str(attrs["param"])
    if kind == "module":
        type_name = attrs.get("name") or ""
        return f"{attrs.get('module') or '(root)'} {type_name}".strip()
    return str(attrs.get("name", ""))


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


def grad_text(attrs: Mapping[str, Any]) -> str:
    """``gradient out ‖g‖ 0.0123, max |g| 0.004 (in ‖g‖ 0.0456)`` of a traced node."""
    flag = "" if attrs.get("grad_finite", True) else ", NON-FINITE"
    peak = attrs.get("grad_max", float("nan"))
    text = f"gradient out ‖g‖ {attrs['grad_norm']:.4g}, max |g| {peak:.4g}{flag}"
    if attrs.get("grad_in_norm") is not None and attrs.get("kind") != "param":
        text += f" (in ‖g‖ {attrs['grad_in_norm']:.4g})"
    return text


def node_width(attrs: Mapping[str, Any]) -> float:
    """Drawn width of a node: its label plus padding."""
    return len(node_label(attrs)) * CHAR_WIDTH + 2 * PADDING
