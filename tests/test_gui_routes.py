"""One route per datum (bench/routes.py): a step's result and a hook click each travel one way
through the app, hop by hop as docs/architecture.md draws them, each hop on its own thread, and
the training thread never runs a view."""

from gui_helpers import TIMEOUT_MS, open_model
from script_helpers import load_script


def load_routes():
    return load_script("bench", "routes.py")


def hops_in_order(route, hops):
    """The hops in the order they first ran, each with every thread it ran on."""
    firsts, threads = [], {}
    for thread, hop in route:
        threads.setdefault(hop, set()).add(thread)
        if hop not in firsts:
            firsts.append(hop)
    return firsts, threads


def test_one_step_and_one_hook_click_each_take_one_route(qtbot, make_window):
    routes = load_routes()
    window = make_window()
    open_model(qtbot, window)

    def wait(done):
        qtbot.waitUntil(done, timeout=TIMEOUT_MS)

    step = routes.step_route(window, wait)
    order, threads = hops_in_order(step.route(routes.STEP_HOPS), routes.STEP_HOPS)
    assert order == list(routes.STEP_HOPS)
    counts = {hop: sum(1 for _, h in step.route(routes.STEP_HOPS) if h == hop) for hop in order}
    assert all(counts[hop] == 1 for hop in order if hop != "SessionController.flush"), counts
    assert threads == {hop: {"training"} for hop in routes.STEP_HOPS[:4]} | {
        hop: {"GUI"} for hop in routes.STEP_HOPS[4:]}
    assert step.views_on_training_thread() == []
    assert window.controller.timeline.loss.size == 1  # the step reached the model once

    click = routes.click_route(window, "fc1", wait)
    order, threads = hops_in_order(click.route(routes.CLICK_HOPS), routes.CLICK_HOPS)
    assert order == list(routes.CLICK_HOPS)
    assert len(click.route(routes.CLICK_HOPS)) == len(routes.CLICK_HOPS)  # each hop once
    assert threads.pop("HookRegistry.attach") == {"training"}
    assert all(where == {"GUI"} for where in threads.values())
    assert click.views_on_training_thread() == []
    assert "fc1" in window.controller.session.hooks
