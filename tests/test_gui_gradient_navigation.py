"""Navigating a model by gradient magnitude: tree and table columns, sorting, filters, tint."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stats.monitor import GradientMonitor
from gradexplorer.gui.models.selection import SelectionModel
from gradexplorer.gui.panels.model_filter import ModelFilterBar
from gradexplorer.gui.panels.module_tree import ModuleTree
from gradexplorer.gui.panels.parameter_table import ParameterTable


@pytest.fixture
def stepped():
    session = TrainingSession(load_workload("example:digits", ModelOptions(batch_size=16)),
                              SessionConfig(device="cpu"))
    session.add_observer(GradientMonitor(bins=16))
    session.step()
    return session, session.step().gradients.params


@pytest.fixture
def views(qtbot, stepped):
    session, params = stepped
    selection = SelectionModel()
    tree, table = ModuleTree(selection), ParameterTable(selection)
    bar = ModelFilterBar(selection, tree, table)
    for widget in (tree, table, bar):
        qtbot.addWidget(widget)
    tree.set_model(session.model)
    table.table.set_model(session.model)
    tree.set_stats(params)
    table.table.set_stats(params)
    return selection, tree, table, bar, session


def float64_norm(model, prefix: str) -> float:
    grads = [p.grad.double().flatten() for n, p in model.named_parameters() if n.startswith(prefix)]
    return float(sum((g**2).sum() for g in grads).sqrt())


def test_tree_rows_carry_module_gradients_and_sort_by_them(views):
    _selection, tree, _table, _bar, session = views
    for path in ("fc1", "conv2"):
        assert tree._items[path].text(4) == f"{float64_norm(session.model, path + '.'):.3g}"
        assert tree._items[path].text(7) == "ok"
    assert tree._items[""].text(4) == f"{float64_norm(session.model, ''):.3g}"
    tree.sortByColumn(4, Qt.DescendingOrder)
    root = tree._items[""]
    order = [root.child(i).data(4, Qt.UserRole + 1) for i in range(root.childCount())]
    assert order == sorted(order, reverse=True) and len(order) == 4
    tints = {tree._items[p].background(4).color().name() for p in ("conv1", "conv2", "fc1", "fc2")}
    assert len(tints) > 1  # different magnitudes, different colours


def test_tree_filter_keeps_matches_and_their_ancestors(views):
    _selection, tree, _table, bar, _session = views
    bar.text_edit.setText("conv")
    hidden = {p for p, item in tree._items.items() if item.isHidden()}
    assert hidden == {"fc1", "fc2"}
    bar.text_edit.setText("")
    assert not any(item.isHidden() for item in tree._items.values())


def shown_names(table) -> list[str]:
    proxy = table.proxy
    return [proxy.data(proxy.index(r, 0)) for r in range(proxy.rowCount())]


def test_table_filters_by_text_and_subtree_and_sorts_by_norm(views):
    selection, _tree, table, bar, _session = views
    bar.text_edit.setText("bias")
    assert shown_names(table) == ["conv1.bias", "conv2.bias", "fc1.bias", "fc2.bias"]
    bar.text_edit.setText("")
    bar.subtree_box.setChecked(True)
    selection.select(module="fc1", source="tree")
    assert shown_names(table) == ["fc1.weight", "fc1.bias"]
    selection.select(module="", source="tree")  # the whole model
    assert len(shown_names(table)) == 8
    bar.subtree_box.setChecked(False)
    table.sortByColumn(1, Qt.DescendingOrder)
    stats = table.table.stats
    norms = [stats[n].norm for n in shown_names(table)]
    assert norms == sorted(norms, reverse=True)
    model = table.table
    row = model.row_of("fc1.weight")
    assert model.data(model.index(row, 0), Qt.BackgroundRole) is not None  # tinted
    assert model.data(model.index(row, 0), Qt.ToolTipRole) == "fc1.weight"
