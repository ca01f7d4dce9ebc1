"""A model whose parameter names are hostile text: a spreadsheet formula, markup, terminal
escapes, a right-to-left override. Every place that shows a name shows it as written: a CSV
cell is text a spreadsheet never evaluates, the terminal and the HTML report get escapes, the
app's labels show the markup literally."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradexplorer as gx

NAMES = ["=cmd|' /C calc'!A0", "+SUM(1+1)", "-2+3+cmd", "@SUM(1,1)", "<img src=x>",
         "esc\x1b[2J\x07", "evil\u202etxt"]
FORMULA = ("=", "+", "-", "@", "\t", "\r")


class Hostile(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for name in NAMES:
            self.add_module(name, nn.Linear(3, 3))

    def forward(self, x):
        for layer in self.children():
            x = torch.tanh(layer(x))
        return x


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    torch.manual_seed(0)
    model = Hostile()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = tmp_path_factory.mktemp("hostile") / "run"
    with gx.watch(model, opt, path, bins=8) as rec:
        for step in range(3):
            x = torch.randn(4, 3, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            rec.note_loss(loss)
            opt.step()
    return path, [name for name, _ in model.named_parameters()]


def test_csv_cells_are_text_a_spreadsheet_never_evaluates(hostile_run, tmp_path, run_cli):
    pd = pytest.importorskip("pandas")
    path, names = hostile_run
    out = tmp_path / "rows.csv"
    assert run_cli("export", path, "--to", "csv", out)[0] == 0
    frame = pd.read_csv(out, keep_default_na=False)
    cells = [c for column in frame.columns for c in frame[column] if isinstance(c, str)]
    assert cells and not [c for c in cells if str(c).startswith(FORMULA)]
    shown = {c[1:] if c.startswith("'") else c for c in frame["parameter"] if c}
    assert shown == set(names)
    assert frame["value"].dtype == float  # numbers stay numbers (negative ones too)
    with gx.open_run(path) as run:
        norms = {n: run.figures(3)[n]["norm"] for n in names}
    last = frame[(frame["step"] == 3) & (frame["figure"] == "norm")]
    assert {p[1:] if p.startswith("'") else p: v
            for p, v in zip(last["parameter"], last["value"], strict=True)} == pytest.approx(norms)


def test_the_apps_csv_writer_neutralises_formulas_but_keeps_numbers(tmp_path):
    from gradexplorer.core.stats.curves import csv_text

    text = csv_text(["name", "value"], [["=1+1", -0.5], ["-2+3+cmd", 2.0], ["-0.25", 1.0]])
    assert text.splitlines()[1:] == ["'=1+1,-0.5", "'-2+3+cmd,2.0", "-0.25,1.0"]


def test_the_terminal_gets_escapes_never_raw_control_or_bidi(hostile_run, run_cli):
    path, _ = hostile_run
    code, out, err = run_cli("inspect", path)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "esc\\x1b[2J\\x07.weight" in out and "evil\\u202etxt.bias" in out
    code, out, err = run_cli("compare", path, path)
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out and "evil\\u202etxt.weight" in out


def test_the_report_escapes_markup_and_bidi(hostile_run, tmp_path, run_cli):
    path, _ = hostile_run
    out = tmp_path / "report.html"
    code, _, err = run_cli("report", path, "--out", out, "--top", "14")
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    assert "\u202e" not in page and "\x1b" not in page
    assert "<img src=x>" not in page and "&lt;img src=x&gt;.weight" in page
    assert "evil\\u202etxt.weight" in page


def test_the_gradients_header_shows_markup_as_written(qtbot, make_window, hostile_run):
    from PySide6.QtGui import QTextDocument

    path, _ = hostile_run
    window = make_window()
    assert window.file_actions.open_run(str(path)) is not None
    qtbot.waitUntil(lambda: window.controller.timeline.latest is not None
                    and window.controller.timeline.latest.step == 3, timeout=20_000)
    window.selection.select(param="<img src=x>.weight", module="<img src=x>", source="test")
    label = window.gradients.param_label
    label.resize(600, 20)
    qtbot.waitUntil(lambda: label.name == "<img src=x>.weight")
    doc = QTextDocument()
    doc.setHtml(label.text())
    assert doc.toPlainText() == "<img src=x>.weight"
    doc.setHtml(label.toolTip())
    assert doc.toPlainText() == "<img src=x>.weight"
