"""Export formats (each read back by its usual reader) and the ``graph`` command."""

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest

from gradexplorer.core.graph.export.files import export_graph
from gradexplorer.core.graph.extract import trace_backward_graph
from gradexplorer.core.graph.layout.positions import layout_drawing
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.engine import SessionConfig, TrainingSession

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def lenet():
    session = TrainingSession(load_workload("example:lenet", ModelOptions()), SessionConfig(device="cpu"))
    G = trace_backward_graph(session)
    return G, layout_drawing(G)


def test_json_is_node_link_data_with_positions(lenet, tmp_path):
    G, drawing = lenet
    path = export_graph(G, drawing.positions, tmp_path / "g.json")
    data = json.loads(path.read_text())
    try:
        H = nx.node_link_graph(data, edges="edges")
    except TypeError:  # networkx < 3.4
        H = nx.node_link_graph(data)
    assert H.number_of_nodes() == len(G) and H.number_of_edges() == G.number_of_edges()
    for node, attrs in H.nodes(data=True):
        assert {"name", "kind", "module", "param", "x", "y"} <= set(attrs)
        assert (attrs["x"], attrs["y"]) == pytest.approx(drawing.positions[node])
    fc3 = [a for _, a in H.nodes(data=True) if a["param"] == "fc3.weight"]
    assert fc3[0]["shape"] == [10, 84] and fc3[0]["module"] == "fc3"


def test_graphml_reads_back_with_attributes(lenet, tmp_path):
    G, drawing = lenet
    H = nx.read_graphml(export_graph(G, drawing.positions, tmp_path / "g.graphml"))
    assert H.number_of_nodes() == len(G) and H.number_of_edges() == G.number_of_edges()
    root = H.nodes[str(G.graph["root"])]
    assert root["name"] == "MseLossBackward0" and root["kind"] == "loss" and "x" in root
    params = {a["param"] for _, a in H.nodes(data=True) if a.get("kind") == "param"}
    assert len(params) == 10 and "conv1.weight" in params
    assert {d["slot"] for _, _, d in H.edges(data=True)} == {0, 1, 2}


def test_dot_text_lists_every_node_and_edge(lenet, tmp_path):
    G, drawing = lenet
    text = export_graph(G, drawing.positions, tmp_path / "g.dot").read_text()
    assert text.startswith("digraph backward {") and text.rstrip().endswith("}")
    assert text.count(" -> ") == G.number_of_edges()
    assert text.count("label=") == len(G) and '"fc3.bias"' in text
    if shutil.which("dot"):
        out = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "<svg" in out.stdout


def test_svg_is_valid_xml_with_a_box_per_node(lenet, tmp_path):
    G, drawing = lenet
    path = export_graph(G, drawing.positions, tmp_path / "g.svg", edge_points=drawing.edge_points)
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and float(root.get("width")) > 100
    assert len(root.findall(f".//{ns}g[@id]")) == len(G)
    assert len(root.findall(f".//{ns}polyline")) == G.number_of_edges()
    texts = {t.text for t in root.iter(f"{ns}text")}
    assert {"MseLossBackward0", "conv1.weight", "fc3.bias"} <= texts


def test_export_refuses_unknown_formats_and_missing_folders(lenet, tmp_path):
    G, drawing = lenet
    with pytest.raises(UserError, match="cannot tell the format"):
        export_graph(G, drawing.positions, tmp_path / "g.pdf")
    with pytest.raises(UserError, match="does not exist"):
        export_graph(G, drawing.positions, tmp_path / "missing" / "g.svg")
    with pytest.raises(UserError, match="PNG is drawn by the app's renderer"):
        export_graph(G, drawing.positions, tmp_path / "g.png")
    assert list(tmp_path.iterdir()) == []


def test_graph_command_writes_each_format(run_cli, tmp_path):
    for suffix in ("json", "svg"):
        out = tmp_path / f"lenet.{suffix}"
        code, stdout, stderr = run_cli("graph", "--model", "example:lenet", "--out", out)
        assert code == 0, stderr
        assert out.exists() and "26 nodes" in stdout and "10 param" in stdout


def test_graph_command_collapses_hides_hooks_and_takes_user_files(run_cli, tmp_path):
    out = tmp_path / "deep.graphml"
    code, stdout, _ = run_cli("graph", "--model", "example:deep:blocks=4", "--collapse", "2", "--hide-hooks",
                              "--out", out)
    assert code == 0 and "module" in stdout
    assert {d.get("module") for _, d in nx.read_graphml(out).nodes(data=True)} >= {"blocks.0", "blocks.3"}
    out = tmp_path / "user.json"
    code, stdout, stderr = run_cli("graph", "--model", f"{DATA / 'my_model.py'}:build_module",
                                   "--input-shape", "8,4", "--layout", "multipartite", "--out", out)
    assert code == 0, stderr
    nodes = json.loads(out.read_text())["nodes"]
    assert {n["module"] for n in nodes if n["name"] == "AddmmBackward0"} == {"hidden", "head"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "g.pdf"], "cannot tell the format"),
        (["--out", "g.svg", "--collapse", "0"], "argument --collapse: must be at least 1"),
        (["--out", "g.svg", "--model", "example:deep:blocks=200", "--layout", "spring"], "spring layout"),
    ],
)
def test_graph_command_errors_are_one_line(run_cli, tmp_path, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    code, _, stderr = run_cli("graph", *extra)
    assert code == 2 and message in stderr and "Traceback" not in stderr


def test_svg_has_the_apps_palette_boxes_and_two_line_labels(lenet, tmp_path):
    from gradexplorer.core.graph.style import KIND_FILL, NODE_H, NODE_W, elide_middle, node_lines

    G, drawing = lenet
    root = ET.parse(export_graph(G, drawing.positions, tmp_path / "g.svg")).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    for group in root.findall(f".//{ns}g[@id]"):
        attrs = G.nodes[int(group.get("id")[1:])]
        rect = group.find(f"{ns}rect")
        assert rect.get("fill") == KIND_FILL[attrs["kind"]]
        assert (float(rect.get("width")), float(rect.get("height"))) == (NODE_W, NODE_H)
        shown = [t.text for t in group.findall(f"{ns}text")]
        assert shown == [elide_middle(line) for line in node_lines(attrs) if line]
