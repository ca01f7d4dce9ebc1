"""How many bytes a run directory takes per parameter per step, beside TensorBoard's event file
holding the same gradients' 64-bin histograms (issue 42.1).

    python bench/run_size.py                          # GPT-2 tiny and the MLP, 100 steps each
    python bench/run_size.py --models gpt2 --steps 300

One process, one training loop a model: at every step (Adam, the same batches) ``watch`` writes
its run directory (format 3: every figure, the ledger, the optimizer's state and a 64-bin
histogram per parameter) while a ``SummaryWriter`` writes ``add_histogram(name, grad, step,
bins=64)`` of the same gradients — only the histograms: TensorBoard keeps no other figure
here. A second ``watch``, resumed from an empty database of format 2 (names in every row,
float64 edges, int64 counts: what runs were before format 3), writes the same steps in that
format. Bytes are the files on disk once closed, divided by parameters × steps; the fixed
costs (the tables' first pages, the model's structure and graph) are spread over the steps.
Target: format 3 ≤ 0.4 × TensorBoard's. ``decode`` is the CPU of reading histograms back
(``histogram_rows.decode_block`` of a whole step, ``decode`` of one row), per histogram.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import recorder as R  # noqa: E402

import gradexplorer as gx  # noqa: E402
from gradexplorer.core.runs import histogram_rows as H  # noqa: E402
from tests.legacy_runs import legacy_run  # noqa: E402

TARGET = 0.4  # format 3's bytes ≤ 0.4 × TensorBoard's event file


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def measure(name: str, steps: int, folder: Path, bins: int = 64) -> dict:
    """Train ``name`` for ``steps`` steps, writing both run formats and a TensorBoard file."""
    from torch.utils.tensorboard import SummaryWriter

    model, batch, loss_fn = R.build(name)
    twin = copy.deepcopy(model)  # the same weights, steps and gradients, watched in format 2
    opts = [torch.optim.Adam(m.parameters(), 1e-3) for m in (model, twin)]
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    lean, old = folder / f"{name}-run", legacy_run(folder / f"{name}-run-v2")
    tb = SummaryWriter(str(folder / f"{name}-tensorboard"))
    with gx.watch(model, opts[0], lean, bins=bins) as rec, \
            gx.watch(twin, opts[1], old, bins=bins, resume=True):
        for step in range(1, steps + 1):
            inputs, target = batch(step)
            for m, opt in zip((model, twin), opts, strict=True):
                opt.zero_grad()
                R.loss_of(m, inputs, target, loss_fn).backward()
                if m is model:
                    for n, p in params:
                        tb.add_histogram(n, p.grad, step, bins=bins)
                opt.step()
        assert rec.latest().step == steps
    tb.close()
    cell = len(params) * steps
    out = {"params": len(params), "steps": steps,
           "run": folder_bytes(lean) / cell, "run v2": folder_bytes(old) / cell,
           "tensorboard": folder_bytes(folder / f"{name}-tensorboard") / cell}
    with gx.open_run(lean) as run:
        rows = run._rows("SELECT name, edges, counts, nan_count, inf_count, below, above "
                         "FROM histograms WHERE step = ?", (steps,))
        out["row bytes"] = sum(len(r[1]) + len(r[2]) for r in rows) / len(rows)
        start, n = time.process_time(), 0
        while time.process_time() - start < 0.2:
            H.decode_block(rows, run.version)
            n += 1
        out["decode block µs"] = (time.process_time() - start) / n / len(rows) * 1e6
        start, n = time.process_time(), 0
        while time.process_time() - start < 0.2:
            H.decode(*rows[0][1:3], tuple(rows[0][3:]), run.version, "bench")
            n += 1
        out["decode row µs"] = (time.process_time() - start) / n * 1e6
    return out


def report(results: dict[str, dict]) -> str:
    lines = [f"{'model':10} {'params':>6} {'steps':>5}  {'format 3':>9} {'format 2':>9} "
             f"{'TensorBoard':>11}  {'ratio':>6} {'target':>7}  {'blobs/row':>9} "
             f"{'decode/hist':>16}",
             f"{'':24}  {'bytes per parameter per step':^31}  {'3 / TB':>6}"]
    for name, r in results.items():
        ratio = r["run"] / r["tensorboard"]
        lines.append(f"{name:10} {r['params']:>6} {r['steps']:>5}  {r['run']:>9,.0f} "
                     f"{r['run v2']:>9,.0f} {r['tensorboard']:>11,.0f}  {ratio:>6.2f} "
                     f"{'≤ ' + str(TARGET):>7}  {r['row bytes']:>9,.0f} "
                     f"{r['decode block µs']:>6.2f} / {r['decode row µs']:>5.1f} µs"
                     + ("" if ratio <= TARGET else "  (target missed)"))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["gpt2", "mlp256"])
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = {m: measure(m, args.steps, Path(folder)) for m in args.models}
    print(f"run directory vs TensorBoard event file, 64-bin histograms, {args.steps} steps, Adam")
    print(report(results))


if __name__ == "__main__":
    main()
