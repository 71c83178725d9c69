"""The page itself: the page data (``content``, ``measured``) rendered as one HTML document.

Static sections (source, analysis, graph, schedule, tables) are rendered here; the heatmaps and
the histogram are drawn by the inline script from the embedded JSON (``assets``). The data is
embedded as ``<script type="application/json">`` blocks, keys sorted, so the same data gives the
same bytes and tests read every number back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from .assets import SCRIPT, STYLE
from .graph import svg_flow, svg_graph

#: The sections of a model's page, in order (id, heading); an analysis page has the first four.
SECTIONS = (("program", "Program"), ("analysis", "Analysis"), ("tree", "Comparison graph"),
            ("schedule", "InfoFlow schedule"), ("attention", "Attention patterns"), ("error", "Error"),
            ("parameters", "Parameters"), ("residual", "Residual directions"), ("edges", "Edge graph"))
ANALYSIS_SECTIONS = SECTIONS[:4]


def json_block(element_id: str, value: Any) -> str:
    """``value`` as an inline JSON script element. Every ``<`` is written ``\\u003c`` (the same
    JSON value), so no text from a file can end the element (``</script>``) or turn the rest of
    the page into script data (``<!--<script>``, which hides the closing tag)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    """A table; with an empty ``header``, one without a heading row."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="num">{escape(str(c))}</td>' if i in numeric
                                    else f"<td>{escape(str(c))}</td>" for i, c in enumerate(row)) + "</tr>"
                   for row in rows)
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _program(data: dict[str, Any]) -> str:
    return f"<p><code>{escape(data['program']['name'])}</code></p><pre>{escape(data['program']['source'])}</pre>"


def _analysis(data: dict[str, Any]) -> str:
    a = data["analysis"]
    rows = [("order β′", a["order"]), ("dimension β₁", a["dimension"]), ("verdict", a["verdict"]),
            ("cost law", a["cost_law"]),
            ("parameters against T", "independent of T" if a["independent_of_T"] else "grow with T (the cost law)"),
            ("reason", a["reason"] or "— (efficient)"),
            ("comparisons", f"{a['comparisons']} = {a['comparisons_at_T']} at T = {a['T']}"),
            ("layers, heads per layer", f"{a['layers']}, {a['heads']}"), ("T, d", f"{a['T']}, {a['d']}"),
            ("output", f"{a['output']} ({a['defined_at']}), {'causal' if a['causal'] else 'not causal'}")]
    rows += [("note", note) for note in a["notes"]]
    model = data.get("model")
    if model is not None:
        stored = ("none (compiled without measuring: the histogram below measures random inputs and the corners)"
                  if model["measured_error"] is None else f"{_number(model['measured_error'])} over "
                  f"{model['samples']} random inputs and {model['corners']} corners (seed {model['seed']})")
        rows += [("ε", model["eps"]), ("a-priori bound", _number(model["a_priori_bound"])),
                 ("measured max error (stored)", stored), ("dtype, d_model", f"{model['dtype']}, {model['d_model']}")]
    return _table((), rows)


def _names(names: list[str], most: int = 8) -> str:
    """A list of names, the first ``most`` of a longer one and the count."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown}, … ({len(names)} in all)"


def _schedule(data: dict[str, Any]) -> str:
    schedule = data["schedule"]
    heads_at: dict[int, list[str]] = {}
    for h in schedule["heads"]:
        beta = "" if h["beta"] is None else f", β = {h['beta']:.4g}"
        into = f" → {_names(h['into'])}" if h["into"] else ""
        reads = f"; reads {_names(h['reads'])}" if h["reads"] else ""
        where = "every token t" if h["site"] == "token" else "the readout T+1"
        heads_at.setdefault(h["layer"], []).append(
            f"<li><b>{escape(h['name'])}</b> ({escape(h['kind'])}{escape(beta)}, mask {escape(h['mask'])}): "
            f"{escape(where)} gets <code>{escape(h['computes'])}</code>{escape(into)}{escape(reads)}</li>")
    rows = []
    for info in schedule["info_sets"]:
        idle = "<li>the embedding</li>" if info["layer"] == 0 else "<li>no heads (FFN only)</li>"
        moves = "".join(heads_at.get(info["layer"], [])) or idle
        rows.append(f"<tr><td class=\"num\">{info['layer']}</td><td>{escape(', '.join(info['token']))}</td>"
                    f"<td>{escape(', '.join(info['readout']))}</td><td><ul>{moves}</ul></td></tr>")
    return (f"{svg_flow(schedule['flow'])}<p>Arrows: what each head moves from layer − 1 into its layer, at a few "
            "representative tokens (a retrieval's source is illustrative: it depends on the input; the attention "
            "patterns below show the real ones).</p>"
            "<p>Rows are layers (0: the embedding), columns the information set of an ordinary token t "
            f"(1..{schedule['T']}) and of the readout token T+1 after that layer; the last column lists the heads "
            "that move information at that layer.</p>"
            "<table><tr><th>layer</th><th>token t knows</th><th>readout T+1 knows</th><th>heads: what moves where"
            f"</th></tr>{''.join(rows)}</table>")


def _attention(data: dict[str, Any]) -> str:
    attention = data["attention"]
    options = "".join(f'<option value="{i}">example {i + 1}</option>' for i in range(len(attention["examples"])))
    cards = []
    for index, h in enumerate(data["heads"]):
        cards.append(
            f'<div class="head" data-head="{index}" data-beta="{h["beta"]!r}">'
            f"<h3>layer {h['layer']}, head {h['index']}: {escape(h['name'])}</h3>"
            f"<p>{escape(h['kind'])} at {escape(h['site'])} · β = {_number(h['beta'])} · mask {escape(h['mask'])}</p>"
            f"<p>computes <code>{escape(h['computes'])}</code>; retrieves into "
            f"{escape(', '.join(h['into']) or '—')}</p>"
            f'<div class="heatmap" data-head="{index}"></div></div>')
    heads = "".join(cards) or '<p class="empty">The model has no attention heads.</p>'
    return (f"<p>Rows: the queries of tokens 1..T and the readout (last row); columns: the keys 1..T; colour: the "
            f"attention weight, value on hover. Inputs drawn from the program's domain (seed {attention['seed']}); "
            "patterns of the stored weights evaluated in float64, the same on every CPU (the float32 forward's "
            "differ where two keys nearly tie, by β times the rounding of their scores).</p>"
            f'<label>example <select id="example-select">{options}</select></label>'
            f'<pre id="example-input" class="tokens"></pre><div class="heads">{heads}</div>')


def _error(data: dict[str, Any]) -> str:
    return ('<p id="error-summary"></p><div id="histogram"></div>'
            "<p>Histogram of |model − reference| over the inputs the compile measured (log-spaced bins); "
            "the solid line is ε, the dashed one the a-priori bound.</p><h3>The worst input</h3>"
            '<pre id="worst-input" class="tokens"></pre>')


def _parameters(data: dict[str, Any]) -> str:
    p = data["parameters"]
    layers = _table(("part", "layer", "nonzero", "total"),
                    [(r["name"], r["layer"], r["nonzero"], r["total"]) for r in p["layers"]], numeric=(1, 2, 3))
    constructions = _table(("construction", "kind", "layer", "nonzero", "total"),
                           [(r["name"], r["kind"], r["layer"], r["nonzero"], r["total"]) for r in p["constructions"]],
                           numeric=(2, 3, 4))
    return (f"<p>{p['nonzero']} nonzero of {p['total']} weights (the fixed positional code W_pos not counted).</p>"
            f"<h3>Per layer</h3>{layers}<h3>Per construction</h3>{constructions}")


def _residual(data: dict[str, Any]) -> str:
    rows = [(r["index"], r["name"], r["layer"], r["writer"]) for r in data["residual"]]
    return _table(("index", "direction", "written at layer", "by"), rows, numeric=(0, 2))


def _edges(data: dict[str, Any]) -> str:
    """The model's edge graph (``ifl.circuit_graph``): what discovery methods are scored on."""
    from ..circuits.graph import EdgeGraph
    from ..circuits.picture import svg_graph_edges

    graph = EdgeGraph.from_json(data["edge_graph"])
    rows = [(e.name, ", ".join(e.directions), e.role) for e in graph.edges]
    return (f"<p>{len(graph.edges)} edges sender → receiver (a head's q, k or v, an MLP's input, the output), "
            f"each carrying the residual directions listed; every other pair carries exactly 0 through the "
            f"weights (<code>infoflowc circuit MODEL --edges --truth</code> says which ones each ablation "
            f"needs).</p>{svg_graph_edges(graph)}{_table(('edge', 'directions', 'role'), rows)}")


RENDERERS = {"program": _program, "analysis": _analysis, "tree": lambda d: svg_graph(d["graph"]),
             "schedule": _schedule, "attention": _attention, "error": _error, "parameters": _parameters,
             "residual": _residual, "edges": _edges}


def render_page(data: dict[str, Any], measured: dict[str, Any] | None = None,
                extra: tuple[tuple[str, str, str], ...] = ()) -> str:
    """The whole document: a model's page with ``measured``, else an analysis page; ``extra``
    sections (id, heading, HTML) after the others (``discover --html``: the found graph)."""
    sections = SECTIONS if measured is not None else ANALYSIS_SECTIONS
    rendered = [(key, title, RENDERERS[key](data)) for key, title in sections] + list(extra)
    nav = "".join(f'<a href="#{key}">{escape(title)}</a>' for key, title, _ in rendered)
    body = "\n".join(f'<section id="{key}"><h2>{escape(title)}</h2>{html}</section>' for key, title, html in rendered)
    blocks = json_block("ifl-data", data) + ("" if measured is None else json_block("ifl-measured", measured))
    what = "compiled model" if measured is not None else "analysis"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(data['title'])}: infoflow {what}</title><style>{STYLE}</style></head>\n"
            f"<body><header><h1>{escape(data['title'])} <small>({what})</small></h1><nav>{nav}</nav></header>\n"
            f'{body}\n<div id="tooltip"></div>\n{blocks}\n<script>{SCRIPT}</script>\n</body></html>\n')
