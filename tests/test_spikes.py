"""Spike forensics: one event at an injected batch, its layer first, its batch's ids; none on a
quiet run; NaN steps always; the `spikes` and `inspect` commands; `run` prints events."""

import math

import numpy as np
import pytest
import torch
from spike_helpers import sample_ids, train

import gradexplorer as gx
from gradexplorer.core.diagnose.spike_band import RollingBands, SpikeSettings, log_scale
from gradexplorer.core.diagnose.spikes import SpikeDetector
from gradexplorer.core.messages.errors import UserError

INJECT = 120


@pytest.fixture(scope="module")
def spiked(tmp_path_factory):
    path = tmp_path_factory.mktemp("spiked") / "run"
    rec = train(path, 200, inject=INJECT)
    return path, rec


def test_injected_batch_gives_one_event_with_its_layer_first_and_its_ids(spiked):
    path, rec = spiked
    run = gx.open_run(path)
    events = run.spike_events()
    assert [e.step for e in events] == [INJECT]  # one event, at the injected step
    event = events[0]
    assert event.ranking[0]["name"] == "side.weight" and event.ranking[0]["onset"] == INJECT
    assert event.ranking[0]["factor"] > 50  # pushed ×100: far out of its band
    assert event.modules[0]["name"] == "side"
    assert event.batch == sample_ids(INJECT)
    assert len(event.samples) == 8
    assert {s["id"] for s in event.samples} <= set(sample_ids(INJECT))
    losses = [s["loss"] for s in event.samples]
    assert losses == sorted(losses, reverse=True)
    assert any("loss at" in r for r in event.reasons)
    assert run.batch_ids(INJECT - 1) == sample_ids(INJECT - 1)  # every step's batch is kept
    assert INJECT in run.snapshots  # the event step is snapshotted by itself
    assert [e.step for e in rec.spikes.events] == [INJECT]
    figures = event.figures
    i = figures["steps"].index(INJECT)
    assert figures["side.weight"]["norm"][i] == pytest.approx(run.figures(INJECT)["side.weight"]["norm"])


def test_quiet_run_gives_no_event_over_500_steps(tmp_path):
    rec = train(tmp_path / "run", 500)
    assert rec.spikes.events == []
    assert gx.open_run(tmp_path / "run").spike_events() == []


def test_a_bias_that_starts_at_zero_is_no_nan_inf_event(tmp_path):
    """A weight all zeros before a step has an infinite update ratio (new, not NaN/Inf): no
    event at step 1 (every model with zero-initialised biases raised one)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    torch.nn.init.zeros_(model[0].bias)
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    with gx.watch(model, opt, tmp_path / "run") as rec:
        for _ in range(5):
            loss = model(torch.randn(32, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert math.isinf(gx.open_run(tmp_path / "run").stats(1)["0.bias"].update_ratio)
    assert rec.spikes.events == []
    assert gx.open_run(tmp_path / "run").spike_events() == []


def test_a_nan_step_is_always_an_event_even_while_the_bands_warm_up():
    det = SpikeDetector()
    assert det.observe(1, 1.0) is None
    event = det.observe(2, math.nan)
    assert event is not None and event.step == 2
    assert event.reasons == ["loss at NaN/Inf at step 2"]


def test_bands_are_median_and_mad_on_the_log_scale():
    settings = SpikeSettings(window=5, warmup=5, refresh=1, min_width=1e-9)
    bands = RollingBands(settings, 1)
    history = [1.0, 2.0, 4.0, 8.0, 16.0]
    for v in history:
        bands.push(log_scale(np.array([v])))
    z, centre, width = bands.score(log_scale(np.array([1024.0])))
    logs = np.log(history)
    median = np.median(logs)
    mad = np.median(np.abs(logs - median))
    assert centre[0] == pytest.approx(median) and width[0] == pytest.approx(1.4826 * mad)
    assert z[0] == pytest.approx((np.log(1024.0) - median) / (1.4826 * mad))


def test_bad_settings_and_ids_are_one_clear_line(tmp_path):
    with pytest.raises(UserError, match="k must be a positive number"):
        SpikeSettings(k=0)
    with pytest.raises(UserError, match="warmup"):
        SpikeSettings(window=8, warmup=9)
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "run") as rec, \
            pytest.raises(UserError, match="JSON-able"):
        rec.note_batch({"a": object()})
    with pytest.raises(UserError, match="SpikeSettings"):
        gx.watch(model, opt, tmp_path / "run2", spikes="yes")


def test_spikes_command_lists_events_layers_and_ids(spiked, run_cli):
    path, _ = spiked
    code, out, _ = run_cli("spikes", path)
    assert code == 0
    assert "1 spike event(s)" in out and f"step {INJECT}" in out
    assert "side.weight" in out.split("first to move")[1].splitlines()[1]
    assert str(sample_ids(INJECT)[0]) in out and "snapshot" in out
    code, out, _ = run_cli("inspect", path)
    assert code == 0 and f"spike events: 1, at step(s) {INJECT}" in out
    code, _, err = run_cli("spikes", path, "--step", "3")
    assert code == 2 and "no spike event at step 3" in err


def test_run_command_reports_a_nan_spike(run_cli, tmp_path):
    code, out, _ = run_cli("run", "--model", "example:mlp", "--steps", "3", "--lr", "1e30",
                           "--histogram-every", "1")
    assert code == 0
    assert "! spike at step" in out and "make_batch(" in out
    assert "spikes: 1 event(s)" in out


def test_the_apps_session_tells_spikes_to_the_event_log():
    from gradexplorer.core.diagnose.spike_observer import SpikeObserver
    from gradexplorer.gui.training.live_session import open_live_session

    live = open_live_session("example:mlp", gx.session.ModelOptions(),
                             gx.session.SessionConfig(device="cpu", lr=1e30))
    told = []
    live.stack.events.told.connect(lambda *event: told.append(event))  # the stack's bus
    assert live.session.observers == [live.stack]  # the one observer: its phases in order
    # a reporter of the after-step phase, so it reads the figures of the measure phase before it
    spikes = next(o for o in live.stack.reporters if isinstance(o, SpikeObserver))
    results = list(live.session.run(3))
    assert [e.step for e in spikes.events] == [2]
    assert results[1].spike.batch == {"make_batch": 1}
    assert [(kind, text.split(":")[0]) for kind, _, text in told if kind == "spike"] == \
        [("spike", "spike at step 2")]


def test_per_sample_losses_leave_the_device_only_on_a_flagged_step(tmp_path, monkeypatch):
    from gradexplorer.core.watch import spike_log

    calls = []
    original = spike_log.top_samples
    monkeypatch.setattr(spike_log, "top_samples",
                        lambda values, ids: calls.append(values) or original(values, ids))
    rec = train(tmp_path / "run", 60, inject=50)
    assert [e.step for e in rec.spikes.events] == [50]
    assert len(calls) == 1 and isinstance(calls[0], torch.Tensor)  # kept as given until then
