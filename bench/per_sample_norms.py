"""Cost of per-sample gradient norms (core/persample) per training step, vs the bare step.

    python bench/per_sample_norms.py                 # the README's rows, CPU
    python bench/per_sample_norms.py --rounds 9 --steps 4 --device cuda

For each model: the time of a step (forward, backward, SGD step) with and without the
per-sample norms, in interleaved rounds (CPU time on the CPU: machine noise hits both alike),
and the peak of the memory the step allocates (every tensor storage made during the step, live
at once: a dispatch mode counts them on any device; on CUDA also max_memory_allocated).
Ratios are printed: time with / time bare, peak with / peak bare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gradexplorer.core.model.spec import ModelOptions, load_workload  # noqa: E402
from gradexplorer.core.model.workload import Workload, call_model  # noqa: E402
from gradexplorer.core.persample.tracker import PerSampleNorms  # noqa: E402


class LiveBytes(TorchDispatchMode):
    """The peak of the bytes of tensor storages made while it is on and still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self._count(t.untyped_storage())
        return out

    def _count(self, storage) -> None:
        key = id(storage)
        if key in self._seen:
            return
        self._seen.add(key)
        size = storage.nbytes()
        self.now += size
        self.peak = max(self.peak, self.now)
        weakref.finalize(storage, self._freed, key, size)

    def _freed(self, key: int, size: int) -> None:
        self._seen.discard(key)
        self.now -= size


def gpt2(layers: int, width: int, seq: int, batch: int, vocab: int = 512) -> Workload:
    import transformers

    config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=4, vocab_size=vocab,
                                     n_positions=seq, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, vocab, (batch, seq))
    return Workload(model, lambda step: ({"input_ids": ids, "labels": ids}, None), None,
                    description=f"GPT-2 {layers}×{width}, T={seq}, batch {batch}")


def encoder(layers: int, width: int, seq: int, batch: int) -> Workload:
    """nn.TransformerEncoder (its attention is nn.MultiheadAttention), a regression loss."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    x, y = torch.randn(batch, seq, width), torch.randn(batch, seq, width)
    return Workload(model, lambda step: (x, y), torch.nn.functional.mse_loss,
                    description=f"nn.TransformerEncoder {layers}×{width}, T={seq}, batch {batch}")


def workloads() -> list[Workload]:
    out = []
    for spec in ("example:digits", "example:mlp", "example:transformer"):
        w = load_workload(spec, ModelOptions())
        w.description = spec
        out.append(w)
    out.append(encoder(2, 128, 64, 16))  # nn.MultiheadAttention: a TorchFunctionMode per call
    out.append(gpt2(2, 64, 64, 16))  # the Gram identity everywhere
    out.append(gpt2(2, 64, 256, 8))  # long sequences: per-sample weight gradients, in slices
    return out


def step_fn(workload: Workload, device: torch.device):
    model = workload.model.to(device).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    inputs, target = workload.make_batch(0)
    def move(t):
        return t.to(device) if isinstance(t, torch.Tensor) else t
    inputs = {k: move(v) for k, v in inputs.items()} if isinstance(inputs, dict) else (
        tuple(map(move, inputs)) if isinstance(inputs, tuple) else (move(inputs),))
    target = move(target)

    def step(tracker=None):
        opt.zero_grad(set_to_none=True)
        out = call_model(model, inputs)
        loss = out.loss if workload.loss_fn is None else workload.loss_fn(out, target)
        loss.backward()
        if tracker is not None:
            tracker.take()
        opt.step()
    return model, step


def peak(step, tracker, device: torch.device) -> tuple[int, int | None]:
    step(tracker)  # warm: the optimizer's state and the gradients exist before measuring
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    with LiveBytes() as live:
        step(tracker)
    cuda = None
    if device.type == "cuda":
        torch.cuda.synchronize()
        cuda = torch.cuda.max_memory_allocated() - base
    return live.peak, cuda


def clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
        return time.perf_counter()
    return time.process_time()


def measure(workload: Workload, device: torch.device, rounds: int, steps: int) -> dict:
    model, step = step_fn(workload, device)
    tracker = PerSampleNorms(model, "mean")
    tracker.remove()  # attached again per round: the bare rows run without any hook
    times = {"bare": [], "per-sample": []}
    for _ in range(rounds):
        for name in times:
            on = PerSampleNorms(model, "mean") if name == "per-sample" else None
            step(on)
            start = clock(device)
            for _ in range(steps):
                step(on)
            times[name].append((clock(device) - start) / steps)
            if on is not None:
                on.remove()
    bare_peak, bare_cuda = peak(step, None, device)
    on = PerSampleNorms(model, "mean")
    with_peak, with_cuda = peak(step, on, device)
    on.remove()
    bare, with_ = (statistics.median(times[k]) for k in ("bare", "per-sample"))
    return {"model": workload.description, "bare_ms": bare * 1e3, "with_ms": with_ * 1e3,
            "time_ratio": with_ / bare, "memory_ratio": with_peak / bare_peak,
            "bare_peak_mb": bare_peak / 2**20,
            "cuda_ratio": None if bare_cuda is None else with_cuda / bare_cuda,
            "unsupported": len(tracker.unsupported)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads on the CPU (default 1: steady CPU-time ratios)")
    parser.add_argument("--only", default="", help="only the models whose name contains this")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    print(f"{'model':<32} {'bare ms':>9} {'with ms':>9} {'time':>6} {'peak MB':>8} {'memory':>7}"
          f"{' cuda mem' if device.type == 'cuda' else ''}  left out")
    for workload in workloads():
        if args.only not in workload.description:
            continue
        row = measure(workload, device, args.rounds, args.steps)
        cuda = f" {row['cuda_ratio']:>8.2f}×" if row["cuda_ratio"] is not None else ""
        print(f"{row['model']:<32} {row['bare_ms']:>9.2f} {row['with_ms']:>9.2f} "
              f"{row['time_ratio']:>5.2f}× {row['bare_peak_mb']:>8.2f} {row['memory_ratio']:>6.2f}×{cuda}  "
              f"{row['unsupported']} modules", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
