"""The found graph drawn against the truth (``infoflowc discover --html``): the method's top-n
edges (n = the truth's size) against the necessary ones, on ``circuits.picture``'s drawing."""

from __future__ import annotations

from html import escape
from typing import Any

from ..circuits.picture import COLORS, svg_edge_graph
from .scores import DiscoveryResult, top_k

SHOWN = ("found", "missed", "spurious")


def classified(result: DiscoveryResult) -> dict[tuple[str, str, str], str]:
    """Each drawn edge's class: found, missed or spurious."""
    found = set(top_k(result.scores, len(result.necessary)))
    out = {pair: "found" if pair in found else "missed" for pair in result.necessary}
    out.update({pair: "spurious" for pair in found - result.necessary})
    return out


def section(result: DiscoveryResult) -> str:
    """The found graph against the truth, its legend and the scores (HTML)."""
    legend = " ".join(f'<span style="color:{COLORS[k]}">■ {k}</span>' for k in SHOWN)
    figures = (f"edge AUROC {result.auroc}, within the graph {result.auroc_graph}, node AUROC "
               f"{result.node_auroc}; the smallest certified top-k circuit: {result.certified_k}")
    return (f"<p>{escape(result.method)} under {escape(result.ablation)} ablation ({escape(result.metric)}): "
            f"its top {len(result.necessary)} edges against the {len(result.necessary)} the certificate needs. "
            f"{escape(figures)}</p><p>{legend}</p>{svg_edge_graph(result.graph, classified(result))}")


def page(result: DiscoveryResult, model: Any, title: str) -> str:
    """The model's report page (``infoflowc report``) with a section "Circuit discovery"; a page
    of that section alone for a model the report cannot draw (a disguised one: its weights are
    not its program's circuit)."""
    from ..errors import StoredProgramError
    from ..page import model_page

    try:
        return model_page(model, (("discovery", "Circuit discovery", section(result)),))
    except (ValueError, StoredProgramError):
        return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
                f"<body style='font-family:sans-serif'><h1>{escape(title)}</h1>{section(result)}</body></html>\n")
