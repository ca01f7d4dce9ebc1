"""Spike detection has one path: the stack's SpikeObserver. The same model, weights, batches
and optimizer, trained by a TrainingSession (the app's and ``gradexplorer run``'s stack) and by
a plain loop under ``watch``, give the same spike events: the same steps, reasons, rankings,
figures and batch identity (the session's ``make_batch`` index; under watch the ids the loop
noted, which the run keeps as ``Run.batch_ids``)."""

import copy

import pytest
import torch
from spike_helpers import BATCH, SideNet
from torch import nn

import gradexplorer as gx
from gradexplorer.core.diagnose.spike_observer import SpikeObserver
from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.core.stats.monitor import GradientMonitor

STEPS, INJECT, LR = 60, 50, 0.05


def make_batch(index: int):
    """Batch ``index`` (0-based: step ``index + 1``), the last four features of one ×100."""
    g = torch.Generator().manual_seed(index)
    x = torch.randn(BATCH, 12, generator=g)
    y = torch.randint(0, 4, (BATCH,), generator=g)
    if index + 1 == INJECT:
        x[:, 8:] *= 100.0
    return x, y


def session_events(model: nn.Module):
    session = TrainingSession(Workload(model, make_batch, nn.functional.cross_entropy),
                              SessionConfig(device="cpu", optimizer="sgd", lr=LR, momentum=0.9))
    spikes = SpikeObserver()
    SessionStack.on(session, GradientMonitor(bins=8), origin=False, reporters=(spikes,))
    results = list(session.run(STEPS))
    spikes.close()
    return spikes.events, results


def watch_events(model: nn.Module, run_dir):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    with gx.watch(model, opt, run_dir, bins=8) as rec:
        assert rec.spikes in rec.stack.reporters  # the stack's reporter, as on a session
        for index in range(STEPS):
            x, y = make_batch(index)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            rec.note_batch({"make_batch": index})  # the loop's own ids for its batch
            rec.note_loss(loss)
            loss.backward()
            opt.step()
    return rec.spikes.events


def test_a_session_and_watch_give_the_same_spike_events(tmp_path):
    torch.manual_seed(0)
    model = SideNet()
    watched = copy.deepcopy(model)
    by_session, results = session_events(model)
    by_watch = watch_events(watched, tmp_path / "run")
    assert [e.step for e in by_session] == [INJECT]  # the injected batch, and nothing else
    assert results[INJECT - 1].spike is by_session[0]
    event, other = by_session[0], by_watch[0]
    assert [(e.step, e.until) for e in by_watch] == [(e.step, e.until) for e in by_session]
    assert other.reasons == event.reasons
    assert [r["name"] for r in other.ranking] == [r["name"] for r in event.ranking]
    assert [r["onset"] for r in other.ranking] == [r["onset"] for r in event.ranking]
    assert [m["name"] for m in other.modules] == [m["name"] for m in event.modules]
    assert other.figures["steps"] == event.figures["steps"]
    for name in ("loss", "global norm"):
        assert other.figures[name] == pytest.approx(event.figures[name], rel=1e-9)
    for figure in ("norm", "update"):
        assert other.figures["side.weight"][figure] == pytest.approx(
            event.figures["side.weight"][figure], rel=1e-9)
    # one batch identity: the session's make_batch index, the ids watch's loop noted
    assert event.batch == other.batch == {"make_batch": INJECT - 1}
    run = gx.open_run(tmp_path / "run")
    assert run.batch_ids(INJECT) == other.batch
    assert [e.to_json() for e in run.spike_events()] == [other.to_json()]
