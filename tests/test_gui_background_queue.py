"""The graph's background queue: a result is shown before the queue says it is idle, so
"wait until not busy" (the tests, screenshots, a hook click) never reads the previous drawing."""

from __future__ import annotations

import threading

from gradexplorer.gui.graph.layout_worker import BackgroundQueue


def test_results_and_failures_reach_their_slots_while_the_queue_is_still_busy(qtbot):
    queue = BackgroundQueue()
    seen = []
    queue.finished.connect(lambda number, result: seen.append(("finished", number, result, queue.busy)))
    queue.failed.connect(lambda number, text: seen.append(("failed", number, text, queue.busy)))
    first = queue.request(lambda: threading.current_thread() is threading.main_thread())
    qtbot.waitUntil(lambda: not queue.busy, timeout=60_000)
    assert seen == [("finished", first, False, True)]  # off the GUI thread; busy until shown
    second = queue.request(lambda: {}["missing"])
    qtbot.waitUntil(lambda: not queue.busy, timeout=60_000)
    assert seen[1][:2] == ("failed", second) and "missing" in seen[1][2] and seen[1][3] is True
    assert queue.wait()


def test_a_request_made_while_a_result_is_shown_runs_next(qtbot):
    queue = BackgroundQueue()
    results = []

    def shown(number, result):
        results.append(result)
        if result == 1:
            queue.request(lambda: 2)  # e.g. a layout that asks for another

    queue.finished.connect(shown)
    queue.request(lambda: 1)
    qtbot.waitUntil(lambda: results == [1, 2] and not queue.busy, timeout=60_000)
    assert queue.wait()
