"""``inspect`` and ``compare`` for run directories (what ``gradexplorer.watch`` writes)."""

from __future__ import annotations

from gradexplorer.commands.noise_lines import noise_lines, snr_column
from gradexplorer.commands.table_text import number, table, update_ratio
from gradexplorer.core.graph.style import format_shape
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.messages.printable import printable
from gradexplorer.core.runs.run import Run, open_run
from gradexplorer.core.runs.settings_text import cadence_text
from gradexplorer.core.stats.histogram import sparkline
from gradexplorer.core.stats.optimizer_state import STATE_FIELDS, STATE_LABELS
from gradexplorer.core.stats.records import whole_figures
from gradexplorer.core.steps.ledger import rolling_summary


def pick_step(run: Run, step: int | None) -> int:
    """``step``, or the run's last complete step."""
    last = run.last_step
    if last is None:
        raise UserError(f"run {str(run.path)!r} has no complete step yet")
    return last if step is None else step


def ledger_lines(run: Run, step: int) -> list[str]:
    """What happened at the step (the two measuring points, clip, scale, skip) and the rolling
    clip rate and skip count."""
    led = run.step_ledger(step)
    if led.iteration is None and led.lr is None and led.grad_norm_accumulated is None \
            and not led.skipped:
        return []  # a run written before the ledger
    micro = "" if led.micro_batches is None else \
        f" ({led.micro_batches} micro-batch{'es' if led.micro_batches != 1 else ''})"
    scale = "" if led.scale is None else f" (scaled by {number(led.scale)})"
    lines = [f"optimizer step {led.optimizer_step}, iteration {number(led.iteration)}{micro}: "
             f"grad norm as accumulated {number(led.grad_norm_accumulated)}{scale}, "
             f"as applied {number(led.grad_norm_applied)}"]
    if led.skipped:
        lines.append(f"SKIPPED: {led.skip_reason} ({led.nan_count} NaN, {led.inf_count} Inf)")
    elif led.clip_coef is not None:
        lines.append(f"clip coefficient {number(led.clip_coef)}"
                     + (" (clipped)" if led.clipped else " (not clipped)"))
    if led.lr:
        lines.append("learning rate " + ", ".join(number(lr) for lr in led.lr))
    summary = rolling_summary([x for x in run.ledger(after=max(-1, step - 101))
                               if x.optimizer_step <= step])
    rate = "—" if summary["clip_rate"] is None else f"{100 * summary['clip_rate']:.0f}%"
    lines.append(f"last {summary['steps']} recorded steps: clipped {rate}, "
                 f"skipped {summary['skipped']}")
    return lines


def optimizer_columns(stats: dict) -> list[str]:
    """The optimizer-state fields any parameter has at this step."""
    return [f for f in STATE_FIELDS if any(s.get(f) is not None for s in stats.values())]


def inspect_run(path: str, step: int | None, width: int) -> int:
    run = open_run(path)
    step = pick_step(run, step)
    info = run.step_info(step)
    structure = run.structure
    steps = run.steps
    snaps = list(run.snapshots)
    print(f"{run.path}: run of {printable(str(structure.get('model', '?')))}, steps {steps[0]}..{steps[-1]} "
          f"({len(steps)} recorded), snapshots at {snaps or 'none'}")
    print(f"step {step}: global norm {number(info['global_norm'])}, loss {number(info['loss'])}, "
          f"{info['total_numel'] or 0:,} numbers over {info['ranks']} rank(s)")
    print(f"recorded: {printable(cadence_text(run.settings))}")  # watch's cadence (budget.py)
    for line in ledger_lines(run, step) + noise_lines(run, step):
        print("  " + line)
    events = run.spike_events()
    if events:
        print(f"spike events: {len(events)}, at step(s) "
              f"{', '.join(str(e.step) for e in events[:8])}{' …' if len(events) > 8 else ''} "
              f"(gradexplorer spikes {run.path})")
    norms = run.rank_norms(step)
    if norms:
        from gradexplorer.core.watch.per_rank import spread

        name, worst = max(spread(norms).items(), key=lambda kv: kv[1])
        print(f"per-rank norms of {len(norms)} ranks: largest spread {worst:.3g} ({printable(name)})"
              + ("" if worst == 0 else "  <- the ranks hold different gradients"))
    per_sample = run.per_sample(step)  # watch(per_sample_norms=True)
    if per_sample is not None:
        print(f"{per_sample.as_step().summary()} (loss reduction {per_sample.reduction}); "
              "largest: " + ", ".join(printable(f"{e.get('id', '#' + str(e['index']))} "
                                                f"({number(e['norm'])})") for e in per_sample.top[:4]))
    for name, cause in run.not_recorded(step).items():  # a failed measurement, training went on
        print(printable(f"not recorded: {name or 'the update ratios'} ({cause})"))
    shapes = {p["name"]: p["shape"] for p in structure.get("parameters", [])}
    hists = run.histograms(step)
    stats = run.figures(step)
    state = optimizer_columns(stats)
    accumulated = any(s.get("grad_norm_accumulated") is not None for s in stats.values())
    snr = snr_column(run, step)  # the noise scale's SNR (docs/noise.md), where it was recorded
    rows = []
    for name, s in stats.items():
        s = whole_figures(s)  # a NaN/Inf gradient's norm and max |g|: nan/inf, not the finite part's
        spark = sparkline(hists[name].counts, width) if name in hists else ""
        rows.append([name, format_shape(shapes.get(name, [])),
                     *([number(s["grad_norm_accumulated"])] if accumulated else []),
                     number(s["norm"]), number(s["abs_max"]), f"{s['nan_count']}/{s['inf_count']}",
                     update_ratio(s["update_ratio"]), *(number(s[f]) for f in state),
                     *([number(snr.get(name))] if snr else []),
                     f"|{spark}|" if spark else ""])
    headers = ["parameter", "shape", *(["accumulated"] if accumulated else []),
               "applied" if accumulated else "norm", "max |g|", "NaN/Inf", "update",
               *(STATE_LABELS[f] for f in state), *(["SNR"] if snr else []), "histogram"]
    print(table(headers, rows, left=2))
    if accumulated:
        print("accumulated: ‖.grad‖ after the last backward (before unscaling and clipping); "
              "applied: the gradient the optimizer used, which the other figures describe")
    if snr:
        print("SNR: |G|²_est / (tr(Σ)_est / micro-batch size), of the gradient across the step's "
              "micro-batches or DDP ranks; ≤ 0: no signal measurable (docs/noise.md)")
    return 0


def compare_runs(path_a: str, path_b: str | None, steps: list[int] | None) -> int:
    from gradexplorer.core.runs.compare import compare_run_steps

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
