"""The GUI tests run in a shuffled order (``--gui-order``, tests/gui_order.py): a new seed each
run, shown in the header, repeatable; a module's tests stay together; the others keep their order."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from gui_order import gui_order_seed, shuffle_gui_tests

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Item:
    module: str
    name: str
    fixturenames: tuple[str, ...] = ()


def suite() -> list[Item]:
    items = [Item("plain_a", f"a{i}") for i in range(3)]
    items += [Item("gui_b", f"b{i}", ("qtbot",) if i else ()) for i in range(5)]
    items += [Item("plain_c", f"c{i}") for i in range(2)]
    items += [Item("gui_d", f"d{i}", ("make_window",)) for i in range(4)]
    items += [Item("gui_e", f"e{i}", ("qapp", "tmp_path")) for i in range(3)]
    return items + [Item("plain_f", "f0")]


def test_a_seed_shuffles_the_gui_modules_and_their_tests_and_repeats():
    items = suite()
    order = shuffle_gui_tests(items, 7)
    assert order == shuffle_gui_tests(items, 7) and order != shuffle_gui_tests(items, 8)
    assert sorted(order, key=items.index) == items  # the same tests
    assert [i for i in order if i.module.startswith("plain")] == [
        i for i in items if i.module.startswith("plain")]  # the others in their order
    block = order[3:15]  # where the first GUI test was, every GUI module's tests together
    assert {i.module for i in block} == {"gui_b", "gui_d", "gui_e"}
    runs = [module for n, module in enumerate(i.module for i in block)
            if n == 0 or block[n - 1].module != module]
    assert len(runs) == 3 and runs != ["gui_b", "gui_d", "gui_e"]
    assert [i.name for i in block if i.module == "gui_b"] != [f"b{i}" for i in range(5)]


def test_file_order_random_and_bad_values():
    assert gui_order_seed("file") is None and gui_order_seed("12") == 12
    assert len({gui_order_seed("random") for _ in range(5)}) > 1
    with pytest.raises(pytest.UsageError, match="expected random, file or a seed"):
        gui_order_seed("sideways")
    assert shuffle_gui_tests([Item("plain", "x")], 3) == [Item("plain", "x")]


def test_the_header_tells_the_seed_that_repeats_the_run():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider",
                           "--gui-order", "41", "tests/test_gui_heatmap.py"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "GUI tests in a shuffled order: --gui-order 41 repeats it" in done.stdout
