"""The app listens to one bus: its stack's events (core/stack/events.py). A hook taken off on
the training thread by no job of the app's reaches the window's models through the bus and the
mailbox alone: its event-log line and the hook table it leaves."""

from gradexplorer.core.model.options import ModelOptions
from gradexplorer.core.session.config import SessionConfig


def test_a_hook_taken_off_reaches_the_models_through_the_stack_bus(qtbot):
    from gradexplorer.gui.session.controller import SessionController

    controller = SessionController()
    try:
        told = []
        controller.session.event.connect(lambda kind, text: told.append((kind, text)))
        controller.open_model("example:mlp", ModelOptions(), SessionConfig(device="cpu"))
        qtbot.waitUntil(lambda: controller.session.live is not None, timeout=120_000)
        controller.attach_hook("fc2", "scale:0.5")
        qtbot.waitUntil(lambda: controller.session.hooks == {"fc2": "scale:0.5"}, timeout=60_000)
        live = controller.session.live
        assert len(live.stack.events.told) == 1 and len(live.stack.events.hooks) == 1  # the mailbox
        controller.post(lambda: live.hooks.detach("fc2"))  # its result is no HooksChanged
        qtbot.waitUntil(lambda: controller.session.hooks == {}, timeout=60_000)
        assert [kind for kind, _ in told][-1] == "detached"
        assert [kind for kind, _ in told].count("attached") == 1  # once through the one bus
    finally:
        controller.close()
