"""A run as an offline wandb run: ``wandb sync`` uploads it to the team's project.

Keys: ``gradients/NAME`` each parameter's exact histogram (``wandb.Histogram`` from the
monitor's own bins and counts, as ``wandb.watch`` names its gradient histograms),
``FIGURE/NAME`` per-parameter figures (``norm/fc1.weight`` …) and ``run/FIGURE`` the step's
own figures (``run/loss``, ``run/global_norm`` …), logged at the run's step numbers.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.share.output import optional_import
from gradexplorer.core.share.selection import ExportSelection
from gradexplorer.core.share.staged_folder import staged_folder
from gradexplorer.core.stats.records import whole_figures

WANDB_MAX_BINS = 512  # wandb.Histogram refuses more


def export_wandb(history: RunHistory, selection: ExportSelection, directory: str | Path,
                 project: str = "gradexplorer", progress=None) -> Path:
    """Write an offline wandb run under ``directory/wandb/``; returns its folder. It is logged
    in a staging folder and moved into ``wandb/`` once finished (``staged_folder.py``): an
    interrupted export leaves no run for ``wandb sync`` to upload."""
    wandb = optional_import("wandb", "--to wandb")
    directory = Path(directory)
    bins = history.run.settings.get("bins", 64)
    if selection.histograms and bins > WANDB_MAX_BINS:
        raise UserError(f"wandb keeps at most {WANDB_MAX_BINS} bins a histogram; this run has {bins}: "
                        "export with --no-histograms or to TensorBoard")
    with staged_folder(directory, "wandb", "the wandb run") as staging:
        staged = _log_run(wandb, history, selection, staging, project, progress)
        folder = directory / "wandb" / staged.name
        folder.parent.mkdir(exist_ok=True)
        os.replace(staged, folder)  # a new offline-run-… name: nothing is replaced
    return folder


def _log_run(wandb, history: RunHistory, selection: ExportSelection, staging: Path, project: str,
             progress) -> Path:
    """The offline run logged under ``staging/wandb/``; returns its folder there."""
    run_path = history.run.path.resolve()
    steps, times, figures = history.step_figures()
    run = wandb.init(mode="offline", dir=str(staging), project=project, name=run_path.name,
                     config={"gradexplorer_run": str(run_path),
                             **history.run.settings},
                     settings=wandb.Settings(silent=True, console="off", save_code=False))
    try:
        index = {s: i for i, s in enumerate(steps.tolist())}
        for step, stats, hists in history.step_blocks([s for s in selection.steps if s in index],
                                                      selection.params, selection.histograms):
            i = index[step]
            row = {f"run/{f}": v[i] for f, v in figures.items() if v[i] is not None}
            row["_timestamp"] = float(times[i])  # the step's own wall time
            for name, figs in stats.items():
                whole = whole_figures(figs)  # a NaN/Inf gradient's norm: nan/inf
                row.update({f"{f}/{name}": float(whole[f]) for f in selection.figures
                            if whole.get(f) is not None})
                h = hists.get(name)
                if h is not None and h.counts.sum() > 0:
                    row[f"gradients/{name}"] = wandb.Histogram(
                        np_histogram=(np.asarray(h.counts), np.asarray(h.edges)))
            run.log(row, step=int(step))
            if progress is not None:
                progress(step)
        folder = Path(run.dir).parent
    finally:
        run.finish()
    return folder
