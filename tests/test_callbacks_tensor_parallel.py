"""The Lightning and transformers callbacks under tensor parallelism, gloo ranks on 127.0.0.1:
each rank runs the framework's real Trainer on the TP block of tests/test_watch_tensor_parallel.py
and its sequence positions (tests/tensor_parallel_callback_helpers.py); every figure and
histogram of every step the callback records equals those of one process on the whole batch
(watch in a plain loop), the accumulated norm is the total norm the Trainer's clipping found,
and each step's loss is rank 0's, as its Trainer had it."""

import json
import multiprocessing

import pytest
import torch.multiprocessing as mp
from tensor_parallel_checks import free_port, opened, same_as_one_process
from tensor_parallel_helpers import single_process

import gradexplorer as gx

pytest.importorskip("transformers")
pytest.importorskip("lightning.pytorch")
BINS, WORLD = 16, 2
# one forkserver serves a pytest process: what test_watch_tensor_parallel.py's ranks import too
PRELOAD = ["torch", "torch.distributed.tensor.parallel", "torch.distributed.fsdp", "gradexplorer",
           "gradexplorer.core.watch.sharded_probe", "transformers", "lightning.pytorch",
           "gradexplorer.integrations.transformers", "gradexplorer.integrations.lightning",
           "tensor_parallel_callback_helpers"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The one-process reference, and the runs both Trainers recorded on 2 TP ranks (forked
    from a server that imported torch, both frameworks and gradexplorer once)."""
    from tensor_parallel_callback_helpers import worker

    one = tmp_path_factory.mktemp("one") / "run"
    totals = single_process(one, BINS)
    reference = gx.open_run(one), totals
    path = tmp_path_factory.mktemp("tp") / "run"
    multiprocessing.set_forkserver_preload(PRELOAD)
    mp.start_processes(worker, args=(WORLD, str(path), free_port(), BINS, str(path.parent)),
                       nprocs=WORLD, join=True, start_method="forkserver")
    return reference, path


@pytest.mark.parametrize("framework", ["hf", "pl"], ids=["transformers", "lightning"])
def test_callback_figures_under_tensor_parallelism_equal_one_process(framework, recorded):
    reference, path = recorded
    path = path.with_name(f"{path.name}-{framework}")
    run, totals = opened(path)  # totals: what the Trainer's clip_grad_norm_ returned
    same_as_one_process((run, totals), reference, WORLD)
    losses = json.loads(path.with_name(f"{path.name}.losses.json").read_text())
    assert [run.step_info(step)["loss"] for step in run.steps] == pytest.approx(losses, rel=1e-12)
