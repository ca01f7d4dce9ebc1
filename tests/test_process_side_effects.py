"""The app leaves nothing of itself in the process: torch's thread count comes back.

``torch.set_num_threads`` on the training thread sets the count every thread started later
takes (OpenMP builds keep one per thread), so the count is read on a new thread."""

import threading

import torch

from gradexplorer.gui.training import live_session


def threads_of_a_new_thread() -> int:
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    return seen[0]


def test_the_app_gives_torch_its_threads_back(monkeypatch):
    monkeypatch.setattr(live_session.os, "cpu_count", lambda: 2)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        first, second = object(), object()
        live_session.leave_gui_a_core(first)
        live_session.leave_gui_a_core(second)  # two windows' controllers
        assert threads_of_a_new_thread() == 1  # the GUI keeps a core while they train
        live_session.give_cores_back(first)
        assert threads_of_a_new_thread() == 1  # the second still trains
        live_session.give_cores_back(second)
        assert threads_of_a_new_thread() == 2 == torch.get_num_threads()  # the process's own
    finally:
        torch.set_num_threads(before)


def test_closing_the_window_restores_torch_threads(qtbot, make_window, monkeypatch):
    from tests.gui_helpers import open_model

    monkeypatch.setattr(live_session.os, "cpu_count", lambda: 2)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        window = make_window()
        open_model(qtbot, window)
        assert threads_of_a_new_thread() == 1
        window.close()
        assert threads_of_a_new_thread() == 2
    finally:
        torch.set_num_threads(before)
