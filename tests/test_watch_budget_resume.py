"""``watch(overhead=0.05, resume=True)``: a resumed run's settings keep the earlier run's history
of cadence changes (the budget's and the noise scale's) and its last measures, the cadence in
force the resumed recorder's, going on from the earlier one's; inspect and the report say it
(settings_text.py's ``resumed_settings``, budget.py's ``CostBudget.go_on``)."""

from __future__ import annotations

import torch
from test_noise_scale import B, K, Net, data
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs.settings_text import cadence_text, resumed_settings
from gradexplorer.core.watch.budget import MARGIN, CostBudget, choose_every


class SetCosts(CostBudget):
    """A budget whose estimates are ``known`` (light, heavy, bare) once it has measured each
    kind: its choices the scheduler's alone, not a few steps' CPU readings."""

    known = (0.001, 0.010, 0.100)

    @property
    def costs(self):
        return None if super().costs is None else self.known


def recorded(model, opt, run_dir, steps, known, backwards=K, resume=False):
    """``steps`` of ``backwards`` micro-batches each under watch(overhead=0.05, noise_every=3)."""
    with gx.watch(model, opt, run_dir, overhead=0.05, noise_every=3, resume=resume) as rec:
        rec.budget.__class__, rec.budget.known = SetCosts, known
        for step in steps:
            x, y = data(step)
            for i in range(backwards):
                (nn.functional.mse_loss(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B])
                 / backwards).backward()
            opt.step()
            opt.zero_grad()
    return rec


def test_a_resumed_run_keeps_the_earlier_cadence_history_and_says_it(tmp_path, capsys):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    first = recorded(model, opt, tmp_path / "run", range(1, 11), (0.001, 0.010, 0.100))
    every = choose_every(0.001, 0.010, 0.100, 0.05 * (1 - MARGIN))
    assert first.budget.changes == [[4, every]] and every == 4  # 1 in 1 over 5%: rarer at once
    before = gx.open_run(tmp_path / "run").settings
    assert before["noise_every"] == 3 and before["histogram_every"] == 4
    # resumed: one backward a step (no noise scale: its keys never written again), a budget
    # measuring the same costs (the cadence goes on at 4, never told again), then dearer heavy
    # steps (rarer at once, as the cadence in force is then over the share)
    second = recorded(model, opt, tmp_path / "run", range(11, 17), (0.001, 0.010, 0.100),
                      backwards=1, resume=True)
    assert second.budget.every == 4 and second.budget.changes == [[4, 4]]
    run = gx.open_run(tmp_path / "run")
    assert run.steps == list(range(1, 17))
    settings = run.settings
    assert settings["overhead"] == 0.05 and settings["histogram_every"] == 4
    assert settings["cadence"] == [[4, 4]] and settings["resumed"] == [11]
    assert settings["over_budget"] is False and settings["light_share"] == before["light_share"]
    assert settings["noise_every"] == 3 and settings["stats_every"] == 1
    third = recorded(model, opt, tmp_path / "run", range(17, 30), (0.001, 0.040, 0.100),
                     backwards=1, resume=True)
    dearer = choose_every(0.001, 0.040, 0.100, 0.05 * (1 - MARGIN))
    assert third.budget.changes == [[4, 4], [20, dearer]] and dearer == 16  # its 4th step
    settings = gx.open_run(tmp_path / "run").settings
    assert settings["histogram_every"] == dearer and settings["cadence"] == third.budget.changes
    assert settings["resumed"] == [11, 17]
    text = cadence_text(settings)
    assert text.endswith(f"every {dearer} step(s); 4 from step 4, {dearer} from step 20); "
                         "resumed at step 11, 17"), text
    from gradexplorer.commands.run_tables import inspect_run

    inspect_run(str(tmp_path / "run"), None, 8)
    assert f"recorded: {text}" in capsys.readouterr().out
    from gradexplorer.core.share.report_data import gather
    from gradexplorer.core.share.report_html import summary_section

    assert "resumed at step 11, 17" in summary_section(gather(gx.open_run(tmp_path / "run")))


def test_resumed_settings_are_the_new_recorders_with_the_earlier_histories():
    earlier = {"stats_every": 1, "overhead": 0.05, "histogram_every": 40, "over_budget": True,
               "light_share": 0.06, "cadence": [[4, 40], [30, 1000]], "noise_every": "auto",
               "noise_cadence": [[6, 8], [40, 16]], "resumed": [20]}
    new = {"stats_every": 2, "histogram_every": 1}  # no budget now: its measures not kept
    kept = resumed_settings({"step": 35, "settings": earlier}, new)
    assert kept == {"stats_every": 2, "histogram_every": 1, "cadence": [[4, 40], [30, 1000]],
                    "noise_cadence": [[6, 8]], "noise_every": "auto", "resumed": [20, 36]}
    assert "overhead" not in kept and new == {"stats_every": 2, "histogram_every": 1}
    now = resumed_settings({"step": 35, "settings": earlier}, dict(new, overhead=0.05))
    assert now["over_budget"] is True and now["light_share"] == 0.06  # until measured again
    assert resumed_settings({"step": 3, "settings": earlier}, new)["resumed"] == [4]  # went back
