"""The analysis part of a page: source spans, analyze's summary, the tree's graph nodes and the
schedule, all from the analysis report alone (no torch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.analysis.plot import COLORS, flow
from infoflow_dsl.page.content import analysis_data, analysis_graph, source_text

ROOT = Path(__file__).resolve().parents[2]


def test_source_text_cuts_a_span_out_of_the_program():
    source = "input x : R^2 in [-1, 1]\nlength T = 4\ntarget max_<s, t>\n  <x(s), x(t)>\n"
    assert source_text(source, {"line": 1, "column": 7, "end_line": 1, "end_column": 8}) == "x"
    assert source_text(source, {"line": 3, "column": 8, "end_line": 4, "end_column": 15}) == "max_<s, t> <x(s), x(t)>"
    assert source_text(source, None) is None
    assert source_text(source, {"line": 9, "column": 1, "end_line": 9, "end_column": 2}) is None


def test_analysis_data_is_analyzes_result():
    report = ifl.analyze(ifl.load_program(EXAMPLES_DIR / "min_pairwise.iflow"))
    data = analysis_data(report)
    summary = report.to_dict()
    assert data["kind"] == "analysis" and data["title"] == "min_pairwise"
    analysis = data["analysis"]
    assert (analysis["order"], analysis["dimension"], analysis["verdict"]) == (report.order, report.dimension,
                                                                              report.verdict)
    assert analysis["cost_law"] == summary["cost"]["law"] and analysis["reason"] is None
    assert data["schedule"]["info_sets"] == summary["info_sets"]
    assert [h["name"] for h in data["schedule"]["heads"]] == [h["head"] for h in summary["schedule"]]
    assert json.loads(json.dumps(data)) == data  # JSON-ready as it is


def test_graph_has_every_tree_node_with_its_children_and_source():
    report = ifl.analyze(ifl.load_program(EXAMPLES_DIR / "min_pairwise.iflow"))
    nodes = {n.name: n for n in analysis_graph(report.to_dict(), report.program.source)}
    assert set(nodes) == {n.name for n in report.tree.nodes}
    assert nodes["c2"].inputs == ("c1",) and nodes["c1"].inputs == ()
    assert (nodes["c1"].layer, nodes["c2"].layer) == (1, 2)
    assert nodes["c1"].source == "min_<t1, t2> <x(t1), x(t2)>" and nodes["c1"].bound is None


def test_fetch_heads_that_compare_nothing_are_nodes_too():
    report = ifl.analyze(ifl.load_program(EXAMPLES_DIR / "first_three.iflow"))
    nodes = analysis_graph(report.to_dict(), report.program.source)
    assert [(n.name, n.kind, n.layer) for n in nodes] == [("p1", "position", 1), ("p2", "position", 1),
                                                          ("p3", "position", 1)]


def test_an_inefficient_target_states_its_reason():
    data = analysis_data(ifl.analyze(ifl.load_program(EXAMPLES_DIR / "triangle_center.iflow")))
    assert data["analysis"]["verdict"] == "inefficient"
    assert data["analysis"]["reason"] == ifl.analyze(ifl.load_program(EXAMPLES_DIR / "triangle_center.iflow")
                                                     ).reason()["message"]


def test_the_analysis_page_imports_no_torch():
    script = ("import sys\nimport infoflow_dsl as ifl\nfrom infoflow_dsl.page import analysis_page\n"
              "page = analysis_page(ifl.analyze(ifl.load_program('compiled_examples/min_pairwise.iflow')))\n"
              "print('torch' in sys.modules, len(page) > 0)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.split() == ["False", "True"]


def test_the_schedule_picture_is_analyze_plots():
    report = ifl.analyze(ifl.load_program(EXAMPLES_DIR / "induction.iflow"))
    picture = analysis_data(report)["schedule"]["flow"]
    columns, heads = flow(report)
    assert picture["columns"] == columns and picture["layers"] == report.layers == 2
    assert [(h["name"], h["layer"], h["color"], [tuple(a) for a in h["arrows"]]) for h in picture["heads"]] == \
        [(h.name, h.layer, COLORS[h.color], list(h.arrows)) for h in heads]
    previous = next(h for h in picture["heads"] if h["kind"] == "position")
    assert all(target == source + 1 for source, target in previous["arrows"])  # x(t − 1) into every token t


def test_a_gather_route_models_page_draws_the_models_layers_and_heads() -> None:
    """The page of a model compiled through the gather route draws the schedule its circuit has
    (every layer, every head, at its layer), not analyze's schedule of the ungathered target."""
    from infoflow_dsl.page import model_data

    program = ifl.parse_program("input x : R^2\nlength T = 4\ntarget max_<a, b, c : b < c> x(a)[1] * x(b)[2] "
                                "* x(c)[1]\n", "triple.iflow")
    model = ifl.compile(program, eps=1e-1, dtype="float64", samples=0, allow_inefficient=True)
    data = model_data(model)
    layers = len(model.config["layers"])
    built = [(h["name"], index) for index, layer in enumerate(model.config["layers"], start=1) for h in layer["heads"]]
    assert ifl.analyze(program).layers < layers  # analyze's own schedule is the ungathered one
    assert data["schedule"]["flow"]["layers"] == layers
    assert sorted((h["name"], h["layer"]) for h in data["schedule"]["flow"]["heads"]) == sorted(built)
