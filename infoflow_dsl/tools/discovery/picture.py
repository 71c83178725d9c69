"""The found graph drawn against the truth (``infoflowc discover --html``): the method's top-n
edges (n = the truth's size) against the necessary ones, on ``circuits.picture``'s drawing."""

from __future__ import annotations

from html import escape

from ..circuits.picture import COLORS, svg_edge_graph
from .scores import DiscoveryResult, top_k

SHOWN = ("found", "missed", "spurious")


def classified(result: DiscoveryResult) -> dict[tuple[str, str, str], str]:
    """Each drawn edge's class: found, missed or spurious."""
    found = set(top_k(result.scores, len(result.necessary)))
    out = {pair: "found" if pair in found else "missed" for pair in result.necessary}
    out.update({pair: "spurious" for pair in found - result.necessary})
    return out


def page(result: DiscoveryResult, title: str) -> str:
    """A self-contained HTML page: the picture, its legend and the scores."""
    legend = " ".join(f'<span style="color:{COLORS[k]}">■ {k}</span>' for k in SHOWN)
    figures = (f"edge AUROC {result.auroc}, within the graph {result.auroc_graph}, node AUROC "
               f"{result.node_auroc}; the smallest certified top-k circuit: {result.certified_k}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
            f"<body style='font-family:sans-serif'><h1>{escape(title)}</h1>"
            f"<p>{escape(result.method)} under {escape(result.ablation)} ablation ({escape(result.metric)}): "
            f"its top {len(result.necessary)} edges against the {len(result.necessary)} the certificate needs. "
            f"{escape(figures)}</p><p>{legend}</p>{svg_edge_graph(result.graph, classified(result))}</body></html>\n")
