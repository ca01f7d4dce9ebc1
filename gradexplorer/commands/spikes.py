"""``gradexplorer spikes RUN``: the spike events of a run, who moved first, and the batch."""

from __future__ import annotations

import argparse

from gradexplorer.commands.flag_values import whole_number
from gradexplorer.commands.table_text import table
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.messages.printable import printable


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("spikes", help="list a run's loss and gradient spikes: which layer "
                                           "moved first, and on which batch")
    parser.add_argument("run", metavar="RUN", help="a run directory (gradexplorer.watch)")
    parser.add_argument("--top", type=whole_number(1), default=3, metavar="N",
                        help="parameters listed per event, first to move first (default 3)")
    parser.add_argument("--step", type=whole_number(0), default=None, metavar="K",
                        help="show the event that begins at step K in full")
    parser.set_defaults(func=spikes_command)


def event_lines(run, event, top: int) -> list[str]:
    """What ``spikes`` prints about one event."""
    from gradexplorer.core.diagnose.spikes import factor_text, ids_text  # (numpy)

    snap = run.snapshots.get(event.step)
    lines = [f"step {event.step}" + (f" to {event.until}" if event.until != event.step else "")
             + ": " + "; ".join(event.reasons),
             f"  batch: {ids_text(event.batch)}" + (f"; snapshot {snap}" if snap else "")]
    if event.samples:
        worst = ", ".join(f"{s.get('id', '#' + str(s['index']))} (loss {s['loss']:.4g})"
                          if isinstance(s["loss"], float) else f"{s.get('id', s['index'])} "
                          f"(loss {s['loss']})" for s in event.samples[:top])
        lines.append(f"  largest losses: {worst}")
    if event.grad_samples:  # watch(per_sample_norms=True)
        lines.append("  largest per-sample gradient norms: " + ", ".join(
            f"{s.get('id', '#' + str(s['index']))} ({s['norm']:.4g})" if isinstance(s["norm"], float)
            else f"{s.get('id', '#' + str(s['index']))} ({s['norm']})"
            for s in event.grad_samples[:top]))
    rows = [[str(i + 1), r["name"], r["figure"], str(r["onset"]), factor_text(r["factor"])]
            for i, r in enumerate(event.ranking[:top])]
    if rows:
        text = table(["#", "first to move", "figure", "onset", "peak"], rows, left=3)
        lines += ["  " + line for line in text.splitlines()]
    if event.modules:
        lines.append("  modules: " + ", ".join(
            f"{m['name'] or '(model)'} (step {m['onset']})" for m in event.modules[:top]))
    return lines


def spikes_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.runs.run import open_run

    run = open_run(args.run)
    events = run.spike_events()
    if args.step is not None:
        events = [e for e in events if e.step == args.step]
        if not events:
            raise UserError(f"run {str(run.path)!r} has no spike event at step {args.step} "
                            f"(events at: {[e.step for e in run.spike_events()] or 'none'})")
    steps = run.steps
    held = f"steps {steps[0]}..{steps[-1]}" if steps else "no steps yet"
    print(f"{run.path}: {len(events)} spike event(s) over {held}")
    top = len(events[0].ranking) if args.step is not None and events else max(1, args.top)
    for event in events:
        print("\n".join(printable(line) for line in event_lines(run, event, top)))
    if events:
        print("peak: the figure's largest value during the event as a multiple of its band's "
              "median; onset: the first step of its climb")
    return 0
