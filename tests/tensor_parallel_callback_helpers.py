"""Workers for the gloo tests of the Lightning and transformers callbacks under tensor parallelism:
each rank runs the framework's own Trainer on tensor_parallel_helpers' block (parallelized on a
TP mesh of all ranks) and its sequence positions of the same batches, clipped and stepped with
the same SGD as the plain loop there, on one device (no strategy or DDP of the Trainer's own:
the block's DTensors do the collectives). Lightning's runs with the variables ``torchrun``
sets; transformers' without them: given them, its Trainer would wrap the model in DDP (torch
cannot, on uneven shards; transformers' own TP, ``from_pretrained(tp_plan=...)``, accelerate
refuses on CPU ranks), and without them it says in one log line that it does not, and trains."""

import json
import os

import torch
import torch.distributed as dist
from tensor_parallel_helpers import (
    BATCH,
    HEAD,
    HEADS,
    HIDDEN,
    MAX_NORM,
    SEQ,
    STEPS,
    WIDTH,
    Block,
    batch,
    parallelize,
)
from tensor_parallel_helpers import optimizer as sgd


def rows(part):
    """The steps' batches one sample a row, in order (both loaders read them so: sequentially)."""
    steps = [batch(step) for step in range(STEPS)]
    x, y = (part(torch.cat([pair[i] for pair in steps])) for i in (0, 1))
    return [{"x": a, "labels": b} for a, b in zip(x, y, strict=True)]


class Regression(Block):
    """The block as a transformers model: the plain loop's loss (this rank's part of the squared
    error over the whole batch) in a dict, parameters named as the block's; ``losses``: each
    training forward's."""

    losses: list

    def forward(self, x, labels):
        loss = ((super().forward(x) - labels) ** 2).sum().div(BATCH * SEQ * WIDTH)
        if self.training:
            self.__dict__.setdefault("losses", []).append(loss.item())
        return {"loss": loss}


def made(cls):
    """tensor_parallel_helpers' ``make_model`` (the same seed and sizes) as ``cls``."""
    torch.manual_seed(0)
    return cls(WIDTH, HEADS, HEAD, HIDDEN).double()


def hugging_face(mesh, data, run_dir, bins, out_dir):
    """transformers' Trainer with the callback, as a user would write it; the figures the
    Trainer logged each step (loss, the total norm its clipping found) and the model's losses."""
    import transformers

    from gradexplorer.integrations import GradexplorerTrainerCallback

    model = parallelize(made(Regression), mesh)
    opt = sgd(model)
    args = transformers.TrainingArguments(
        output_dir=out_dir, max_steps=STEPS, per_device_train_batch_size=BATCH, report_to=[],
        save_strategy="no", use_cpu=True, logging_steps=1, disable_tqdm=True,
        max_grad_norm=MAX_NORM, train_sampling_strategy="sequential")
    callback = GradexplorerTrainerCallback(run_dir, bins=bins)
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=data, callbacks=[callback],
        optimizers=(opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)))
    trainer.train()
    assert callback.recorder.plan.mode == "tp", callback.recorder.plan.mode
    logged = [log for log in trainer.state.log_history if "grad_norm" in log]
    return [log["grad_norm"] for log in logged], model.losses


def lightning(mesh, data, run_dir, bins):
    """Lightning's Trainer with the callback; the total norms of its clipping (torch's
    ``clip_grad_norm_``, as Lightning's own ``gradient_clip_val``) and the losses."""
    import lightning.pytorch as pl

    from gradexplorer.integrations import GradexplorerLightningCallback

    class Lit(Block, pl.LightningModule):
        def __init__(self, *sizes):
            super().__init__(*sizes)
            self.totals, self.losses = [], []

        def training_step(self, batch, batch_idx):
            loss = ((self(batch["x"]) - batch["labels"]) ** 2).sum().div(BATCH * SEQ * WIDTH)
            self.losses.append(loss.item())
            return loss

        def configure_gradient_clipping(self, optimizer, gradient_clip_val=None,
                                        gradient_clip_algorithm=None):
            total = torch.nn.utils.clip_grad_norm_(self.parameters(), MAX_NORM)
            self.totals.append(float(total.full_tensor()))

        def configure_optimizers(self):
            return sgd(self)

    model = parallelize(made(Lit), mesh)
    callback = GradexplorerLightningCallback(run_dir, bins=bins)
    trainer = pl.Trainer(max_steps=STEPS, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[callback])
    trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=BATCH))
    assert callback.recorder.plan.mode == "tp", callback.recorder.plan.mode
    return model.totals, model.losses


def worker(rank, world, run_dir, port, bins, out_dir):
    """TP on ``world`` ranks: each framework records into ``run_dir``-hf / -pl; rank 0 writes
    the total norms each Trainer's clipping found beside them (``.totals.json``) and its
    losses (``.losses.json``)."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (world,))
        cols = SEQ // world

        def part(tensor):  # this rank's sequence positions
            return tensor[:, rank * cols:(rank + 1) * cols]

        hf = hugging_face(mesh, rows(part), f"{run_dir}-hf", bins, f"{out_dir}/{rank}")
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                          LOCAL_WORLD_SIZE=str(world), GROUP_RANK="0", TORCHELASTIC_RUN_ID="tp")
        for name, (totals, losses) in (("hf", hf), ("pl", lightning(mesh, rows(part),
                                                                    f"{run_dir}-pl", bins))):
            if rank == 0:
                for kind, figures in (("totals", totals), ("losses", losses)):
                    with open(f"{run_dir}-{name}.{kind}.json", "w") as f:
                        json.dump(figures, f)
    finally:
        dist.destroy_process_group()
