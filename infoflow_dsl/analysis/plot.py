"""``analyze --plot``: tokens × layers, with the information flow of the schedule as arrows.

Columns are a few representative ordinary tokens (1, 2, 3, ..., T) and the readout token
T+1; rows are layers 0..L. Each head at layer l draws arrows from the row l−1 into row l:
a retrieval head from one (illustrative) retrieved position into every ordinary token, a
readout head or token retrieval into the readout, a position head from its fixed position,
a uniform head (and a token program's length head) from every token; positions relative to
``len`` are drawn for an input of the full length T. Matplotlib only (Agg backend), no system
graphviz.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..language import typed as ir
from .report import AnalysisReport

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def _columns(length: int) -> list[str]:
    if length <= 6:
        return [str(i) for i in range(1, length + 1)]
    return ["1", "2", "3", "…", str(length - 1), str(length)]


@dataclass(frozen=True)
class HeadFlow:
    """One head's arrows in the picture: (source column, target column) pairs from layer − 1 into
    ``layer``; ``color`` is its index into COLORS."""

    name: str
    kind: str
    layer: int
    color: int
    arrows: tuple[tuple[int, int], ...]


def flow(report: AnalysisReport) -> tuple[list[str], list[HeadFlow]]:
    """(the picture's column labels: some ordinary tokens, maybe "…", then "T+1"; every head's
    arrows), in the order the heads are drawn (by layer, then name)."""
    schedule = report.schedule
    columns = [*_columns(report.program.length), "T+1"]
    readout = len(columns) - 1
    tokens = [i for i, c in enumerate(columns[:-1]) if c != "…"]
    causal = report.to_dict()["causal"]
    heads = []
    in_layer: dict[int, int] = {}
    for index, head in enumerate(sorted(schedule.heads, key=lambda h: (h.layer, h.name))):
        if head.layer > schedule.layers:
            continue
        in_layer[head.layer] = in_layer.get(head.layer, 0) + 1
        arrows = _arrows(head.kind, head.site, head.position, tokens, readout, columns, in_layer[head.layer],
                         causal=causal)
        heads.append(HeadFlow(name=head.name, kind=head.kind, layer=head.layer, color=index % len(COLORS),
                              arrows=tuple(arrows)))
    return columns, heads


def plot_report(report: AnalysisReport, path: str | Path | BinaryIO) -> None:
    """Draw the report's schedule as a PNG to ``path`` (a file name or a binary stream)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns, heads = flow(report)
    readout = len(columns) - 1
    layers = report.schedule.layers
    figure, axes = plt.subplots(figsize=(1.3 * len(columns) + 2.5, 1.4 * (layers + 1) + 1.2), dpi=100)
    for layer in range(layers + 1):
        for i, label in enumerate(columns):
            if label == "…":
                axes.text(i, layer, "…", ha="center", va="center", fontsize=14)
                continue
            face = "#fde9c9" if i == readout else "#e8eef8"
            axes.scatter([i], [layer], s=520, color=face, edgecolors="#333333", zorder=3)
            axes.text(i, layer, label, ha="center", va="center", fontsize=8, zorder=4)
    for layer in range(1, layers + 1):  # the residual stream keeps every position's set
        for i, label in enumerate(columns):
            if label != "…":
                axes.plot([i, i], [layer - 0.85, layer - 0.15], color="#bbbbbb", lw=1, zorder=1)
    legend = []
    for head in heads:
        color = COLORS[head.color]
        for source, target in head.arrows:
            axes.annotate("", xy=(target, head.layer - 0.12), xytext=(source, head.layer - 0.88),
                          arrowprops={"arrowstyle": "->", "color": color, "lw": 1.3, "alpha": 0.85}, zorder=2)
        legend.append(plt.Line2D([0], [0], color=color, lw=2, label=f"L{head.layer} {head.name}: {head.kind}"))
    axes.set_xticks(range(len(columns)))
    axes.set_xticklabels(["token " + c if c not in ("…", "T+1") else c for c in columns], fontsize=8)
    axes.set_yticks(range(layers + 1))
    axes.set_yticklabels([f"layer {layer}" for layer in range(layers + 1)])
    axes.set_xlim(-0.6, len(columns) - 0.4)
    axes.set_ylim(-0.5, layers + 0.5)
    output = "output at every token" if report.tree.output_site == "token" else "output at the readout T+1"
    axes.set_title(f"{Path(report.program.path).name}: {report.verdict}, heads {report.heads}; {output}", fontsize=10)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)
    if legend:
        axes.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    figure.tight_layout()
    figure.savefig(path, format="png", metadata={"Software": None})
    plt.close(figure)


def _arrows(kind: str, site: str, position: object, tokens: list[int], readout: int,
            columns: list[str], shift: int, causal: bool = False) -> list[tuple[int, int]]:
    targets = tokens if site == "token" else [readout]
    length = int(columns[tokens[-1]])
    if kind == "position" and isinstance(position, ir.ReflectedPosition):  # len + c - t with len = T
        base = (length if position.from_length else 0) + position.offset
        return [(columns.index(str(base - int(columns[t]))), t) for t in tokens
                if str(base - int(columns[t])) in columns]
    if kind == "position" and isinstance(position, ir.RunLength):
        position = ir.FixedPosition(length + position.offset)
    if kind == "position":
        label = str(ir.position_label(position))
        if label.startswith("t"):  # x(t ± k): from the token k places away, into every token
            offset = int(label[1:].replace(" ", ""))
            return [(columns.index(str(int(columns[t]) + offset)), t) for t in tokens
                    if str(int(columns[t]) + offset) in columns]
        label = str(len([c for c in columns if c != "…"]) - 1) if label == "T" else label
        source = columns.index(label) if label in columns else tokens[-1]
        return [(source, t) for t in targets]
    if kind in ("uniform", "length"):
        return [(s, t) for t in targets for s in tokens if not causal or s <= t]
    if causal:  # an illustrative earlier position for each querying token
        return [(tokens[tokens.index(t) - shift], t) for t in targets if tokens.index(t) >= shift]
    # an illustrative retrieved position for each querying token
    return [(tokens[(tokens.index(t) + shift) % len(tokens)] if t in tokens else tokens[(shift - 1) % len(tokens)], t)
            for t in targets]
