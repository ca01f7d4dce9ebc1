"""GradientMonitor(overlap=True): the fused statistics on a side CUDA stream.

On the CPU the option changes nothing (there are no streams: the same figures, no CUDA call;
the op count is in test_stats_op_count). On CUDA (skipped without it): the figures equal the
same-stream ones and the float64 reference, a step keeps its single synchronisation, and the
ordering holds when either stream is held back."""

import warnings

import numpy as np
import pytest
import torch
from stats_reference import assert_matches, monitored_step
from torch import nn

from gradexplorer.session import GradientMonitor

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
SLEEP_CYCLES = 50_000_000  # torch.cuda._sleep: tens of milliseconds of one stream's time


def model_with_gradients(device: str = "cpu"):
    """Two (device, dtype) groups, zeros in a gradient, and NaN and ±Inf in that of ``bad``,
    which the optimizer (SGD, lr 0.1, momentum 0.9 unless given) leaves alone."""
    torch.manual_seed(4)
    model = nn.ParameterDict({
        "w": nn.Parameter(torch.randn(40, 30)), "b": nn.Parameter(torch.randn(30)),
        "h": nn.Parameter(torch.randn(5, 3, 7, dtype=torch.float64)),
        "s": nn.Parameter(torch.randn(1)), "bad": nn.Parameter(torch.randn(6)),
    }).to(device)
    set_gradients(model)
    stepped = [p for name, p in model.items() if name != "bad"]
    return model, torch.optim.SGD(stepped, lr=0.1, momentum=0.9)


def set_gradients(model: nn.ParameterDict) -> None:
    for p in model.values():
        p.grad = torch.randn_like(p)
    model["bad"].grad[:3] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    model["b"].grad[:4] = 0


def assert_same_figures(a, b, sums_rel: float = 0.0) -> None:
    """Every figure of two records equal; the sum-derived ones (norm, mean, std, update ratio)
    to ``sums_rel`` (0: bit for bit)."""
    assert a.params.keys() == b.params.keys() and a.histograms.keys() == b.histograms.keys()
    for name, x in a.params.items():
        y = b.params[name]
        for field in ("min", "max", "abs_max", "zero_fraction", "nan_count", "inf_count"):
            assert getattr(x, field) == getattr(y, field), (name, field)
        for field in ("norm", "mean", "std", "update_ratio"):
            assert getattr(x, field) == pytest.approx(getattr(y, field), rel=sums_rel,
                                                      abs=1e-14 * x.abs_max), (name, field)
    for name, h in a.histograms.items():
        g = b.histograms[name]
        assert np.array_equal(h.edges, g.edges) and np.array_equal(h.counts, g.counts), name
        assert (h.nan_count, h.inf_count, h.below, h.above) == (
            g.nan_count, g.inf_count, g.below, g.above), name


@pytest.mark.parametrize("hist_range", ["auto", "symmetric"])
def test_overlap_changes_nothing_on_the_cpu(hist_range, monkeypatch):
    def no_cuda(*args, **kwargs):
        raise AssertionError("overlap touched the CUDA stream API for CPU tensors")

    for name in ("Stream", "current_stream", "stream"):
        monkeypatch.setattr(torch.cuda, name, no_cuda)
    model, optimizer = model_with_gradients()
    monitors = [GradientMonitor(backend="torch", hist_range=hist_range, overlap=o)
                for o in (False, True)]
    for step in (1, 2):
        same, overlapped = monitored_step(model, optimizer, monitors, step)
        assert_same_figures(same, overlapped)
        for name, p in model.items():
            assert_matches(overlapped.params[name], overlapped.histograms[name], p.grad)
        bad = overlapped.params.pop("bad")
        assert (bad.nan_count, bad.inf_count, bad.update_ratio) == (1, 2, 0.0)
        assert all(s.update_ratio > 0 for s in overlapped.params.values())
        set_gradients(model)
    assert monitors[1].backend == "torch" and monitors[1].overlap


@needs_cuda
def test_cuda_side_stream_figures_equal_the_same_stream():
    model, optimizer = model_with_gradients("cuda")
    monitors = [GradientMonitor(backend="torch", overlap=o) for o in (False, True)]
    for step in (1, 2, 3):
        same, overlapped = monitored_step(model, optimizer, monitors, step)
        # float64 index_add_ on CUDA adds with atomics: sums agree to rounding, not bit for bit
        assert_same_figures(same, overlapped, sums_rel=1e-12)
        for name, p in model.items():
            assert_matches(overlapped.params[name], overlapped.histograms[name], p.grad.cpu())
        set_gradients(model)


@needs_cuda
@pytest.mark.parametrize("overlap", [False, True])
def test_cuda_one_synchronisation_per_step(overlap):
    model, optimizer = model_with_gradients("cuda")
    monitor = GradientMonitor(backend="torch", overlap=overlap)
    named = list(model.named_parameters())
    for step in (1, 2, 3):  # the first builds the kept layouts (host-built tensors: syncs)
        set_gradients(model)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn" if step == 3 else 0)
            try:
                monitor.begin(named, optimizer, step)
                with torch.no_grad():
                    optimizer.step()
                monitor.finish(optimizer, step)
            finally:
                torch.cuda.set_sync_debug_mode(0)
    assert sum("synchroniz" in str(w.message) for w in seen) == 1  # the single transfer
    assert monitor.latest().step == 3


@needs_cuda
def test_cuda_side_stream_ordering_holds_against_held_back_streams():
    """The side stream is held back before ``begin`` (its copies come late) and the training's
    stream before the optimizer step; then the gradients are overwritten with NaN. Figures of
    the gradients as backward left them and the update ratio of the real step prove both
    waits: the training's stream on the copies, the side stream on the step."""
    model, optimizer = model_with_gradients("cuda")
    monitor = GradientMonitor(backend="torch", overlap=True)
    monitored_step(model, optimizer, [monitor], 1)  # builds the side stream and the layouts
    set_gradients(model)
    grads = {n: p.grad.cpu() for n, p in model.items()}
    before = {n: p.detach().cpu() for n, p in model.items()}
    named = list(model.named_parameters())
    side = monitor._backend._dev.streams.stream(torch.device("cuda", 0))
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2 * SLEEP_CYCLES)
    monitor.begin(named, optimizer, 2)
    torch.cuda._sleep(SLEEP_CYCLES)
    with torch.no_grad():
        optimizer.step()
        for p in model.values():
            p.grad.fill_(float("nan"))
    record = monitor.finish(optimizer, 2)
    for name, p in model.items():
        assert_matches(record.params[name], record.histograms[name], grads[name])
        now, was = p.detach().cpu().double(), before[name].double()
        moved = float((now - was).norm() / was.norm())
        assert (moved > 0) == (name != "bad")
        assert record.params[name].update_ratio == pytest.approx(moved, rel=1e-12)


class LoggedStream:
    """Stands in for a torch.cuda.Stream: logs the waits asked of it."""

    def __init__(self, name: str, log: list) -> None:
        self.name, self.log = name, log

    def wait_stream(self, other: "LoggedStream") -> None:
        self.log.append(f"{self.name} waits for {other.name}")


def test_side_stream_order_of_waits_without_a_gpu(monkeypatch):
    """The waits of ``side_stream`` in order, with the CUDA stream API stood in for: the side
    stream waits for the current one before it is entered; the gradients are recorded on it
    and the current stream waits for it at the handoff; the current stream comes back after."""
    from contextlib import contextmanager

    from gradexplorer.core.stats.backends.torch.side_stream import SideStreams

    log: list[str] = []
    made = []
    main = LoggedStream("main", log)

    def new_stream(device):
        made.append(LoggedStream(f"side{len(made)}", log))
        return made[-1]

    @contextmanager
    def entered_stream(stream):
        log.append(f"enter {stream.name}")
        try:
            yield
        finally:
            log.append(f"leave {stream.name}")

    class Grad:
        def __init__(self, device):
            self.device = device

        def record_stream(self, stream):
            log.append(f"gradient kept for {stream.name}")

    monkeypatch.setattr(torch.cuda, "Stream", new_stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: main)
    monkeypatch.setattr(torch.cuda, "stream", entered_stream)
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    streams = SideStreams(True)
    for _ in range(2):  # begin, then finish: one kept side stream
        with streams.entered([cuda, cpu, cuda]) as handoff:
            log.append("copies")
            handoff.release([Grad(cuda), Grad(cpu)])
            log.append("statistics")
        log.append("after")
    step = ["side0 waits for main", "enter side0", "copies", "gradient kept for side0",
            "main waits for side0", "statistics", "leave side0", "after"]
    assert log == step * 2 and len(made) == 1
    log.clear()
    with pytest.raises(RuntimeError), streams.entered([cuda]):  # a copy failed: still ordered
        log.append("copies")
        raise RuntimeError("out of memory")
    assert log == ["side0 waits for main", "enter side0", "copies", "main waits for side0",
                   "leave side0"]
    log.clear()
    with SideStreams(False).entered([cuda]) as handoff:  # asked off: nothing at all
        handoff.release([Grad(cuda)])
    assert log == [] and len(made) == 1


@pytest.mark.parametrize("active", [True, False])
def test_every_copy_comes_before_the_handoff_and_every_statistic_after(monkeypatch, active):
    """``FusedTorch`` on CPU tensors with its side streams stood in for: in ``begin`` the
    gradients and weights of every group are copied before the handoff (the training's stream
    waits for those only) and every statistic comes after it; ``finish`` reads the weights
    "after" inside its own scope, with the single transfer. Without a side stream the weights
    are copied after the statistics (the gradients' buffers are still in the CPU's caches)."""
    from contextlib import contextmanager

    from gradexplorer.core.stats.backends.torch import fused
    from gradexplorer.core.stats.backends.torch import grouped as backend_torch
    from gradexplorer.core.stats.backends.torch.blocks import Blocks

    log: list[str] = []

    class Handoff:
        pairs = {"cuda:0": ("current", "side")} if active else {}

        def release(self, grads):
            log.append(f"handoff of {len(grads)} gradients")

    class Streams:
        @contextmanager
        def entered(self, devices):
            log.append("enter")
            yield Handoff()
            log.append("leave")

    def logged(name, function):
        def call(*args, **kwargs):
            log.append(name)
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(Blocks, "load", logged("copy", Blocks.load))
    monkeypatch.setattr(fused, "moments", logged("statistics", fused.moments))
    monkeypatch.setattr(fused, "weight_norms", logged("weight norms", fused.weight_norms))
    monkeypatch.setattr(backend_torch, "transfer", logged("transfer", backend_torch.transfer))
    model, optimizer = model_with_gradients()
    monitor = GradientMonitor(backend="torch", overlap=True)
    monitored_step(model, optimizer, [monitor], 1)
    monitor._backend._dev.streams = Streams()
    log.clear()
    record = monitored_step(model, optimizer, [monitor], 2)[0]
    if active:
        begin = ["copy", "copy", "copy", "copy", "handoff of 5 gradients", "statistics",
                 "statistics"]
    else:
        begin = ["copy", "copy", "handoff of 5 gradients", "statistics", "statistics", "copy",
                 "copy"]
    assert log == ["enter", *begin, "weight norms", "weight norms", "leave",
                   "enter", "copy", "copy", "transfer", "leave"]
    for name, p in model.items():
        assert_matches(record.params[name], record.histograms[name], p.grad)
