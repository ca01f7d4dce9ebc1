"""The details pane: what the selected node, module or parameter is, and its latest gradient."""

from __future__ import annotations

from html import escape
from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QTextBrowser, QWidget

from gradexplorer.core.graph.style import format_shape, grad_text, short_source
from gradexplorer.core.stats.records import STAT_FIELDS, STAT_LABELS
from gradexplorer.gui.models.selection import Selection, SelectionModel, parameter_for
from gradexplorer.gui.text.number_text import format_number, nonfinite_word, update_ratio_text
from gradexplorer.gui.theme import current_theme

# the labels' grey and the alarm red as written below are for the light pane (5.5:1 and 5:1);
# on the dark pane (#161b1e) they read 2.4:1 and 3.5:1, so there they are lighter (WCAG 4.5:1)
DARK_TEXT = {"#546e7a": "#9aabb4", "#d32f2f": "#ef9a9a"}
COPY_SOURCE = "copy-source"  # the link that copies the selected op's path:line


def source_html(attrs: dict) -> str:
    """``fc1 · my_model.py:42 `x = self.fc1(x)` copy path:line`` for an op with a source line."""
    where = escape(attrs.get("module") or "(model)")
    code = escape(attrs.get("code") or "")
    return (f"<p style='margin:2px'>{where} · <span title='{escape(attrs['source'])}'>"
            f"{escape(short_source(attrs['source']))}</span> <code>{code}</code> "
            f"<a href='{COPY_SOURCE}'>copy path:line</a></p>")


def themed(html: str, theme: str) -> str:
    """``html`` with its text colours for ``theme``."""
    if theme == "dark":
        for light, dark in DARK_TEXT.items():
            html = html.replace(light, dark)
    return html


def zeros_text(fraction: float | None) -> str:
    """The share of exactly-zero elements as a percentage ("zeros 0.4219" read as a count)."""
    return "" if fraction is None else f"{format_number(fraction * 100)} %"

SHOWN_FIELDS = [f for f in STAT_FIELDS if f not in ("nan_count", "inf_count")]  # those get a flag


def _row(key: str, value: Any) -> str:
    return f"<tr><td style='color:#546e7a;padding-right:10px'>{escape(key)}</td><td>{value}</td></tr>"


FORMATS = {"update_ratio": update_ratio_text, "zero_fraction": zeros_text}


def stats_rows(stats: Any) -> list[str]:
    """Table rows for one parameter's ParamStats."""
    if stats is None:
        return [_row("gradient", "not recorded yet: run a step")]
    if not stats.has_grad:
        return [_row("gradient", "<b style='color:#d32f2f'>none this step</b> (no gradient reached it)")]
    word = nonfinite_word(stats)  # the figures below cover only the finite elements
    bad = (stats.nan_count or 0) + (stats.inf_count or 0)
    rows = [_row(STAT_LABELS.get(f, f), f"<b style='color:#d32f2f'>{word}</b> ("
                 + ("no finite element" if bad >= stats.numel else
                    f"finite elements: {format_number(getattr(stats, f, None))}") + ")"
                 if word and f in ("norm", "abs_max")
                 else FORMATS.get(f, format_number)(getattr(stats, f, None)))
            for f in SHOWN_FIELDS]
    flag = (f"<b style='color:#d32f2f'>⚠ {stats.nan_count} NaN, {stats.inf_count} Inf</b>"
            if bad else "none")
    return rows + [_row("NaN / Inf", flag)]


def observed_rows(observed: Any) -> list[str]:
    """Rows for what an observe hook saw in its module's last backward."""
    rows = [f"<tr><td colspan=2 style='padding-top:4px'><b>observed</b> at step {observed.step} "
            f"({observed.calls} calls)</td></tr>"]
    for kind in ("grad_output", "grad_input"):
        for i, entry in enumerate(getattr(observed, kind)):
            if entry is None:
                rows.append(_row(f"{kind}[{i}]", "None"))
                continue
            figures = " · ".join(f"{label} {format_number(entry[key])}" for key, label in
                                 (("norm", "norm"), ("mean", "mean"), ("std", "std"),
                                  ("abs_max", "max |g|")))
            rows.append(_row(f"{kind}[{i}] {format_shape(entry['shape'])}", figures))
    return rows


class DetailsPane(QTextBrowser):
    """Rewrites itself when the selection changes or new statistics arrive."""

    def __init__(self, selection: SelectionModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection = selection
        self.graph = None
        self.model = None
        self.stats: dict[str, Any] = {}
        self.hooks: dict[str, str] = {}
        self.observed: dict[str, Any] = {}  # module -> ObservedGrads
        self.step: int | None = None  # the step the statistics are of
        self.caption = ""  # "step 401 of 1600" while they are not the newest step's
        self._html: str | None = None  # what is shown, so an unchanged text is not set again
        self.setOpenLinks(False)
        self.anchorClicked.connect(self._link_clicked)
        selection.changed.connect(lambda _s: self.refresh())
        self.refresh()

    def set_context(self, graph=None, model=None, stats=None, hooks=None, observed=None,
                    step=None, caption=None) -> None:
        """Update whichever sources are given and redraw (``step``: the step ``stats`` are of,
        ``caption``: ``step 401 of 1600`` when it is not the newest, "" when it is)."""
        if step is not None:
            self.step = step
        if caption is not None:
            self.caption = caption
        if graph is not None:
            self.graph = graph
        if model is not None:
            self.model = model
        if stats is not None:
            self.stats = stats
        if hooks is not None:
            self.hooks = hooks
        if observed is not None:
            self.observed = observed
        self.refresh()

    def reset(self, model) -> None:
        """A new model: forget the last one's graph, statistics and hooks."""
        self.graph, self.model, self.stats, self.hooks = None, model, {}, {}
        self.observed, self.step, self.caption = {}, None, ""
        self.refresh()

    def refresh(self) -> None:
        """Describe the current selection (the text is only replaced when it changed)."""
        html = themed(self.describe(self.selection.current), current_theme())
        if html != self._html:
            self._html = html
            self.setHtml(html)

    def use_theme(self, _theme: str) -> None:
        """A runtime theme switch: the text's colours for the new theme."""
        self.refresh()

    def describe(self, sel: Selection) -> str:
        """HTML for ``sel``."""
        if sel.node is None and sel.module is None and sel.param is None:
            return ("<p style='color:#546e7a'>Click a node in the graph, a module in the tree or a "
                    "parameter in the table. Right-click a module to attach a hook.</p>")
        rows: list[str] = []
        title, subtitle = "selection", ""
        attrs = self._node_attrs(sel.node)
        if attrs:
            title = escape(str(attrs.get("name") or attrs.get("module") or "node"))
            if attrs.get("source"):
                subtitle = source_html(attrs)
            rows += [_row("kind", escape(str(attrs.get("kind", "")))),
                     _row("module", escape(attrs.get("module") or "(model)"))]
            saved = attrs.get("saved") or {}
            rows += [_row(f"saved {k}", format_shape(v))
                     for k, v in saved.items()]
            if attrs.get("members"):
                rows.append(_row("operations", attrs["members"]))
            rows += self._diagnosis_rows(sel.node, attrs)
        elif sel.module is not None:
            title = escape(sel.module or "(model)")
            rows.append(_row("type", escape(self._module_type(sel.module))))
        if sel.module is not None:
            rows.append(_row("hook", escape(self.hooks.get(sel.module, "none"))))
            if sel.module in self.observed:
                rows += observed_rows(self.observed[sel.module])
        param = sel.param or parameter_for(sel, self.model)
        if param:
            rows.append(f"<tr><td colspan=2><b>{escape(param)}</b> {self._param_shape(param)}</td></tr>")
            if self.caption:  # not the newest step: said above its figures
                rows.append(f"<tr><td colspan=2><b style='color:#d32f2f'>at {escape(self.caption)}"
                            "</b> (End: back to live)</td></tr>")
            rows += stats_rows(self.stats.get(param))
        return f"<h3 style='margin:2px'>{title}</h3>{subtitle}<table>{''.join(rows)}</table>"

    def _link_clicked(self, url: QUrl) -> None:
        """The source line's link copies its ``path:line`` (nothing is opened)."""
        attrs = self._node_attrs(self.selection.current.node)
        if url.toString() == COPY_SOURCE and attrs.get("source"):
            QGuiApplication.clipboard().setText(attrs["source"])

    def _diagnosis_rows(self, node, attrs: dict) -> list[str]:
        """The traced gradient, NaN/Inf origin, inputs and outputs, and what the op computes."""
        rows = []
        if attrs.get("grad_norm") is not None:
            colour = "" if attrs.get("grad_finite", True) else " style='color:#d32f2f'"
            rows.append(_row("gradient", f"<span{colour}>{escape(grad_text(attrs))}</span>"))
            rows.append(_row("traced", escape(self._traced_text())))
        if attrs.get("nonfinite_origin"):
            ins = ", ".join(self.graph.nodes[v].get("name", "?") for v in self.graph.successors(node))
            outs = ", ".join(self.graph.nodes[u].get("name", "?") for u in self.graph.predecessors(node))
            rows.append(_row("NaN/Inf", "<b style='color:#d32f2f'>born here</b>: finite gradients "
                             f"in (from {escape(outs) or 'the loss'}), non-finite out "
                             f"(to {escape(ins) or 'nothing'})"))
        from gradexplorer.core.diagnose.explain import explain_node  # (networkx: loaded by the trace)

        text = attrs.get("explanation") or explain_node(self.graph, node)
        rows.append(f"<tr><td colspan=2 style='padding-top:4px'>{escape(text).replace(chr(10), '<br>')}"
                    "</td></tr>")
        return rows

    def _traced_text(self) -> str:
        """Which step the traced figures are of (the trace replays the batch of the step after
        the one the weights are at), and whether the figures below are of another step."""
        at = self.graph.graph.get("step") if self.graph is not None else None
        if at is None:
            return "by Trace gradients"
        text = f"step {at + 1} (Trace gradients)"
        if self.step is not None and self.step != at + 1:
            text += f"; the figures below are step {self.step}'s"
        return text

    def _node_attrs(self, node) -> dict:
        if node is None or self.graph is None or node not in self.graph:
            return {}
        return self.graph.nodes[node]

    def _module_type(self, path: str) -> str:
        if self.model is None:
            return ""
        try:
            return type(self.model.get_submodule(path)).__name__
        except AttributeError:
            return ""

    def _param_shape(self, name: str) -> str:
        if self.model is None:
            return ""
        try:
            return format_shape(self.model.get_parameter(name).shape)
        except AttributeError:
            return ""
