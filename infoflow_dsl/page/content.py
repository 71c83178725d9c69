"""What a page shows about a program, from its analysis alone (no torch): the source, analyze's
result, the comparison tree as graph nodes, and the InfoFlow schedule.

Everything here is a JSON-ready dict (the page embeds it whole in ``<script id="ifl-data">``,
so tests read the numbers back) built only from deterministic inputs: the same analysis gives
the same dict, key for key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.plot import COLORS, flow
from ..analysis.report import AnalysisReport


@dataclass(frozen=True)
class ComparisonBox:
    """One box of the comparison graph: a comparison node (its head), a fetch head, or an FFN
    function. ``layer`` is the layer that finishes it (0: the embedding), ``inputs`` the names of
    the boxes it reads, ``bound`` its a-priori error (None on a page without a model)."""

    name: str
    kind: str
    text: str
    site: str
    layer: int
    head: str | None
    bound: float | None
    inputs: tuple[str, ...]
    source: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "text": self.text, "site": self.site, "layer": self.layer,
                "head": self.head, "bound": self.bound, "inputs": list(self.inputs), "source": self.source}


def source_text(source: str, span: dict[str, int] | None) -> str | None:
    """The program text a span covers (lines and columns 1-based, the end column exclusive)."""
    if span is None:
        return None
    lines = source.splitlines()
    first, last = span["line"] - 1, span["end_line"] - 1
    if not 0 <= first <= last < len(lines):
        return None
    if first == last:
        return lines[first][span["column"] - 1:span["end_column"] - 1]
    pieces = [lines[first][span["column"] - 1:], *lines[first + 1:last], lines[last][:span["end_column"] - 1]]
    return " ".join(piece.strip() for piece in pieces)


def analysis_section(summary: dict[str, Any]) -> dict[str, Any]:
    """Order β′, dimension β₁, verdict, cost law and reason: what ``analyze`` prints first
    (``summary`` is ``AnalysisReport.to_dict()``)."""
    cost = summary["cost"]
    reason = summary["reason"]
    return {
        "T": summary["T"], "d": summary["d"], "order": summary["order"], "dimension": summary["dimension"],
        "verdict": summary["verdict"], "cost_law": cost["law"], "independent_of_T": cost["independent_of_T"],
        "reason": None if reason is None else reason["message"],
        "comparisons": summary["comparisons"]["polynomial"], "comparisons_at_T": summary["comparisons"]["value"],
        "layers": summary["layers"], "heads": summary["heads"], "output": summary["output"],
        "defined_at": summary["defined_at"], "causal": summary["causal"], "notes": summary["notes"],
    }


def analysis_graph(summary: dict[str, Any], source: str) -> list[ComparisonBox]:
    """The comparison tree's nodes, each at its head's layer, plus the heads that compare nothing
    (position and presence fetches); edges child -> parent. ``source`` is the program's text."""
    layer_of = {h["head"]: h["layer"] for h in summary["schedule"]}
    nodes = [ComparisonBox(name=n["name"], kind=n["kind"], text=f"{n['conditions']} {n['body']}", site=n["site"],
                       layer=layer_of.get(n["name"], 0), head=n["name"] if n["name"] in layer_of else None,
                       bound=None, inputs=tuple(n["children"]), source=source_text(source, n["span"]))
             for n in summary["tree"]]
    named = {n.name for n in nodes}
    nodes += [ComparisonBox(name=h["head"], kind=h["kind"], text=h["compares"], site=h["site"], layer=h["layer"],
                        head=h["head"], bound=None, inputs=(), source=None)
              for h in summary["schedule"] if h["head"] not in named]
    return nodes


def schedule_section(summary: dict[str, Any], heads: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens × layers: the information set of an ordinary token and of the readout after each
    layer (``info_sets``), and the heads of each layer (``heads``: what they move where)."""
    return {"info_sets": summary["info_sets"], "heads": heads, "T": summary["T"]}


def flow_section(report: AnalysisReport) -> dict[str, Any]:
    """The picture of ``analyze --plot`` as data: column labels (some tokens, "…", "T+1"), the
    layers, and each head's arrows (source column at layer − 1, target column at its layer)."""
    columns, heads = flow(report)
    return {"columns": columns, "layers": report.schedule.layers,
            "heads": [{"name": h.name, "kind": h.kind, "layer": h.layer, "color": COLORS[h.color],
                       "arrows": [list(a) for a in h.arrows]} for h in heads]}


def analysis_heads(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The schedule's heads as the schedule section lists them (a page without a model)."""
    return [{"layer": h["layer"], "name": h["head"], "kind": h["kind"], "site": h["site"], "computes": h["compares"],
             "mask": h["mask"] or "none", "reads": h["key_features"], "into": [], "beta": None}
            for h in summary["schedule"]]


def analysis_data(report: AnalysisReport, built: AnalysisReport | None = None) -> dict[str, Any]:
    """The page data of ``analyze FILE --html``: no model sections (``AnalysisReport.to_dict``
    once: on an inefficient target it compiles the gather route to count its parameters).
    ``built`` is the analysis of the model a page shows, its schedule the one the model's
    circuit realises (the gather route's slots, deep squares' extra layers): the graph, the
    schedule and the flow are drawn from it, the analysis section from ``report``."""
    summary = report.to_dict()
    drawn = summary if built is None else built.to_dict()
    source = report.program.source
    return {"title": Path(report.program.path).stem, "kind": "analysis",
            "program": {"name": Path(report.program.path).name, "source": source},
            "analysis": analysis_section(summary), "graph": [n.to_json() for n in analysis_graph(drawn, source)],
            "schedule": {**schedule_section(drawn, analysis_heads(drawn)), "flow": flow_section(built or report)}}
