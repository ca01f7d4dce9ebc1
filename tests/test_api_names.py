"""One meaning per parameter: ``stats_every`` (steps recorded), ``histogram_every`` (steps with
histograms), ``snapshot_every``/``keep_snapshots`` across watch, GradientMonitor and the
integrations; each old name still works, with one FutureWarning per process."""

import warnings

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.messages import errors


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Every test starts as a fresh process would: no old name warned about yet."""
    monkeypatch.setattr(errors, "_RENAMED_WARNED", set())


def train(model, steps, opt):
    for step in range(steps):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(8, 4, generator=g), torch.randn(8, 2, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def tiny():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_watch_records_stats_every_and_histograms_every(tmp_path):
    model, opt = tiny()
    with gx.watch(model, opt, tmp_path / "run", stats_every=2, histogram_every=4, bins=8):
        train(model, 8, opt)
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [2, 4, 6, 8]
    assert {s: bool(run.histograms(s)) for s in run.steps} == {2: False, 4: True, 6: False, 8: True}
    assert all(len(run.stats(s)) == 4 for s in run.steps)  # statistics on every recorded step
    assert run.settings["stats_every"] == 2 and run.settings["histogram_every"] == 4


def test_watch_every_is_stats_every_and_warns_once(tmp_path):
    model, opt = tiny()
    with pytest.warns(FutureWarning, match="watch: every is now called stats_every"):
        rec = gx.watch(model, opt, tmp_path / "a", every=3)
    with rec:
        train(model, 6, opt)
    assert rec.stats_every == 3 and gx.open_run(tmp_path / "a").steps == [3, 6]
    model, opt = tiny()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second use is silent
        gx.watch(model, opt, every=2).close()
    with pytest.raises(gx.UserError, match="give stats_every only"):
        gx.watch(model, opt, every=2, stats_every=3)


def test_monitor_every_is_histogram_every_and_warns_once():
    with pytest.warns(FutureWarning, match="GradientMonitor: every is now called histogram_every"):
        monitor = gx.session.GradientMonitor(every=3)
    assert monitor.histogram_every == 3
    assert [s for s in range(1, 10) if monitor.wants_histogram(s)] == [3, 6, 9]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gx.session.GradientMonitor(every=2).histogram_every == 2
        monitor.every = 5  # the old attribute too
        assert monitor.histogram_every == 5 and monitor.every == 5


def test_integrations_take_the_same_names():
    pytest.importorskip("lightning.pytorch")
    pytest.importorskip("transformers")
    from gradexplorer.integrations import GradexplorerLightningCallback, GradexplorerTrainerCallback

    for cls in (GradexplorerLightningCallback, GradexplorerTrainerCallback):
        settings = cls(stats_every=2, histogram_every=6, snapshot_every=4, keep_snapshots=1).settings
        assert (settings.stats_every, settings.histogram_every, settings.snapshot_every,
                settings.keep_snapshots) == (2, 6, 4, 1)
        with pytest.warns(FutureWarning, match=f"{cls.__name__}: every is now called stats_every"):
            assert cls(every=5).settings.stats_every == 5


def test_the_apps_every_k_spin_is_histogram_every(qtbot, make_window):
    from tests.gui_helpers import open_model

    window = make_window()
    open_model(qtbot, window)
    window.run_controls.every_spin.setValue(3)  # applied on the training thread, between steps
    qtbot.waitUntil(lambda: window.controller.session.live.monitor.histogram_every == 3, timeout=10_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the app uses the new name only
        window.run_controls.every_spin.setValue(4)
        qtbot.waitUntil(lambda: window.controller.session.live.monitor.histogram_every == 4, timeout=10_000)


@pytest.mark.parametrize("old, new", [("--every", "--histogram-every"),
                                      ("--export-every", "--snapshot-every"),
                                      ("--keep-last", "--keep-snapshots")])
def test_the_cli_refuses_a_flag_with_its_old_name_as_python_does(run_cli, capsys, tmp_path, old, new):
    """``--every 2 --histogram-every 3`` took the last one silently; Python's ``every=2,
    stats_every=3`` is refused. Either order is now a usage error, exit status 2."""
    for flags in ((old, "2", new, "3"), (new, "3", old, "2")):
        code, _, err = run_cli("run", "--model", "example:lenet", "--steps", "1", "--export",
                               tmp_path, *flags)
        assert code == 2 and "not allowed with argument" in err
    assert not any(tmp_path.iterdir())  # refused before anything ran


def test_the_session_stack_is_public_and_assembles_what_the_app_does():
    """``gx.session.SessionStack.on`` (docs/api.md's example): the session's one observer runs the
    monitor, the hooks and the NaN origin; each step's result carries their figures."""
    session = gx.TrainingSession(gx.load_workload("example:lenet"), gx.session.SessionConfig(device="cpu"))
    hooks = gx.hooks.HookRegistry(session.model)
    hooks.attach("fc1", "scale:0.5")
    stack = gx.session.SessionStack.on(session, gx.session.GradientMonitor(bins=32), hooks)
    result = session.step()
    assert session.observers == [stack] and stack.origin is not None
    assert result.hooks == [{"module": "fc1", "action": "scale:0.5", "calls": 1}]
    assert result.gradients.bins == 32 and result.grad_norm == result.gradients.global_norm
