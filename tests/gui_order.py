"""``--gui-order``: the tests that use Qt run in a shuffled order, as one block where the first
of them was (every GUI test must pass whatever ran before it); a new seed each run, shown in
the header, and repeatable. conftest.py imports these hooks."""

from __future__ import annotations

import random

import pytest

GUI_FIXTURES = {"qtbot", "qapp", "make_window"}


def pytest_addoption(parser):
    parser.addoption(
        "--gui-order", default="random", metavar="random|file|SEED",
        help="order of the GUI test modules and of the tests in each: 'random' (default: a new "
             "seed each run, shown in the header), a seed to repeat one order, or 'file'")


def pytest_configure(config):
    config.gui_order_seed = gui_order_seed(config.getoption("gui_order"))


def gui_order_seed(value: str) -> int | None:
    """The seed ``--gui-order value`` asks for (None: file order)."""
    if value == "random":
        return random.SystemRandom().randrange(1, 1_000_000)
    if value == "file":
        return None
    try:
        return int(value)
    except ValueError:
        raise pytest.UsageError(f"--gui-order: expected random, file or a seed, got {value!r}") from None


def pytest_report_header(config):
    seed = config.gui_order_seed
    return ("GUI tests in file order" if seed is None else
            f"GUI tests in a shuffled order: --gui-order {seed} repeats it, --gui-order file turns it off")


def pytest_collection_modifyitems(config, items):
    if config.gui_order_seed is not None:
        items[:] = shuffle_gui_tests(items, config.gui_order_seed)


def shuffle_gui_tests(items: list, seed: int) -> list:
    """``items`` with the modules that use Qt, and the tests in each, shuffled by ``seed`` into
    one block where the first of them was; the other modules keep their order."""
    gui = {item.module for item in items if GUI_FIXTURES & set(item.fixturenames)}
    if not gui:
        return list(items)
    rng = random.Random(seed)
    modules = [m for m in dict.fromkeys(item.module for item in items) if m in gui]
    rng.shuffle(modules)
    block = []
    for module in modules:
        tests = [item for item in items if item.module is module]
        rng.shuffle(tests)
        block += tests
    first = next(i for i, item in enumerate(items) if item.module in gui)
    rest = [item for item in items if item.module not in gui]
    return rest[:first] + block + rest[first:]
