"""The comparison graph's SVG: stages as columns, ROWS boxes to a column, an arrow per input."""

from __future__ import annotations

from infoflow_dsl.page.graph import BOX_WIDTH, COLUMN_GAP, ROWS, layout, stage, svg_flow, svg_graph


def node(name: str, kind: str, layer: int, inputs: tuple[str, ...] = ()) -> dict:
    return {"name": name, "kind": kind, "text": f"{name} of x", "site": "token", "layer": layer, "head": None,
            "bound": 0.001, "inputs": list(inputs), "source": None}


def test_stages_are_heads_then_ffn_per_layer_on_the_one_clock():
    """analysis.stages: the embedding's FFN 1, layer l's heads 2l, its FFN 2l + 1."""
    assert [stage(node("a", "retrieval", 1)), stage(node("f", "ffn square", 1)), stage(node("e", "ffn relu", 0)),
            stage(node("b", "readout", 2))] == [2, 3, 1, 4]


def test_a_stage_with_more_than_rows_boxes_takes_several_columns():
    nodes = [node("c1", "retrieval", 1)] + [node(f"f{i}", "ffn square", 1, ("c1",)) for i in range(ROWS + 1)]
    corners = layout(nodes)
    xs = sorted({x for x, _ in corners.values()})
    assert len(xs) == 3 and xs[1] - xs[0] == BOX_WIDTH + COLUMN_GAP
    assert corners[f"f{ROWS}"][0] == xs[2] and corners[f"f{ROWS}"][1] == corners["f0"][1]


def test_boxes_are_ordered_by_what_they_read():
    nodes = [node("a", "retrieval", 1), node("b", "retrieval", 1), node("fb", "ffn square", 1, ("b",)),
             node("fa", "ffn square", 1, ("a",))]
    corners = layout(nodes)
    assert corners["fa"][1] < corners["fb"][1]


def test_svg_has_a_box_per_node_and_an_arrow_per_input():
    nodes = [node("c1", "retrieval", 1), node("f<1>", "ffn square", 1, ("c1",)), node("c2", "readout", 2, ("f<1>",))]
    svg = svg_graph(nodes)
    assert svg.startswith("<svg") and svg.count('<g class="node"') == 3 and svg.count('class="edge"') == 2
    assert "f&lt;1&gt;" in svg and "f<1>" not in svg  # names are escaped
    assert "layer 1 heads" in svg and "layer 1 FFN" in svg and "layer 2 heads" in svg
    assert svg_graph(nodes) == svg


def test_no_nodes_is_said_in_words():
    assert "No comparisons" in svg_graph([])


def test_the_flow_picture_has_a_circle_per_token_and_layer_and_an_arrow_per_move():
    picture = {"columns": ["1", "2", "…", "9", "T+1"], "layers": 2,
               "heads": [
                   {"name": "c1", "kind": "retrieval", "layer": 1, "color": "#1f77b4", "arrows": [[0, 1], [1, 0]]},
                   {"name": "c<2>", "kind": "readout", "layer": 2, "color": "#d62728", "arrows": [[0, 4]]}]}
    svg = svg_flow(picture)
    assert svg.count("<circle") == 4 * 3 and svg.count('class="move"') == 3
    assert svg.count('class="stream"') == 4 * 2 and "L2 c&lt;2&gt;: readout" in svg
    assert svg.count('stroke="#1f77b4" marker-end') == 2 and svg_flow(picture) == svg
