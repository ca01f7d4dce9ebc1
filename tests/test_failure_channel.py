"""One failure channel: what ``watch`` cannot do (write its run, detect spikes) is one
MonitorWarning, said once, on the training thread, and the training goes on; a ``report=``
given to watch receives the same line instead (as before)."""

import shutil
import threading
import warnings

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.messages.failures import FailureChannel
from gradexplorer.session import MonitorWarning

STEPS = 30


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def train(model, opt, rec, steps=STEPS, at=None, then=None):
    losses = []
    for step in range(1, steps + 1):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(16, 6, generator=g), torch.randn(16, 3, generator=g)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        rec.note_loss(loss)
        opt.step()
        losses.append(loss.item())
        if step == at:
            rec.writer.flush()
            then()
    return losses


def test_a_full_disk_is_one_warning_and_training_goes_on(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(MonitorWarning) as told:
        rec = gx.watch(model, opt, tmp_path / "run")
        pages = rec.writer._db.execute("PRAGMA page_count").fetchone()[0]
        rec.writer._db.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full now
        losses = train(model, opt, rec)  # the write fails on the writer thread
        rec.close()
    lines = [str(w.message) for w in told]
    assert len(lines) == 1 and "recording stopped" in lines[0] and "full" in lines[0]
    assert told[0].category is MonitorWarning and issubclass(MonitorWarning, RuntimeWarning)
    assert len(losses) == STEPS and rec.step_count == STEPS and rec.latest().step == STEPS


def test_a_deleted_run_directory_is_one_warning_and_training_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.warns(MonitorWarning) as told:
        with gx.watch(model, opt, run_dir, snapshot_every=1) as rec:
            losses = train(model, opt, rec, at=3, then=lambda: shutil.rmtree(run_dir))
    assert [str(w.message) for w in told] == [
        f"gradexplorer: run directory {run_dir} was deleted or replaced at step 4: recording "
        "stopped; training goes on"]
    assert len(losses) == STEPS and rec.latest().step == STEPS


def test_report_receives_the_same_line_and_nothing_is_warned(tmp_path):
    run_dir = tmp_path / "run"
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    lines = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gx.Recorder(model, opt, run_dir, report=lines.append) as rec:
            train(model, opt, rec, at=3, then=lambda: shutil.rmtree(run_dir))
    assert not [w for w in caught if issubclass(w.category, MonitorWarning)]
    assert lines == [f"gradexplorer: run directory {run_dir} was deleted or replaced at step 4: "
                     "recording stopped; training goes on"]


def test_a_line_told_on_another_thread_waits_for_the_owner_and_is_said_once():
    channel = FailureChannel()
    worker = threading.Thread(target=lambda: [channel("gradexplorer: x failed")] * 2)
    worker.start()
    worker.join()
    assert channel.waiting and channel.told == ["gradexplorer: x failed"]
    with pytest.warns(MonitorWarning, match="x failed") as told:
        channel.tell_waiting()
        channel("gradexplorer: x failed")  # the same failure again: said already
    assert len(told) == 1 and not channel.waiting


def test_a_warning_filter_that_raises_never_breaks_the_loop(tmp_path, capsys):
    run_dir = tmp_path / "run"
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # python -W error
        with gx.watch(model, opt, run_dir) as rec:
            losses = train(model, opt, rec, at=3, then=lambda: shutil.rmtree(run_dir))
    assert len(losses) == STEPS and rec.latest().step == STEPS
    assert capsys.readouterr().err.splitlines() == [
        f"gradexplorer: run directory {run_dir} was deleted or replaced at step 4: recording "
        "stopped; training goes on"]


def test_a_watched_model_can_be_deep_copied(tmp_path):
    """An EMA twin or a float64 reference made by ``copy.deepcopy`` of the model under watch
    (its hooks hold the recorder's failure channel, with a lock: shared, not copied)."""
    import copy

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "run", hooks={"2": "scale:0.5"}):
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(5, 4)).square().mean().backward()
            opt.step()
            twin = copy.deepcopy(model).double()
            assert torch.equal(twin[0].weight, model[0].weight.double())
