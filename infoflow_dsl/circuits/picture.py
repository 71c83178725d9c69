"""An edge graph drawn as SVG: the report page's "Edge graph" and a discovery method's found
graph against the truth (``infoflowc discover --html``).

Nodes in columns in the order the model computes them (the input, each block's heads, its MLP,
the output); an edge is a straight line from sender to receiver labelled by its channel and
coloured by its class; hovering it names it. A discovery page's classes:

- found and necessary: green (a true positive);
- necessary, not found: red, dashed (a miss);
- found, not necessary: orange (a false positive).
"""

from __future__ import annotations

from html import escape

from .graph import EdgeGraph

EdgeKey = tuple[str, str, str]
COLORS = {"found": "#2a9d4b", "missed": "#d1495b", "spurious": "#f0a030", "edge": "#4a6fa5"}
DASHED = ("missed",)
COLUMN, ROW, RADIUS, MARGIN = 130, 46, 15, 40


def _centres(graph: EdgeGraph) -> dict[str, tuple[float, float]]:
    """Each node's centre: one column per (layer, heads | MLP), rows in the block's order."""
    columns: dict[tuple[int, int], list[str]] = {}
    for node in graph.nodes:
        columns.setdefault(node.order, []).append(node.name)
    centre: dict[str, tuple[float, float]] = {}
    for x, key in enumerate(sorted(columns)):
        for y, name in enumerate(columns[key]):
            centre[name] = (MARGIN + x * COLUMN, MARGIN + y * ROW)
    return centre


def svg_edge_graph(graph: EdgeGraph, classes: dict[EdgeKey, str]) -> str:
    """``graph``'s nodes and the edges of ``classes`` (edge -> its class, a key of COLORS)."""
    centre = _centres(graph)
    width = max(x for x, _ in centre.values()) + MARGIN + 60
    height = max(y for _, y in centre.values()) + MARGIN + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'font-family="sans-serif" font-size="11">']
    for (sender, receiver, channel), kind in sorted(classes.items()):
        (x0, y0), (x1, y1) = centre[sender], centre[receiver]
        dash = ' stroke-dasharray="5,4"' if kind in DASHED else ""
        parts.append(f'<line x1="{x0:.0f}" y1="{y0:.0f}" x2="{x1:.0f}" y2="{y1:.0f}" stroke="{COLORS[kind]}" '
                     f'stroke-width="2"{dash}><title>{escape(f"{sender}->{receiver}<{channel}>: {kind}")}</title>'
                     f'</line>')
        parts.append(f'<text x="{(x0 + 3 * x1) / 4:.0f}" y="{(y0 + 3 * y1) / 4 - 3:.0f}" fill="{COLORS[kind]}">'
                     f'{escape(channel)}</text>')
    for name, (x, y) in centre.items():
        parts.append(f'<circle cx="{x:.0f}" cy="{y:.0f}" r="{RADIUS}" fill="#eef1f7" stroke="#556"/>'
                     f'<text x="{x:.0f}" y="{y + 4:.0f}" text-anchor="middle">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def svg_graph_edges(graph: EdgeGraph) -> str:
    """Every edge of ``graph`` in one colour (the report page)."""
    return svg_edge_graph(graph, {(e.sender, e.receiver, e.channel): "edge" for e in graph.edges})
