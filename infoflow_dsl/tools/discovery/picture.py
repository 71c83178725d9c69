"""The found graph drawn against the truth: an SVG (and a self-contained HTML page).

Nodes in columns in the order the model computes them (the input, each block's heads, its MLP,
the output); an edge is a straight line from sender to receiver, labelled by its channel, drawn
when it is in the truth or among the method's top-n edges (n = the truth's size):

- found and necessary: green (a true positive);
- necessary, not found: red, dashed (a miss);
- found, not necessary: orange (a false positive).
"""

from __future__ import annotations

from html import escape

from ..circuits.graph import EdgeGraph
from .scores import DiscoveryResult, top_k

COLORS = {"found": "#2a9d4b", "missed": "#d1495b", "spurious": "#f0a030"}
COLUMN, ROW, RADIUS, MARGIN = 130, 46, 15, 40


def _columns(graph: EdgeGraph) -> dict[str, tuple[float, float]]:
    """Each node's centre: one column per (layer, heads | MLP), rows in the block's order."""
    columns: dict[tuple[int, int], list[str]] = {}
    for node in graph.nodes:
        columns.setdefault(node.order, []).append(node.name)
    centre: dict[str, tuple[float, float]] = {}
    for x, key in enumerate(sorted(columns)):
        for y, name in enumerate(columns[key]):
            centre[name] = (MARGIN + x * COLUMN, MARGIN + y * ROW)
    return centre


def classified(result: DiscoveryResult) -> dict[tuple[str, str, str], str]:
    """Each drawn edge's class: found, missed or spurious."""
    found = set(top_k(result.scores, len(result.necessary)))
    out = {pair: "found" if pair in found else "missed" for pair in result.necessary}
    out.update({pair: "spurious" for pair in found - result.necessary})
    return out


def svg_against_truth(result: DiscoveryResult, graph: EdgeGraph) -> str:
    centre = _columns(graph)
    width = max(x for x, _ in centre.values()) + MARGIN + 60
    height = max(y for _, y in centre.values()) + MARGIN + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'font-family="sans-serif" font-size="11">']
    for (sender, receiver, channel), kind in sorted(classified(result).items()):
        (x0, y0), (x1, y1) = centre[sender], centre[receiver]
        dash = ' stroke-dasharray="5,4"' if kind == "missed" else ""
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


def page(result: DiscoveryResult, graph: EdgeGraph, title: str) -> str:
    """A self-contained HTML page: the picture, its legend and the scores."""
    legend = " ".join(f'<span style="color:{c}">■ {k}</span>' for k, c in COLORS.items())
    figures = (f"edge AUROC {result.auroc}, within the graph {result.auroc_graph}, node AUROC "
               f"{result.node_auroc}; the smallest certified top-k circuit: {result.certified_k}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
            f"<body style='font-family:sans-serif'><h1>{escape(title)}</h1>"
            f"<p>{escape(result.method)} under {escape(result.ablation)} ablation ({escape(result.metric)}): "
            f"its top {len(result.necessary)} edges against the {len(result.necessary)} the certificate needs. "
            f"{escape(figures)}</p><p>{legend}</p>{svg_against_truth(result, graph)}</body></html>\n")
