"""Screenshots of every scenario of issue 22 at 1024×700, 1600×1000 and 3840×2160, each taken
after a runtime theme switch (a window started light is switched to dark, one started dark is
switched to light), on real models built from code (nothing downloaded).

    QT_QPA_PLATFORM=offscreen python docs/scenario_shots.py docs/images/scenarios
    python docs/scenario_shots.py OUT --only names,nan --sizes 1024x700 --start light

Writes ``SCENARIO-WxH-THEME.png`` (THEME: the theme switched to) and compresses them with
ImageMagick's ``convert`` to 256-colour PNGs when it is installed (4K kept at full size).
Scripted with the Qt event loop running (timers poll each scenario's conditions), so deferred
deletes and throttled redraws happen as in the app.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES = ((1024, 700), (1600, 1000), (3840, 2160))
SETTLE_S = 0.8  # after a resize: dock shares, redraws, the graph's fit
GPT2 = f"{ROOT}/examples/gpt2_small.py:build"
NAN_MODEL = f"{ROOT}/tests/data/nan_sqrt_model.py:build"


def scenario_layout(w):
    """Items 1, 2, 5: ResNet-18 after 3 steps, every panel on screen, table columns by priority."""
    yield from open_and_run(w, "example:resnet18", 3, batch_size=2)
    w.selection.select(param="layer3.0.conv1.weight", source="script")


def scenario_hook_nodes(w):
    """Item 3: README step 3, Block on fc1 of digits: the hook nodes laid out, not on top."""
    yield from open_and_run(w, "example:digits", 2)
    w.controller.attach_hook("fc1", "block")
    yield lambda: "fc1" in w.controller.session.hooks and not w.busy()
    w.selection.select(module="fc1", source="script")


def scenario_nan(w):
    """Item 4: the NaN model after its bad step, Trace gradients: NaN read as NaN, the origin ringed."""
    yield from open_and_run(w, NAN_MODEL, 1, batch_size=32)
    w.graph_panel.view_state.trace_grads = True
    yield 1.0
    yield lambda: not w.busy()


def scenario_run_view(w):
    """Item 5 (run view): a run folder written by ``watch`` opened over a live model."""
    from gradexplorer.gui.runs.run_view import show_run

    yield from open_and_run(w, "example:digits", 1)
    show_run(w, write_run())
    yield 2.0
    yield lambda: not w.busy()


def scenario_names(w):
    """Item 6: a 4-block GPT-2 (GPT2Config), the tree expanded to its deepest rows, the
    parameter names elided from the left keeping the block index."""
    yield from open_and_run(w, GPT2, 2, batch_size=2)
    yield lambda: "transformer.h.0.attn.c_attn" in w.tree._items
    for path in ("", "transformer", "transformer.h", "transformer.h.0", "transformer.h.0.attn",
                 "transformer.h.0.mlp"):
        w.tree._items[path].setExpanded(True)
    w.selection.select(param="transformer.h.0.attn.c_attn.weight", source="script")


def scenario_plots(w):
    """Item 8: digits after 6 steps, fc2.weight selected: integer ticks, log counts, heat map."""
    yield from open_and_run(w, "example:digits", 6)
    w.selection.select(param="fc2.weight", source="script")


def scenario_fit(w):
    """Item 9: every operation of a 334-block deep MLP (2,000 nodes), Ctrl+0: the overview."""
    yield from open_and_run(w, "example:deep:blocks=334", 1)
    w.graph_panel.view_state.detail = None  # every operation, laid out and fitted afresh
    yield 1.0
    yield lambda: not w.busy()
    w.graph_panel.fit_action.trigger()


def scenario_tooltips(w):
    """Item 11: the parameter table's "Norm" header says what the figure is."""
    yield from open_and_run(w, "example:digits", 3)
    w._tip = ("table", "Norm")


SCENARIOS = {"layout": scenario_layout, "hook-nodes": scenario_hook_nodes, "nan": scenario_nan,
             "run-view": scenario_run_view, "names": scenario_names, "plots": scenario_plots,
             "fit": scenario_fit, "tooltips": scenario_tooltips}


def open_and_run(w, spec: str, steps: int, **options):
    from gradexplorer.core.model.spec import ModelOptions
    from gradexplorer.core.session.engine import SessionConfig

    options.setdefault("batch_size", 16)
    w.controller.open_model(spec, ModelOptions(**options), SessionConfig(device="cpu"))
    yield lambda: w.controller.session.live is not None and w.graph_panel.drawing is not None and not w.busy()
    if steps:
        w.controller.run(steps)
        yield lambda: (w.controller.timeline.latest is not None
                       and w.controller.timeline.latest.step >= steps and not w.busy())
    yield 0.5


_RUN: list[Path] = []


def write_run() -> Path:
    """A 60-step run folder written by ``gx.watch`` around a plain loop (made once)."""
    if _RUN:
        return _RUN[0]
    import torch

    import gradexplorer as gx

    folder = Path(tempfile.mkdtemp(prefix="gx-shots-")) / "run"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    with gx.watch(model, opt, folder) as watcher:
        for _ in range(60):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            watcher.note_loss(loss)
            loss.backward()
            opt.step()
    _RUN.append(folder)
    return folder


def grab(w):
    """The window as drawn, with a tooltip shown over it painted in (tooltips are windows)."""
    from PySide6.QtGui import QPainter
    from PySide6.QtWidgets import QApplication

    image = w.grab().toImage()
    for top in QApplication.topLevelWidgets():
        if top.inherits("QTipLabel") and top.isVisible():  # where the mouse would show it
            painter = QPainter(image)  # (offscreen, Qt keeps it on an 800×800 "screen")
            painter.drawImage(getattr(w, "_tip_at", None) or w.mapFromGlobal(top.pos()),
                              top.grab().toImage())
            painter.end()
    return image


def show_tip(w) -> None:
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtWidgets import QToolTip

    which, title = w._tip
    view = w.table if which == "table" else w.tree
    header = view.horizontalHeader() if which == "table" else view.header()
    column = next(c for c in range(header.count())
                  if view.model().headerData(c, Qt.Horizontal) == title)
    if header.isSectionHidden(column):
        header.setSectionHidden(column, False)
    x = header.sectionViewportPosition(column) + header.sectionSize(column) // 2
    tip = view.model().headerData(column, Qt.Horizontal, Qt.ToolTipRole)
    QToolTip.showText(header.mapToGlobal(QPoint(x, 12)), tip, header)
    w._tip_at = header.mapTo(w, QPoint(x, 12 + 16))


def shoot(name: str, start: str, out: Path, sizes) -> list[Path]:
    """One window started in ``start``, the scenario played, the theme switched, grabbed."""
    from PySide6.QtCore import QSettings

    from gradexplorer.gui.app import build_window
    from gradexplorer.gui.settings import AppSettings

    other = "dark" if start == "light" else "light"
    settings = AppSettings(QSettings(tempfile.mktemp(suffix=".ini"), QSettings.IniFormat))
    w = build_window(settings, start)
    w.scripted, w._tip = True, None
    w.resize(*sizes[0])
    w.show()
    saved = []
    steps = SCENARIOS[name](w)

    def after():
        w.set_theme(other)  # the runtime switch every picture comes after
        yield 0.5
        for width, height in sizes:
            w.resize(width, height)
            yield SETTLE_S
            yield lambda: not w.busy()
            w.settle()
            if name == "fit":
                w.graph_panel.fit_action.trigger()
            if w._tip:
                show_tip(w)
            yield 0.5
            path = out / f"{name}-{width}x{height}-{other}.png"
            grab(w).save(str(path))
            saved.append(path)
    drive([steps, after()])
    w.close()
    return saved


def drive(generators, timeout_s: float = 600) -> None:
    """Run the generators' steps with the event loop running: a number waits that many
    seconds, a callable waits until it returns true."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    steps = (step for g in generators for step in g)
    state = {"until": 0.0, "cond": None, "start": time.monotonic()}

    failed = []

    def tick():
        try:
            advance()
        except BaseException as exc:  # stop the loop; raised below
            failed.append(exc)
            timer.stop()
            loop.quit()

    def advance():
        now = time.monotonic()
        if now - state["start"] > timeout_s:
            raise SystemExit("scenario timed out")
        if now < state["until"] or (state["cond"] is not None and not state["cond"]()):
            return
        state["cond"], state["until"] = None, 0.0
        step = next(steps, StopIteration)
        if step is StopIteration:
            timer.stop()
            loop.quit()
        elif callable(step):
            state["cond"] = step
        else:
            state["until"] = now + float(step)

    timer = QTimer(interval=30)
    timer.timeout.connect(tick)
    timer.start()
    loop.exec()
    if failed:
        raise failed[0]


def compress(paths: list[Path]) -> None:
    """256-colour PNGs (ImageMagick), kept at full size; skipped when convert is missing."""
    convert = shutil.which("convert")
    if convert is None:
        return
    for path in paths:
        subprocess.run([convert, str(path), "-dither", "None", "-colors", "256", "-define",
                        "png:compression-level=9", f"PNG8:{path}"], check=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", help="comma-separated scenarios: " + ",".join(SCENARIOS))
    parser.add_argument("--sizes", help="comma-separated WxH (default all three)")
    parser.add_argument("--start", choices=("light", "dark"), action="append",
                        help="the theme windows start in (default both, one after the other)")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(SCENARIOS)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")] if args.sizes else SIZES
    from gradexplorer.gui.app import start_app

    start_app()
    args.out.mkdir(parents=True, exist_ok=True)
    for start in args.start or ("light", "dark"):
        for name in names:
            began = time.monotonic()
            saved = shoot(name, start, args.out, sizes)
            compress(saved)
            print(f"{name} (started {start}): {len(saved)} pictures in {time.monotonic() - began:.0f} s",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
