"""``gradexplorer graph``: extract a model's backward graph, lay it out and write it to a file."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from gradexplorer.commands.common import add_model_arguments, load_from_args
from gradexplorer.commands.flag_values import byte_size, whole_number
from gradexplorer.commands.gui import display_problem
from gradexplorer.commands.hook_options import add_hook_arguments, attach_hooks_from_args
from gradexplorer.core.files.output_path import check_output_file
from gradexplorer.core.graph.deep_stack import run_with_deep_stack
from gradexplorer.core.graph.export import EXPORT_FORMATS
from gradexplorer.core.graph.layout import LAYOUTS
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot.format import snapshot_name

FORMATS = (*EXPORT_FORMATS, ".png")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "graph", help="write the backward graph (.json, .graphml, .dot, .svg, .png)",
        description="Trace one forward pass, extract the autograd graph behind the loss with "
        "each node's module, lay it out and write it; the extension of --out picks the format.",
    )
    add_model_arguments(parser)
    parser.add_argument("--device", default="cpu", help="device for the forward pass (default cpu)")
    g = parser.add_argument_group("graph")
    g.add_argument("--out", required=True, metavar="FILE",
                   help=f"output file: {', '.join(FORMATS)} (.png is drawn by the app's renderer)")
    g.add_argument("--overwrite", action="store_true", help="replace --out if it exists (default: refuse)")
    g.add_argument("--layout", default="layered", choices=LAYOUTS, help="node placement (default layered)")
    g.add_argument("--collapse", type=whole_number(1), metavar="DEPTH",
                   help="fold modules deeper than DEPTH into one node each (1 = top-level modules)")
    g.add_argument("--collapse-module", action="append", default=[], metavar="PATH",
                   help="fold this module into one node (repeatable)")
    g.add_argument("--expand", action="append", default=[], metavar="PATH",
                   help="keep this module open when collapsing (repeatable)")
    g.add_argument("--hide-hooks", action="store_true",
                   help="leave out the nodes that full backward hooks insert")
    g.add_argument("--no-saved", action="store_true", help="skip the shapes of saved tensors")
    g.add_argument("--trace-grads", action="store_true",
                   help="also run the backward pass with a hook on every node: each node gets its "
                   "gradient's norm, max |g| and finiteness, each edge the gradient along it, and "
                   "the node where NaN/Inf is born is marked (parameters' .grad are untouched)")
    g.add_argument("--keep", action="append", default=[], metavar="NAME",
                   help="keep the full gradients this module's ops (or node id, node17, or op name, "
                   "AddmmBackward0) receive and send in the traced step, written as a snapshot "
                   "(keys node17.AddmmBackward0.grad_input.0); repeatable; implies --trace-grads")
    g.add_argument("--keep-max-bytes", type=byte_size, metavar="SIZE",
                   help="refuse to keep more than this (e.g. 500MB; default 1GB); the size is "
                   "printed before the backward runs")
    g.add_argument("--keep-dir", metavar="DIR",
                   help="folder for the kept gradients' snapshot kept-step-NNNNNN (default: --out's)")
    add_hook_arguments(parser)
    parser.set_defaults(func=graph_command)


def graph_command(args: argparse.Namespace) -> int:
    png = Path(args.out).suffix.lower() == ".png"
    if Path(args.out).suffix.lower() not in FORMATS:
        raise UserError(f"cannot tell the format of {args.out!r}: use one of {', '.join(FORMATS)}")
    check_output_file(args.out, overwrite=args.overwrite)
    kept_dir = Path(args.keep_dir or Path(args.out).parent) / f"kept-{snapshot_name(0)}"  # a new session's
    if args.keep and kept_dir.exists() and not args.overwrite:  # step: refused before tracing
        raise UserError(f"{kept_dir} already exists: use --overwrite, another --keep-dir, or move it")
    # tracing, and freeing, a deep autograd graph recurses natively: a big stack for that part;
    # the drawing stays on the main thread, where Qt (the PNG renderer) must live
    G, notes, t0, t1 = run_with_deep_stack(lambda: _traced(args))
    from gradexplorer.core.diagnose.explain import explain_graph  # (networkx, loaded by now)

    explain_graph(G)
    if png:
        path = write_png(G, args.layout, Path(args.out))
    else:
        from gradexplorer.core.graph.export.files import export_graph
        from gradexplorer.core.graph.layout.positions import layout_drawing

        drawing = layout_drawing(G, args.layout)
        path = export_graph(G, drawing.positions, args.out, edge_points=drawing.edge_points)
    t2 = time.perf_counter()
    kinds = Counter(kind for _, kind in G.nodes(data="kind"))
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    print(f"{path}: {G.number_of_nodes():,} nodes ({summary}), {G.number_of_edges():,} edges; "
          f"traced in {t1 - t0:.2f} s, {args.layout} layout in {t2 - t1:.2f} s")
    for note in notes:
        print(note)
    return 0


def _traced(args: argparse.Namespace):
    """The graph ``args`` ask for (traced, hooks hidden, collapsed), notes to print, and timings."""
    from gradexplorer.core.diagnose.nan_origin import loss_origin, nonfinite_origin
    from gradexplorer.core.diagnose.nan_texts import origin_text
    from gradexplorer.core.diagnose.trace_grads import trace_gradients
    from gradexplorer.core.graph.collapse import collapse_by_module
    from gradexplorer.core.graph.extract import hide_hook_nodes, trace_backward_graph
    from gradexplorer.core.session.engine import SessionConfig, TrainingSession

    session = TrainingSession(load_from_args(args), SessionConfig(device=args.device, seed=args.seed))
    attach_hooks_from_args(session, args)
    t0 = time.perf_counter()
    notes: list[str] = []
    if args.trace_grads or args.keep:
        limit = {} if args.keep_max_bytes is None else {"max_bytes": args.keep_max_bytes}
        G = trace_gradients(session, saved=not args.no_saved, keep=args.keep, **limit,
                            on_plan=lambda plan: print(plan.text()))
        if args.keep:
            notes.append(kept_text(G.graph["kept"].write(
                Path(args.keep_dir or Path(args.out).parent), session, replace=args.overwrite),
                G.graph["kept"]))
        origin = nonfinite_origin(G)
        notes.append(f"gradients traced on {G.graph['grad_traced']:,} nodes; loss {G.graph['loss']:.6g}")
        if origin is not None:
            notes.append(f"first non-finite gradient: {origin_text(G.nodes[origin])} (node {origin})")
        forward = loss_origin(session, G)
        if forward is not None:
            notes.append(forward["text"])
    else:
        G = trace_backward_graph(session, saved=not args.no_saved)
    t1 = time.perf_counter()
    if args.hide_hooks:
        G = hide_hook_nodes(G)
    check_module_paths(G, {"--collapse-module": args.collapse_module, "--expand": args.expand})
    if args.collapse is not None or args.collapse_module:
        G = collapse_by_module(G, depth=args.collapse, modules=args.collapse_module, expanded=args.expand)
    return G, notes, t0, t1


def kept_text(path: Path, kept) -> str:
    """Where the kept gradients went, and per op its tensors' shapes."""
    from gradexplorer.core.graph.style import format_shape, short_source

    lines = [f"kept {kept} of step {kept.step}: {path}"]
    for op in kept.ops:
        where = f" at {short_source(op['source'])}" if op["source"] else ""
        tensors = ", ".join(f"{key.split('.', 2)[2]} {format_shape(tuple(kept[key].shape))}"
                            for key in op["keys"])
        lines.append(f"  node{op['node']} {op['op']} in {op['module'] or '<root>'}{where}: "
                     f"{tensors or 'no gradient'}")
    return "\n".join(lines)


def check_module_paths(G, flags: dict[str, list[str]]) -> None:
    """Each module path a flag names is a module of the traced model."""
    import difflib

    known = set(G.graph.get("module_types", {})) | {a.get("module") or "" for _, a in G.nodes(data=True)}
    for flag, paths in flags.items():
        for path in paths:
            if path.strip() not in known:
                close = difflib.get_close_matches(path, [k for k in known if k], n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else \
                    " (gradexplorer hooks --model … lists the modules)"
                raise UserError(f"{flag} {path!r}: the model has no module {path!r}{hint}")


def write_png(G, layout: str, path: Path) -> Path:
    """Draw with the app's own canvas (the PNG looks like the window), offscreen without a display."""
    import os

    if display_problem():
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from gradexplorer.gui.graph.image_file import write_graph_png

    return write_graph_png(G, layout, path)
