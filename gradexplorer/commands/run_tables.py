"""``inspect`` and ``compare`` for run directories (what ``gradexplorer.watch`` writes)."""

from __future__ import annotations

from gradexplorer.commands.table_text import number, table
from gradexplorer.core.errors import UserError
from gradexplorer.core.graph.style import format_shape
from gradexplorer.core.recorder.run import Run, open_run
from gradexplorer.core.stats.histogram import sparkline


def pick_step(run: Run, step: int | None) -> int:
    """``step``, or the run's last complete step."""
    last = run.last_step
    if last is None:
        raise UserError(f"run {str(run.path)!r} has no complete step yet")
    return last if step is None else step


def inspect_run(path: str, step: int | None, width: int) -> int:
    run = open_run(path)
    step = pick_step(run, step)
    info = run.step_info(step)
    structure = run.structure
    steps = run.steps
    snaps = list(run.snapshots)
    print(f"{run.path}: run of {structure.get('model', '?')}, steps {steps[0]}..{steps[-1]} "
          f"({len(steps)} recorded), snapshots at {snaps or 'none'}")
    print(f"step {step}: global norm {number(info['global_norm'])}, loss {number(info['loss'])}, "
          f"{info['total_numel'] or 0:,} numbers over {info['ranks']} rank(s)")
    norms = run.rank_norms(step)
    if norms:
        from gradexplorer.core.recorder.per_rank import spread

        name, worst = max(spread(norms).items(), key=lambda kv: kv[1])
        print(f"per-rank norms of {len(norms)} ranks: largest spread {worst:.3g} ({name})"
              + ("" if worst == 0 else "  <- the ranks hold different gradients"))
    for name, cause in run.not_recorded(step).items():  # a failed measurement, training went on
        print(f"not recorded: {name or 'the update ratios'} ({cause})")
    shapes = {p["name"]: p["shape"] for p in structure.get("parameters", [])}
    hists = run.histograms(step)
    rows = []
    for name, s in run.stats(step).items():
        spark = sparkline(hists[name].counts, width) if name in hists else ""
        rows.append([name, format_shape(shapes.get(name, [])), number(s["norm"]),
                     number(s["abs_max"]), f"{s['nan_count']}/{s['inf_count']}",
                     number(s["update_ratio"]), f"|{spark}|" if spark else ""])
    headers = ["parameter", "shape", "norm", "max |g|", "NaN/Inf", "update", "histogram"]
    print(table(headers, rows, left=2))
    return 0


def compare_runs(path_a: str, path_b: str | None, steps: list[int] | None) -> int:
    from gradexplorer.core.recorder.compare import compare_run_steps

    a = open_run(path_a)
    b = open_run(path_b) if path_b else a
    if path_b is None and not steps:
        raise UserError("to compare two steps of one run give them: --steps K L")
    step_a = pick_step(a, steps[0] if steps else None)
    step_b = pick_step(b, steps[1] if steps else None)
    rows = compare_run_steps(a, step_a, b, step_b)
    print(f"A: {a.path} step {step_a}")
    print(f"B: {b.path} step {step_b}")
    cells = [[r.name, number(r.norm_a), number(r.norm_b), number(r.norm_ratio),
              number(r.hist_distance, 3)] for r in rows]
    print(table(["parameter", "norm A", "norm B", "B/A", "hist EMD"], cells))
    print("hist EMD: earth mover's distance between the gradient histograms, in gradient units")
    return 0
