"""Cost of each hook action per training step, vs a bare step and vs a raw no-op full hook.

    python bench/hooks.py                      # resnet18-ish and a deep narrow MLP, CPU
    python bench/hooks.py --device cuda --resnet example:resnet18 --rounds 5

Every configuration is attached to the same session, measured, and detached again (the
registry's own detach), in interleaved rounds so that machine noise hits all rows alike.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.hooks import (  # noqa: E402
    HookRegistry,
    ParameterGradientWatcher,
    hookable_modules,
)
from gradexplorer.core.model.spec import load_workload  # noqa: E402
from gradexplorer.core.session.engine import SessionConfig, TrainingSession  # noqa: E402

USER_HOOK = "def hook(module, grad_input, grad_output):\n    return None\n"
Setup = Callable[[TrainingSession], Callable[[], None]]  # attach, return the detach


def raw_noop(paths: list[str] | None) -> Setup:
    """``register_full_backward_hook(lambda *a: None)`` on ``paths`` (None: every module)."""
    def setup(session: TrainingSession):
        modules = dict(session.model.named_modules())
        chosen = modules.values() if paths is None else [modules[p] for p in paths]
        handles = [m.register_full_backward_hook(lambda *a: None) for m in chosen]
        return lambda: [h.remove() for h in handles]
    return setup


def registry_action(path: str | None, action: str) -> Setup:
    """Attach ``action`` through a HookRegistry (on every module when ``path`` is None)."""
    def setup(session: TrainingSession):
        registry = HookRegistry(session.model)
        registry.install(session)
        if path is not None:
            registry.attach(path, action)
        for p, _, safe, _ in hookable_modules(session.model) if path is None else []:
            if safe:
                registry.attach(p, action)

        def teardown() -> None:
            registry.detach_all()
            registry.uninstall(session)
        return teardown
    return setup


def watcher(session: TrainingSession):
    """ParameterGradientWatcher on every parameter, reading the norms each step."""
    w = ParameterGradientWatcher(session.model).attach()
    session.add_observer(w)

    def teardown() -> None:
        session.remove_observer(w)
        w.detach()
    return teardown


def bare(session: TrainingSession):
    return lambda: None


NOOP_ONE, NOOP_ALL = "raw no-op full hook, one module", "raw no-op full hook, every module"


def configurations(target: str, user_file: Path) -> list[tuple[str, str, Setup]]:
    """(row label, baseline label, setup) for every measured configuration."""
    rows = [("bare step", "", bare), (NOOP_ONE, "", raw_noop([target]))]
    for action in ("observe", "observe:capture", "scale:0.5", "block", "clip:1.0", "noise:0.01",
                   "once:scale:0.5", f"file:{user_file}:hook"):
        label = "file:…:hook (user no-op)" if action.startswith("file:") else action
        rows.append((f"{label}, one module", NOOP_ONE, registry_action(target, action)))
    rows += [
        (NOOP_ALL, "", raw_noop(None)),
        ("observe, every module", NOOP_ALL, registry_action(None, "observe")),
        ("ParameterGradientWatcher, every parameter", NOOP_ALL, watcher),
    ]
    return rows


def measure(session: TrainingSession, setup: Setup, steps: int) -> list[float]:
    """Per-step wall times (seconds) of ``steps`` steps after one warm-up step."""
    teardown = setup(session)
    try:
        session.step()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            session.step()
            if session.device.type == "cuda":
                torch.cuda.synchronize(session.device)
            times.append(time.perf_counter() - t0)
        return times
    finally:
        teardown()


def bench_workload(spec: str, target: str, args, user_file: Path) -> dict[str, float]:
    """Fastest step time (ms) per configuration: on a shared machine, interference only adds."""
    session = TrainingSession(load_workload(spec), SessionConfig(device=args.device, lr=1e-4))
    rows = configurations(target, user_file)
    samples: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    for _ in range(args.rounds):
        for label, _, setup in rows:
            samples[label] += measure(session, setup, args.steps)
    leftovers = [n for n, m in session.model.named_modules()
                 if m._backward_hooks or m._forward_hooks or m._forward_pre_hooks]
    assert not leftovers, f"hooks left behind on {leftovers}"
    return {label: min(times) * 1000 for label, times in samples.items()}


def print_table(results: dict[str, dict[str, float]], rows) -> None:
    names = list(results)
    head = ["configuration"] + [h for n in names for h in (f"{n} ms", "× bare", "× no-op")]
    table = [head]
    for label, base, _ in rows:
        line = [label]
        for n in names:
            r = results[n]
            ms = r[label]
            ref = f"{ms / r[base]:.2f}" if base else ""
            line += [f"{ms:.2f}", f"{ms / r['bare step']:.2f}", ref]
        table.append(line)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for i, row in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resnet", default="example:resnet18:batch=2,size=32")
    parser.add_argument("--resnet-target", default="layer3.0.conv1")
    parser.add_argument("--deep", default="example:deep:blocks=200")
    parser.add_argument("--deep-target", default="blocks.100.fc")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    with tempfile.TemporaryDirectory() as tmp:
        user_file = Path(tmp) / "noop_hook.py"
        user_file.write_text(USER_HOOK)
        results = {}
        for name, spec, target in (("resnet18", args.resnet, args.resnet_target),
                                   ("deep MLP", args.deep, args.deep_target)):
            print(f"{name}: {spec} on {args.device} ...", file=sys.stderr, flush=True)
            results[name] = bench_workload(spec, target, args, user_file)
        print(f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} threads, "
              f"fastest of {args.rounds}×{args.steps} steps; one module = {args.resnet_target} "
              f"/ {args.deep_target}\n")
        print_table(results, configurations(args.resnet_target, user_file))


if __name__ == "__main__":
    main()
