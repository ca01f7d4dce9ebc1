"""``gradexplorer hooks``: which modules can carry a full backward hook, and why not."""

from __future__ import annotations

import argparse

from gradexplorer.commands.common import add_model_arguments, load_from_args
from gradexplorer.core.hooks import ACTION_HELP
from gradexplorer.core.messages.errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "hooks", help="list the modules a full backward hook can be attached to",
        description="List every module with its type, parameter count and whether a full "
        "backward hook is safe there (and why not). Attach hooks with: gradexplorer run "
        "--hook MODULE=ACTION.",
    )
    add_model_arguments(parser)
    parser.set_defaults(func=hooks_command)


def hooks_command(args: argparse.Namespace) -> int:
    from gradexplorer.core.hooks.hookable import OBSERVE_ONLY, display_name, hookable_modules, verdict
    from gradexplorer.core.model.forward_check import locate_forward_failure
    from gradexplorer.core.model.spec import sample_inputs

    workload = load_from_args(args)
    model, inputs = workload.model, sample_inputs(workload)
    try:
        rows = hookable_modules(model, inputs)
    except Exception as exc:  # noqa: BLE001 - the user's model failed in the probe forward
        failure = locate_forward_failure(model, inputs)
        raise (failure or UserError(f"forward pass failed: {exc}")) from None
    modules = dict(model.named_modules())
    table = [("MODULE", "TYPE", "PARAMS", "HOOK", "WHY")]
    for row in rows:
        params = sum(p.numel() for p in modules[row.path].parameters())
        reason = row.reason.removeprefix(OBSERVE_ONLY)
        table.append((display_name(row.path), row.type_name, f"{params:,}", verdict(row), reason))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    print(f"{workload.name}: {len(rows)} modules")
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4])
    print("actions: " + ", ".join(a.split(" — ")[0] for a in ACTION_HELP.values()))
    print(f"attach with: gradexplorer run --model {args.model} --hook MODULE=ACTION")
    return 0
