"""Run by ``tests/test_stats_warmup.py`` in a fresh process whose ``NUMBA_CACHE_DIR`` is empty:
a few watched steps of a small CNN. Prints, as JSON, which threads compiled a statistics kernel
during those steps, the backend each step used, whether Numba was imported on the training
thread, and each step's figures. ``python tests/stats_warmup_run.py STEPS``.
"""

import json
import sys
import threading

import numba.core.event as numba_event
import torch
from torch import nn

import gradexplorer as gx

compiled: list[str] = []  # the threads that compiled a statistics kernel in this process


class Compiles(numba_event.Listener):
    def on_start(self, event):
        if ".core.stats." in event.data["dispatcher"].py_func.__module__:
            compiled.append(threading.current_thread().name)

    def on_end(self, event):
        pass


def main():
    steps = int(sys.argv[1])
    numba_event.register("numba:compile", Compiles())
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rec = gx.watch(model, opt)
    seen = {"backends": [], "figures": []}
    for _ in range(steps):
        opt.zero_grad()
        loss = model(torch.randn(5, 1, 8, 8)).square().mean()
        rec.note_loss(loss)
        loss.backward()
        opt.step()
        record = rec.monitor.latest()
        seen["backends"].append(rec.monitor.backend)
        seen["figures"].append({name: [s.norm, s.mean, s.std, s.min, s.max]
                                for name, s in record.params.items()})
    rec.close()
    print(json.dumps({"compiled": compiled, **seen}))


if __name__ == "__main__":
    main()
