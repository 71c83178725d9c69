"""The page's drawings as inline SVG: the comparison graph (:func:`svg_graph`) and the
schedule's tokens × layers picture (:func:`svg_flow`, ``analyze --plot`` in SVG).

The graph: one box per comparison node, fetch head and FFN function, in columns by the stage
that finishes it, arrows from what a box reads to the box.

Columns: the one stage clock (``analysis.stages``): the embedding's FFN is stage 1, layer l's
heads stage 2l and its FFN stage 2l + 1 (the residual stream after layer l's attention, then
after its FFN). Boxes of one stage stack
in the order given, ROWS to a column; an edge is a cubic curve from the right side of the box read to the left
side of the reader. No layout engine: positions are a pure function of the node list.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ..analysis.stages import EMBEDDING_FFN, attention_stage, ffn_stage, layer_of

BOX_WIDTH, BOX_HEIGHT, COLUMN_GAP, ROW_GAP, MARGIN = 230, 62, 70, 14, 12
ROWS = 12  # boxes to a column; a stage with more takes several columns
TEXT_LIMIT = 34  # characters of a box's formula shown; the full text is in its tooltip
KIND_COLORS = {"ffn": "#eef6e8", "position": "#f3ecf8", "presence": "#f3ecf8", "uniform": "#fff4e0",
               "readout": "#fde9c9"}
DEFAULT_COLOR = "#e8eef8"


def stage(node: dict[str, Any]) -> int:
    """The stage that finishes a box (module docstring): an FFN function's layer's FFN stage (layer 0:
    the embedding's), a head's layer's attention stage."""
    if node["kind"].startswith("ffn"):
        return ffn_stage(node["layer"])
    return attention_stage(node["layer"])


def _short(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT - 1] + "…"


def _color(kind: str) -> str:
    return KIND_COLORS.get(kind.split(" ")[0], DEFAULT_COLOR)


def _details(node: dict[str, Any]) -> str:
    bound = "—" if node["bound"] is None else f"{node['bound']:.3g}"
    lines = [f"{node['name']} ({node['kind']})", node["text"], f"site {node['site']}, layer {node['layer']}",
             f"head {node['head'] or '—'}, bound {bound}"]
    if node["source"]:
        lines.append(f"source: {node['source']}")
    if node["inputs"]:
        lines.append(f"reads: {', '.join(node['inputs'])}")
    return "\n".join(lines)


def _columns(nodes: list[dict[str, Any]]) -> dict[int, int]:
    """The first column of every stage: a stage of n boxes takes ⌈n / ROWS⌉ columns."""
    sizes: dict[int, int] = {}
    for node in nodes:
        sizes[stage(node)] = sizes.get(stage(node), 0) + 1
    first, at = {}, 0
    for s in sorted(sizes):
        first[s] = at
        at += -(-sizes[s] // ROWS)
    return first


def layout(nodes: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """The top-left corner of every box, by name: stages left to right; within a stage, boxes
    sorted by the mean slot of the boxes they read (the barycentre heuristic: fewer crossings;
    ties in the order given), top to bottom, ROWS to a column."""
    first = _columns(nodes)
    slot: dict[str, int] = {}
    corners: dict[str, tuple[float, float]] = {}
    for s in sorted(first):
        members = [n for n in nodes if stage(n) == s]

        def centre(node: dict[str, Any]) -> float:
            placed = [slot[name] for name in node["inputs"] if name in slot]
            return sum(placed) / len(placed) if placed else -1.0

        for rank, node in enumerate(sorted(members, key=centre)):
            column, row = divmod(rank, ROWS)
            slot[node["name"]] = row
            corners[node["name"]] = (MARGIN + (first[s] + column) * (BOX_WIDTH + COLUMN_GAP),
                                     MARGIN + 22 + row * (BOX_HEIGHT + ROW_GAP))
    return corners


def _edge(start: tuple[float, float], end: tuple[float, float]) -> str:
    (x0, y0), (x1, y1) = start, end
    x0, y0, x1, y1 = x0 + BOX_WIDTH, y0 + BOX_HEIGHT / 2, x1, y1 + BOX_HEIGHT / 2
    bend = max(30.0, abs(x1 - x0) / 2)
    return (f'<path class="edge" d="M{x0:.0f},{y0:.0f} C{x0 + bend:.0f},{y0:.0f} {x1 - bend:.0f},{y1:.0f} '
            f'{x1:.0f},{y1:.0f}" marker-end="url(#arrow)"/>')


def _box(node: dict[str, Any], corner: tuple[float, float]) -> str:
    x, y = corner
    bound = "" if node["bound"] is None else f" · bound {node['bound']:.3g}"
    head = f" · {node['head']}" if node["head"] else ""
    return (f'<g class="node" data-name="{escape(node["name"])}" data-kind="{escape(node["kind"])}">'
            f"<title>{escape(_details(node))}</title>"
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="6" '
            f'fill="{_color(node["kind"])}"/>'
            f'<text x="{x + 8:.0f}" y="{y + 16:.0f}" class="title">{escape(node["name"])} '
            f'<tspan class="kind">{escape(node["kind"])}</tspan></text>'
            f'<text x="{x + 8:.0f}" y="{y + 34:.0f}">{escape(_short(node["text"]))}</text>'
            f'<text x="{x + 8:.0f}" y="{y + 52:.0f}" class="meta">{escape(node["site"])} · L{node["layer"]}'
            f"{escape(head)}{escape(bound)}</text></g>")


def _column_titles(nodes: list[dict[str, Any]]) -> list[str]:
    titles = []
    for s, column in _columns(nodes).items():
        layer, ffn = layer_of(s), s % 2 == 1
        label = "embedding FFN" if s == EMBEDDING_FFN else f"layer {layer} {'FFN' if ffn else 'heads'}"
        titles.append(f'<text x="{MARGIN + column * (BOX_WIDTH + COLUMN_GAP):.0f}" y="{MARGIN + 10}" '
                      f'class="column">{label}</text>')
    return titles


def svg_graph(nodes: list[dict[str, Any]]) -> str:
    """The graph of ``nodes`` (ComparisonBox.to_json dicts) as one ``<svg>`` element."""
    if not nodes:
        return '<p class="empty">No comparisons or FFN functions: the target is read off directly.</p>'
    corners = layout(nodes)
    width = max(x for x, _ in corners.values()) + BOX_WIDTH + MARGIN
    height = max(y for _, y in corners.values()) + BOX_HEIGHT + MARGIN
    edges = [_edge(corners[source], corners[n["name"]]) for n in nodes for source in n["inputs"] if source in corners]
    parts = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'viewBox="0 0 {width:.0f} {height:.0f}">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#667"/></marker></defs>',
             *_column_titles(nodes), *edges, *(_box(n, corners[n["name"]]) for n in nodes), "</svg>"]
    return "\n".join(parts)


FLOW_STEP, FLOW_RADIUS, FLOW_LEGEND = 84, 17, 260


def svg_flow(picture: dict[str, Any]) -> str:
    """Tokens × layers (``content.flow_section``): a circle per column and layer (layer 0, the
    embedding, at the bottom), the residual stream as grey lines up each column, and each head's
    arrows from layer − 1 into its layer in the head's colour, named in the legend."""
    columns, layers = picture["columns"], picture["layers"]
    width = MARGIN * 2 + 70 + FLOW_STEP * len(columns) + FLOW_LEGEND
    height = MARGIN * 2 + FLOW_STEP * (layers + 1)

    def at(column: int, layer: int) -> tuple[float, float]:
        return MARGIN + 70 + FLOW_STEP * (column + 0.5), MARGIN + FLOW_STEP * (layers - layer + 0.5)

    parts = [f'<svg class="flow" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">']
    for layer in range(layers + 1):
        y = at(0, layer)[1]
        parts.append(f'<text x="{MARGIN}" y="{y + 4:.0f}" class="column">layer {layer}</text>')
        for c, label in enumerate(columns):
            x = at(c, layer)[0]
            if label == "…":
                parts.append(f'<text x="{x:.0f}" y="{y + 5:.0f}" text-anchor="middle">…</text>')
                continue
            if layer:
                parts.append(f'<line class="stream" x1="{x:.0f}" y1="{y + FLOW_STEP - FLOW_RADIUS:.0f}" '
                             f'x2="{x:.0f}" y2="{y + FLOW_RADIUS:.0f}"/>')
            fill = "#fde9c9" if label == "T+1" else "#e8eef8"
            parts.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="{FLOW_RADIUS}" fill="{fill}"/>'
                         f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle">{escape(label)}</text>')
    for index, head in enumerate(picture["heads"]):
        for source, target in head["arrows"]:
            (x0, y0), (x1, y1) = at(source, head["layer"] - 1), at(target, head["layer"])
            parts.append(f'<line class="move" x1="{x0:.0f}" y1="{y0 - FLOW_RADIUS:.0f}" x2="{x1:.0f}" '
                         f'y2="{y1 + FLOW_RADIUS:.0f}" stroke="{head["color"]}" marker-end="url(#flow-arrow)"/>')
        legend_x, legend_y = width - FLOW_LEGEND, MARGIN + 14 + 18 * index
        parts.append(f'<line x1="{legend_x}" y1="{legend_y - 4}" x2="{legend_x + 22}" y2="{legend_y - 4}" '
                     f'stroke="{head["color"]}" stroke-width="3"/><text x="{legend_x + 28}" y="{legend_y}">'
                     f'L{head["layer"]} {escape(head["name"])}: {escape(head["kind"])}</text>')
    parts.insert(1, '<defs><marker id="flow-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
                    'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#556"/>'
                    '</marker></defs>')
    parts.append("</svg>")
    return "\n".join(parts)
