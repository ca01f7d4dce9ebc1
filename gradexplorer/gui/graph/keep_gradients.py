""""Keep this op's gradient" in the app: on a graph node's right-click menu (and a module's, for
all its ops), the size of what would be kept shown before anything runs, then one traced step on
the training thread (``trace_gradients(keep=)``) whose kept tensors open in a window
(``KeptGradientsWindow``: histogram, heat map, save as snapshot)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtWidgets import QMenu, QMessageBox

from gradexplorer.gui.models.session import SnapshotWritten

MAX_CELLS = 512  # rows and columns a heat map draws at most (every k-th beyond)


@dataclass(frozen=True)
class TensorView:
    """What the kept window draws of one tensor: its histogram (``tensor_histogram``), its
    values as rows × last dimension (every k-th past ``MAX_CELLS``: ``strides``), its shape."""

    histogram: Any
    matrix: Any  # numpy float64, 2-D
    strides: tuple[int, int]
    shape: tuple[int, ...]


def tensor_view(tensor) -> TensorView:
    """A kept tensor's ``TensorView`` (a vector: one row, a scalar: 1×1); strided before it is
    made float64, so a large tensor is never copied whole for its picture."""
    from gradexplorer.core.hooks.observed import tensor_histogram

    t = tensor.detach()
    matrix = t.reshape(1, -1) if t.dim() < 2 else t.reshape(-1, t.shape[-1])
    rows = max(1, -(-matrix.shape[0] // MAX_CELLS))
    cols = max(1, -(-matrix.shape[1] // MAX_CELLS))
    return TensorView(tensor_histogram(t), matrix[::rows, ::cols].double().numpy(), (rows, cols),
                      tuple(t.shape))


@dataclass(frozen=True)
class GradientsKept:
    """The result of a keep job: the ``KeptGradients``, the session they are of, and each
    tensor's ``TensorView`` (made on the training thread, not the GUI's)."""

    kept: Any
    live: Any
    views: dict


def keep_targets(G, node, module: str | None) -> list[tuple[str, list]]:
    """The menu's keep entries for a right-click: ``(label, keep)`` for the clicked op (a node
    of the traced graph ``G``, when it is the module's: a tree row's menu leaves a node selected
    elsewhere out) and for the module's ops (not the model's root)."""
    out = []
    if isinstance(node, int) and node in G and (G.nodes[node].get("module") or "") == (module or ""):
        attrs = G.nodes[node]
        what = "this parameter's" if attrs["kind"] == "param" else "this op's"
        out.append((f"Keep {what} gradient ({attrs['name']}, node {node})…", [node]))
    if module and any(a.get("module") == module or (a.get("module") or "").startswith(module + ".")
                      for _, a in G.nodes(data=True) if a["kind"] != "param"):
        out.append((f"Keep the gradients of {module}'s ops…", [module]))
    return out


def confirmation_text(G, keep: list, plan) -> str:
    """What the confirmation says: which ops, how many tensors, about how many bytes, the limit."""
    from gradexplorer.core.diagnose.kept_grads import byte_text, counted
    from gradexplorer.gui.graph.kept_window import op_text

    ops = [op_text({"op": G.nodes[i]["name"], "node": i, "module": G.nodes[i].get("module") or "",
                    "source": G.nodes[i].get("source")}) for i in plan.nodes]
    listed = "\n".join(ops[:8]) + (f"\n… and {len(ops) - 8} more" if len(ops) > 8 else "")
    return (f"Trace one step and keep the full gradients of {counted(len(ops), 'op')}:\n{listed}"
            f"\n\n{counted(plan.count, 'tensor')}, about {byte_text(plan.bytes)} "
            f"(limit {byte_text(plan.max_bytes)}). Training is not changed.")


class KeepActions:
    """The window's keep commands; the kept windows it opened (``windows``)."""

    def __init__(self, window) -> None:
        self.window = window
        self.windows: list = []
        window.controller.session.job_finished.connect(self._finished)

    def add_to_menu(self, menu: QMenu, module: str | None) -> None:
        """Add the keep entries for the selected node and ``module`` to a right-click menu."""
        G = self.window.graph_panel.graph
        if G is None or self.window.controller.session.live is None:
            return
        entries = keep_targets(G, self.window.selection.current.node, module)
        if entries:
            menu.addSeparator()
        for label, keep in entries:
            menu.addAction(label, lambda k=keep: self.ask(k))

    def ask(self, keep: list, confirm: bool = True) -> bool:
        """Show the size, and on yes trace one step keeping ``keep``; whether it was posted."""
        from gradexplorer.core.diagnose.kept_grads import DEFAULT_MAX_BYTES, graph_plan
        from gradexplorer.core.messages.errors import UserError

        window, G = self.window, self.window.graph_panel.graph
        live = window.controller.session.live
        if G is None or live is None:
            return False
        try:
            plan = graph_plan(G, keep, DEFAULT_MAX_BYTES)
            plan.check()
        except UserError as exc:
            window.show_error(str(exc))
            return False
        if confirm and not window.scripted and QMessageBox.question(
                window, "Keep gradients", confirmation_text(G, keep, plan)) != QMessageBox.Yes:
            return False
        micro = G.graph.get("micro_batch")  # the micro-batch whose graph is shown
        window.controller.post(lambda: self._keep(live, keep, micro))
        window.statusBar().showMessage("tracing a step to keep its gradients…", 4000)
        return True

    @staticmethod
    def _keep(live, keep: list, micro_batch: int | None = None) -> GradientsKept:
        """On the training thread: the next step traced, ``keep``'s gradients kept (of a step
        of several micro-batches, micro-batch ``micro_batch``'s, as the graph shown)."""
        from gradexplorer.core.diagnose.trace_grads import trace_gradients

        fits = micro_batch is not None and micro_batch < live.session.config.accumulate
        micro = micro_batch if fits else None  # (Micro-batches lowered since: the first)
        kept = trace_gradients(live.session, keep=keep, micro_batch=micro).graph["kept"]
        return GradientsKept(kept, live, {key: tensor_view(t) for key, t in kept.items()})

    def _finished(self, result) -> None:
        if isinstance(result, GradientsKept):
            self.show(result)

    def show(self, result: GradientsKept):
        """Open the kept tensors' window."""
        from gradexplorer.gui.graph.kept_window import KeptGradientsWindow

        controller, live = self.window.controller, result.live

        def save(directory: str) -> None:  # an existing one is refused (a dialog), not replaced
            controller.post(lambda: SnapshotWritten(result.kept.write(directory, live.session,
                                                                      replace=False)))

        shown = KeptGradientsWindow(result.kept, save, result.views)
        shown.show()
        self.windows = [w for w in self.windows if w.isVisible()] + [shown]
        return shown

    def close(self) -> None:
        for shown in self.windows:
            shown.close()
        self.windows = []
