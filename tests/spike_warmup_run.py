"""Run by ``tests/test_spike_warmup.py`` in a fresh process: a watched loop with a run directory
whose spike kernels meet a cold Numba cache. Prints, as JSON, who compiled them and what the
loop saw. ``python tests/spike_warmup_run.py COLD_CACHE_DIR RUN_ROOT``.

The statistics kernels are loaded first (a watched step in memory: no spike detection) from
the cache they already have, then Numba's cache directory is pointed at ``COLD_CACHE_DIR``
before the spike kernels are imported, so only they are cold.
"""

import json
import os
import sys
import threading
from pathlib import Path

import numba
import numba.core.event as numba_event
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.diagnose import spike_warmup
from gradexplorer.core.stats.backends import warmup as stats_warmup

WARMUP_THREAD = "gradexplorer-spike-kernels"
compiled: list[str] = []  # the threads that compiled a spike kernel


class Compiles(numba_event.Listener):
    def on_start(self, event):
        if event.data["dispatcher"].py_func.__module__.endswith("spike_kernels"):
            compiled.append(threading.current_thread().name)

    def on_end(self, event):
        pass


def loop(run_dir, steps=60, inject=45, first_steps=0):
    """Train ``steps`` steps, the input of step ``inject`` scaled up (a spike); after
    ``first_steps`` steps (when not 0: a fork at the second) wait for the kernels to be ready
    (the test waits, not the loop: it does not know of them)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    seen = {"ready": [], "forked": None}
    rec = gx.watch(model, opt, run_dir, bins=8)
    for step in range(1, steps + 1):
        x, y = torch.randn(32, 12, generator=g), torch.randint(0, 4, (32,), generator=g)
        if step == inject:
            x *= 100.0
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        rec.note_loss(loss)
        loss.backward()
        opt.step()
        if run_dir is None:
            continue
        seen["ready"].append(spike_warmup.ready() is not None)
        if step == 2 and first_steps:
            seen["forked"] = fork_check()
        if step == first_steps:
            spike_warmup.wait()
    rec.close()
    if rec.spikes is None:  # in memory
        return seen
    rec.spikes.close()  # (Recorder.close does it where it calls SpikeLog.close)
    seen["threads"] = [t.name for t in threading.enumerate() if t.name == WARMUP_THREAD]
    seen["events"] = [e.to_json() for e in rec.spikes.events]
    return seen


def fork_check():
    """In a child forked while the kernels are readied: no waiting for the parent's thread,
    numpy does the steps, a spike is still found. The child's exit status: 0 when so."""
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            from gradexplorer.core.diagnose.spikes import SpikeDetector

            detector = SpikeDetector()
            events = [detector.observe(s, 1.0 + 0.01 * (s % 3)) for s in range(1, 40)]
            events.append(detector.observe(40, 1e6))
            ok = spike_warmup.wait(0) and spike_warmup.ready() is None and events[-1] is not None
        finally:
            os._exit(0 if ok else 1)
    return os.waitpid(pid, 0)[1]


def main():
    cold, root = sys.argv[1], Path(sys.argv[2])
    torch.set_num_threads(1)  # the machine may be busy: no waiting on a second intra-op thread
    numba_event.register("numba:compile", Compiles())
    loop(None, steps=3)  # the statistics kernels, from the cache they have
    stats_warmup.wait()  # (loaded off the loop's thread: waited for before the cache moves)
    numba.config.CACHE_DIR = os.environ["NUMBA_CACHE_DIR"] = cold
    first = loop(root / "first", first_steps=3)
    again = loop(root / "again")
    print(json.dumps({"compiled": compiled, "first": first, "again": again}))


if __name__ == "__main__":
    main()
