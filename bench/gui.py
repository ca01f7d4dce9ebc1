"""GUI benchmark: the GUI thread's worst stall while training runs at full speed, the frames
each plot actually paints meanwhile, and the frame time of pan and zoom on a ~10k-node
backward graph.

    python bench/gui.py [--model example:digits] [--steps 300] [--graph-blocks 2000]
    python bench/gui.py --startup [--runs 5]   # process start -> window painted -> first graph
                                               # (ready to step: bench/cold_start.py)

Runs offscreen (QT_QPA_PLATFORM=offscreen) unless a display is set.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from PySide6.QtCore import QElapsedTimer, QEvent, QObject, QSettings, QTimer  # noqa: E402

from gradexplorer.core.model.spec import ModelOptions, load_workload  # noqa: E402
from gradexplorer.core.session.engine import SessionConfig, TrainingSession  # noqa: E402
from gradexplorer.gui.app import application, build_window  # noqa: E402
from gradexplorer.gui.settings import AppSettings  # noqa: E402

HEARTBEAT_MS = 5


class PaintCounter(QObject):
    """Counts the paint events a widget receives: the frames it really draws."""

    def __init__(self, widget) -> None:
        super().__init__()
        self.times: list[float] = []
        widget.installEventFilter(self)

    @property
    def frames(self) -> int:
        return len(self.times)

    def eventFilter(self, _obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() == QEvent.Paint:
            self.times.append(time.perf_counter())
        return False


class StepClock:
    """A session observer noting when each step finished (on the training thread)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def after_step(self, _session, _result) -> None:
        self.times.append(time.perf_counter())


def step_to_frame_ms(steps: list[float], frames: list[float]) -> np.ndarray:
    """For each step, the milliseconds until the plot next painted (steps never painted: none)."""
    frames_array = np.asarray(frames)
    at = np.searchsorted(frames_array, steps)
    shown = at < len(frames_array)
    return (frames_array[at[shown]] - np.asarray(steps)[shown]) * 1e3


def plot_viewports(window) -> dict:
    """The widgets that paint each live view of the main window."""
    g = window.gradients
    return {"loss/norm curves": window.curves.viewport(), "histogram": g.histogram.viewport(),
            "heat map": g.heatmap.viewport(), "gradient flow": g.flow.viewport(),
            "parameter table": window.table.viewport(),
            "graph (tint)": window.graph_panel.view.viewport()}


def heartbeat_during_run(model: str, steps: int) -> dict:
    """Run ``steps`` steps in the app's worker; a 5 ms timer on the GUI thread measures stalls."""
    app = application()
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"gradexplorer-bench-{os.getpid()}"
    window = build_window(AppSettings(QSettings(str(folder / "s.ini"), QSettings.IniFormat)))
    window.show()
    controller = window.controller
    controller.open_model(model, ModelOptions(), SessionConfig(device="cpu"))
    while controller.session.live is None or window.busy():
        app.processEvents()
        time.sleep(0.01)
    gaps: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.nsecsElapsed()]

    def beat() -> None:
        now = clock.nsecsElapsed()
        gaps.append((now - last[0]) / 1e6)
        last[0] = now

    counters = {name: PaintCounter(widget) for name, widget in plot_viewports(window).items()}
    clock_steps = StepClock()
    session = controller.session.live.session
    controller.post(lambda: session.add_observer(clock_steps))  # jobs change core objects
    timer = QTimer()
    timer.setInterval(HEARTBEAT_MS)
    timer.timeout.connect(beat)
    timer.start()
    start = time.perf_counter()
    first_step = controller.session.live.session.step_count
    controller.run(steps)
    while controller.busy:
        app.processEvents()
        time.sleep(0.001)
    seconds = time.perf_counter() - start
    timer.stop()
    done = controller.session.live.session.step_count - first_step
    window.close()
    stalls = np.array(gaps[1:]) - HEARTBEAT_MS
    latency = step_to_frame_ms(clock_steps.times, counters["histogram"].times)
    return {"steps": done, "steps_per_s": done / seconds, "worst_stall_ms": float(stalls.max()),
            "p99_stall_ms": float(np.percentile(stalls, 99)),
            "frames_per_s": {name: c.frames / seconds for name, c in counters.items()},
            "latency_ms": (float(np.median(latency)), float(np.percentile(latency, 95)))}


def graph_frames(blocks: int) -> dict:
    """Trace, lay out and draw the deep example's graph; time pan and zoom repaints."""
    from gradexplorer.gui.graph.core_api import layout_graph, trace_backward_graph
    from gradexplorer.gui.graph.layout_worker import lay_out
    from gradexplorer.gui.graph.view import GraphView

    app = application()
    session = TrainingSession(load_workload(f"example:deep:blocks={blocks}"), SessionConfig("cpu"))
    t0 = time.perf_counter()
    graph = trace_backward_graph(session)
    trace_s = time.perf_counter() - t0
    laid = lay_out(graph, "layered", layout_graph)
    view = GraphView()
    view.resize(1200, 800)
    view.show()
    view.canvas.set_drawing(laid.drawing, laid.overview, laid.scale)
    app.processEvents()
    rows = {}
    for label, scale in (("fit", None), ("far", 0.05), ("mid", 0.2), ("near", 0.5), ("close", 1.0)):
        if scale is None:
            view.fit()
        else:
            view.resetTransform()
            view.scale(scale, scale)
            view.centerOn(0.0, float(np.median(laid.drawing.xy[:, 1])))
        app.processEvents()
        rows[label] = (view.scale_factor, _frames(app, view, "pan"), _frames(app, view, "zoom"))
    view.close()
    return {"nodes": len(laid.drawing), "edges": len(laid.drawing.edges), "trace_s": trace_s,
            "layout_s": laid.seconds, "rows": rows}


def first_view(blocks: int) -> dict:
    """Seconds from "open example:deep:blocks=N" in the app to its first view drawn (collapsed to
    a readable depth and fitted: the first repaint after the graph panel's ``laid_out``), and on
    to everything settled (the module tree, parameter table and hook-safety probe, which wait for
    that first view), with the steps inside it."""
    from gradexplorer.core.graph.collapse import readable_depth
    from gradexplorer.gui.training.live_session import prepare_training_thread

    prepare_training_thread()  # once per process (the statistics kernels load): not timed
    app = application()
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"gradexplorer-bench-{os.getpid()}"
    window = build_window(AppSettings(QSettings(str(folder / "f.ini"), QSettings.IniFormat)))
    window.resize(1600, 1000)
    window.show()
    app.processEvents()
    panel = window.graph_panel
    spec = f"example:deep:blocks={blocks}"
    drawn = []
    panel.laid_out.connect(lambda _g: drawn.append(panel.view.viewport().repaint()))
    t0 = time.perf_counter()
    window.controller.open_model(spec, ModelOptions(), SessionConfig("cpu"))
    while not drawn:
        app.processEvents()
        time.sleep(0.002)
    first = time.perf_counter() - t0
    while panel.drawing is None or window.busy():
        app.processEvents()
        time.sleep(0.002)
    panel.view.viewport().repaint()
    total = time.perf_counter() - t0
    graph = panel.graph
    t1 = time.perf_counter()
    depth = readable_depth(graph)
    depth_s = time.perf_counter() - t1
    result = {"seconds": first, "settled": total, "nodes": len(graph), "shown": len(panel.drawing),
              "depth": depth, "depth_s": depth_s}
    window.close()
    return result


def hook_clicks(blocks: int, clicks: int = 6) -> dict:
    """Attach/detach a hook on a middle block of the deep graph: time from the hook change
    reaching the graph panel to the repainted view (the app's path after the job returns)."""
    from gradexplorer.gui.graph.core_api import trace_backward_graph
    from gradexplorer.gui.graph.panel import GraphPanel
    from gradexplorer.gui.models.selection import SelectionModel

    app = application()
    session = TrainingSession(load_workload(f"example:deep:blocks={blocks}"), SessionConfig("cpu"))
    panel = GraphPanel(SelectionModel())
    panel.resize(1200, 800)
    panel.show()
    panel.set_graph(trace_backward_graph(session), fit=False)  # every operation, not collapsed
    while panel.busy() or panel.drawing is None:
        app.processEvents()
        time.sleep(0.01)
    module = f"blocks.{blocks // 2}"
    times, cpu, hooks = [], [], {}
    for i in range(clicks):
        attach = i % 2 == 0
        t, c = time.perf_counter(), time.process_time()
        if not panel.edit_hooks([module] if attach else [], [] if attach else [module],
                                session.model):
            raise RuntimeError("hook nodes needed a trace")
        hooks = {module: "observe"} if attach else {}
        panel.set_hooks(hooks)
        panel.view.viewport().repaint()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)  # this process's CPU: the cost without other load
        settle = time.perf_counter() + 0.5  # the overview image re-renders after a pause
        while time.perf_counter() < settle:
            app.processEvents()
            time.sleep(0.01)
        panel.overviews.wait()
    panel.close()
    return {"nodes": len(panel.drawing), "mean_ms": float(np.mean(times) * 1e3),
            "worst_ms": float(np.max(times) * 1e3), "cpu_ms": float(np.mean(cpu) * 1e3)}


def _frames(app, view, kind: str, count: int = 40) -> tuple[float, float]:
    times = []
    bar = view.verticalScrollBar()
    for i in range(count):
        t = time.perf_counter()
        if kind == "pan":
            bar.setValue(bar.value() + (25 if i % 2 else -25))
        else:
            view.zoom(1.04 if i < count // 2 else 1 / 1.04)
        view.viewport().repaint()
        times.append(time.perf_counter() - t)
    return float(np.mean(times) * 1e3), float(np.max(times) * 1e3)


def startup_times(runs: int) -> dict:
    """Median seconds from starting ``gradexplorer gui`` (a new process, fresh settings and
    cache: ``cold_start.launch``) to its window's first paint, to the first graph drawn (the
    default example's from the shipped graph cache) and to the live traced graph drawn, over
    ``runs`` launches, and the CPU seconds the process had used by then (``*_cpu``)."""
    from cold_start import compile_package, launch

    compile_package()
    seen = [launch({}, until="live") for _ in range(runs)]
    out = {}
    for name in ("window", "graph", "live"):
        found = [run[name] for run in seen if name in run]
        out[name] = float(np.median([t for t, _ in found])) if found else float("nan")
        out[f"{name}_cpu"] = float(np.median([c for _, c in found])) if found else float("nan")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--startup", action="store_true",
                        help="only start-up: process start -> window painted -> first graph drawn")
    parser.add_argument("--runs", type=int, default=5, help="launches for --startup (median)")
    parser.add_argument("--model", default="example:digits")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--graph-blocks", type=int, default=2000,
                        help="deep example blocks (2000 gives about 12k nodes, 8400 about 50k)")
    parser.add_argument("--graph-only", action="store_true",
                        help="only the graph: first view and pan/zoom (no training run)")
    args = parser.parse_args()
    if args.startup:
        load = os.getloadavg()[0]
        times = startup_times(args.runs)
        print(f"start-up of the default example, median of {args.runs}: window painted "
              f"{times['window']:.2f} s (bar: <= 1.0 s), first graph drawn {times['graph']:.2f} s "
              f"(bar: <= 2.5 s), live traced graph drawn {times['live']:.2f} s; CPU used by then "
              f"{times['window_cpu']:.2f}, {times['graph_cpu']:.2f} and {times['live_cpu']:.2f} s; "
              f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
        return 0
    fv = first_view(args.graph_blocks)
    print(f"open example:deep:blocks={args.graph_blocks} to its first view: {fv['seconds']:.2f} s, "
          f"everything settled (tree, table, hook probe): {fv['settled']:.2f} s "
          f"({fv['nodes']:,} nodes shown as {fv['shown']} at module depth {fv['depth']}; "
          f"choosing the depth {fv['depth_s'] * 1e3:.0f} ms)  (bar: <= 1.5 s)")
    if not args.graph_only:
        print_run(args)
    print_graph(args)
    return 0


def print_run(args) -> None:
    """The training-run part: GUI stalls and frames per plot."""
    hb = heartbeat_during_run(args.model, args.steps)
    print(f"training {args.model}: {hb['steps']} steps at {hb['steps_per_s']:.1f} steps/s")
    print(f"  GUI thread stall (5 ms heartbeat lateness): worst {hb['worst_stall_ms']:.1f} ms, "
          f"p99 {hb['p99_stall_ms']:.1f} ms  (bar: worst <= 50 ms)")
    print("  frames painted per second while running (bar: >= 10 for each plot; the table and "
          "the graph tint are throttled to about 8 and 4 by design):")
    for name, fps in hb["frames_per_s"].items():
        print(f"    {name:18} {fps:5.1f}")
    print(f"  step finished -> histogram painted: median {hb['latency_ms'][0]:.0f} ms, "
          f"p95 {hb['latency_ms'][1]:.0f} ms")


def print_graph(args) -> None:
    """The pan/zoom part on every operation of the graph (no collapsing)."""
    g = graph_frames(args.graph_blocks)
    print(f"graph example:deep:blocks={args.graph_blocks}: {g['nodes']:,} nodes, {g['edges']:,} "
          f"edges; trace {g['trace_s']:.2f} s, layout+drawing data {g['layout_s']:.2f} s")
    print(f"  {'view':6} {'px/unit':>8} {'pan mean':>9} {'pan worst':>10} {'zoom mean':>10} "
          f"{'zoom worst':>11} {'fps (mean)':>10}")
    for label, (scale, pan, zoom) in g["rows"].items():
        fps = 1000.0 / max(pan[0], zoom[0])
        print(f"  {label:6} {scale:8.3f} {pan[0]:7.1f}ms {pan[1]:8.1f}ms {zoom[0]:8.1f}ms "
              f"{zoom[1]:9.1f}ms {fps:10.0f}")
    h = hook_clicks(args.graph_blocks)
    print(f"  hook click -> graph redrawn ({h['nodes']:,} nodes, no trace, layout kept): "
          f"mean {h['mean_ms']:.0f} ms, worst {h['worst_ms']:.0f} ms wall; {h['cpu_ms']:.0f} ms CPU"
          "  (bar: <= 100 ms)")


if __name__ == "__main__":
    sys.exit(main())
