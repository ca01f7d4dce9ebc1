"""Cost of tracing gradients on every backward node, vs a bare step and vs detect_anomaly.

    python bench/trace_grads.py                                  # lenet, transformer, 12k-node deep
    python bench/trace_grads.py --model example:resnet --rounds 5

Per model, interleaved rounds (median): a bare training step; ``trace_gradients`` (forward,
graph extraction, backward with a hook on every node, one host transfer of all figures); the
same without the hooks (forward + extraction + plain backward: what the hooks themselves add);
and a step under ``torch.autograd.detect_anomaly`` (PyTorch's own way to hunt NaN).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gradexplorer as gx  # noqa: E402
from gradexplorer.core.graph.attribution import ModuleAttribution  # noqa: E402
from gradexplorer.core.model.training_state import preserved_state  # noqa: E402

MODELS = ("example:lenet", "example:transformer", "example:deep:blocks=2000")


def _untraced(session: gx.TrainingSession) -> None:
    """What trace_gradients does minus the node hooks."""
    with preserved_state(session.model, session.device):
        with ModuleAttribution(session.model) as attribution:
            loss = session.forward_loss()
        gx.graph.extract_graph(loss, session.model, attribution, saved=True)
        leaves = [p for p in session.model.parameters() if p.requires_grad]
        torch.autograd.grad(loss, leaves, allow_unused=True)


def _anomaly_step(session: gx.TrainingSession) -> None:
    with torch.autograd.detect_anomaly(check_nan=True):
        session.step()


METHODS: dict[str, Callable[[gx.TrainingSession], object]] = {
    "bare step": lambda s: s.step(),
    "trace_gradients": gx.diagnose.trace_gradients,
    "same without hooks": _untraced,
    "detect_anomaly step": _anomaly_step,
}


def measure(spec: str, rounds: int = 3, device: str = "cpu") -> dict:
    """Median seconds per method for ``spec``, and the graph's size."""
    # a tiny learning rate: every round sees (almost) the same, finite model
    session = gx.TrainingSession(gx.load_workload(spec), gx.session.SessionConfig(device=device, lr=1e-7))
    session.step()  # warm-up
    G = gx.diagnose.trace_gradients(session)
    times: dict[str, list[float]] = {name: [] for name in METHODS}
    for _ in range(rounds):
        for name, method in METHODS.items():
            t0 = time.perf_counter()
            method(session)
            if session.device.type == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - t0)
    return {"spec": spec, "nodes": G.number_of_nodes(), "traced": G.graph["grad_traced"],
            "median": {k: statistics.median(v) for k, v in times.items()}}


def report(result: dict) -> str:
    med = result["median"]
    bare = med["bare step"]
    lines = [f"{result['spec']}: {result['nodes']:,} nodes, {result['traced']:,} traced"]
    for name, seconds in med.items():
        lines.append(f"  {name:<22} {seconds * 1000:9.1f} ms  {seconds / bare:6.2f}× bare step")
    hooks = med["trace_gradients"] - med["same without hooks"]
    lines.append(f"  node hooks alone       {hooks * 1000:9.1f} ms  "
                 f"{hooks * 1e6 / max(1, result['traced']):6.1f} µs per node")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="model spec (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    for spec in args.model or MODELS:
        print(report(measure(spec, args.rounds, args.device)), flush=True)


if __name__ == "__main__":
    main()
