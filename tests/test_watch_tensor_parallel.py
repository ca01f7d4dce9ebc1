"""watch under tensor parallelism with gloo ranks on 127.0.0.1: TP alone on 2 ranks, FSDP × TP
on a 2 × 2 mesh. A transformer block of odd sizes (uneven shards, sequence-parallel norms whose
gradients are Partial) trained with clipping: every figure and histogram of every step equals
those of one process on the whole batch, and the ledger's accumulated norm and clip
coefficient are the total norm and coefficient ``clip_grad_norm_`` used."""

import multiprocessing

import numpy as np
import pytest
import torch.multiprocessing as mp
from tensor_parallel_checks import free_port, opened, same_as_one_process
from tensor_parallel_helpers import single_process, worker

import gradexplorer as gx

BINS = 16
PRELOAD = ["torch", "torch.distributed.tensor.parallel", "torch.distributed.fsdp", "gradexplorer",
           "gradexplorer.core.watch.sharded_probe", "tensor_parallel_helpers"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("one") / "run"
    totals = single_process(path, BINS)
    return gx.open_run(path), totals


def spawned(tmp_path_factory, world, dp):
    """The ranks forked from a server that imported torch and gradexplorer once (most of a
    spawned rank's CPU is those imports)."""
    path = tmp_path_factory.mktemp(f"mesh{dp}x{world // dp}") / "run"
    multiprocessing.set_forkserver_preload(PRELOAD)
    mp.start_processes(worker, args=(world, dp, str(path), free_port(), BINS), nprocs=world,
                       join=True, start_method="forkserver")
    return path


@pytest.mark.parametrize("world,dp", [(2, 1), (4, 2)], ids=["tp2", "fsdp2x_tp2"])
def test_tensor_parallel_figures_equal_one_process(world, dp, reference, tmp_path_factory):
    path = spawned(tmp_path_factory, world, dp)
    same_as_one_process(opened(path), reference, world)
    if dp > 1:  # TP on the 2-D mesh's tp half, data parallelism by hand over its dp half (the
        # gradient as accumulated, before the loop averages it, is rank 0's own: not compared)
        same_as_one_process(opened(path.with_name("run-dp")), reference, world, False)


def test_a_placement_it_cannot_combine_is_one_warning_never_a_wrong_figure(tmp_path, capsys):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Placement
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    class Unknown(Placement):
        def __repr__(self):
            return "Scattered()"

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        records, lines = [], []
        for tp in (False, True):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).double()
            if tp:
                mesh = init_device_mesh("cpu", (1,))
                parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
            with gx.Recorder(model, report=lines.append, bins=8) as rec:
                for step in range(2):
                    x = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator()
                                    .manual_seed(step))
                    model(x).pow(2).sum().backward()
                    if tp:  # the gradient handed over under a placement watch cannot combine
                        g = model[0].weight.grad
                        spec = DTensorSpec(g.device_mesh, (Unknown(),), tensor_meta=TensorMeta(
                            g.shape, g.stride(), g.dtype))
                        model[0].weight.grad = DTensor(g.to_local(), spec, requires_grad=False)
                    rec.step()
                    model.zero_grad()
                records.append((rec.latest(), rec.ledger))
                assert rec.plan.mode == ("tp" if tp else "single")
                # DTensor gradients on a mesh of one rank: no noise capture (it read a
                # DTensor's storage, address 0, and crashed the process)
                assert (rec.noise is None) == tp
        (want, _), (got, ledger) = records
        assert lines == ["gradexplorer: 0.weight has a gradient placed (Scattered()), which watch "
                         "cannot combine across ranks: it gets no figures (nor the step a global "
                         "norm)"]
        assert got.params["0.weight"].has_grad and got.params["0.weight"].norm is None
        assert "Scattered()" in got.not_recorded["0.weight"] and "0.weight" not in got.histograms
        assert got.global_norm is None and ledger.grad_norm_accumulated is None \
            and ledger.clip_coef is None
        for name in ("0.bias", "2.weight", "2.bias"):
            assert got.params[name].norm == pytest.approx(want.params[name].norm, rel=1e-12)
            assert got.params[name].std == pytest.approx(want.params[name].std, rel=1e-9)
            np.testing.assert_array_equal(got.histograms[name].counts, want.histograms[name].counts)
        # DDP over TP: torch's transform hides the placements in plain local parameters
        from torch.distributed.tensor.parallel.ddp import _pre_dp_module_transform
        from torch.nn.parallel import DistributedDataParallel

        model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
        parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        ddp = DistributedDataParallel(_pre_dp_module_transform(model) or model)
        with pytest.raises(gx.UserError, match="does not read DDP over tensor parallelism"):
            gx.watch(ddp, torch.optim.SGD(ddp.parameters(), lr=0.1))
        # `gradexplorer run` trains one process: a TP model is refused in one line, not measured
        (tmp_path / "tp_model.py").write_text(
            "from torch import nn\n"
            "from torch.distributed.device_mesh import init_device_mesh\n"
            "from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module\n"
            "def build():\n"
            "    model = nn.Sequential(nn.Linear(5, 7))\n"
            "    return parallelize_module(model, init_device_mesh('cpu', (1,)),"
            " {'0': ColwiseParallel()})\n")
        from gradexplorer.cli import main

        capsys.readouterr()
        assert main(["run", "--model", f"{tmp_path / 'tp_model.py'}:build", "--input-shape", "4,5",
                     "--steps", "1"]) == 2
        assert "has DTensor parameters" in capsys.readouterr().err
    finally:
        dist.destroy_process_group()
