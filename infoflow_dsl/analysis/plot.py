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

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..language import typed as ir
from ..transformer.masks import HeadMask, admits
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
                         causal=causal, mask=head.mask_conditions)
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
            columns: list[str], shift: int, causal: bool = False, mask: HeadMask = ()) -> list[tuple[int, int]]:
    """(source column, target column) pairs of one head: never a pair its ``mask`` forbids
    (query t, or T+1 at the readout; key s; drawn at the full length T)."""
    targets = tokens if site == "token" else [readout]
    length = int(columns[tokens[-1]])

    def allowed(source: int, target: int) -> bool:
        query = length + 1 if target == readout else int(columns[target])
        return admits(mask, query, int(columns[source]), length) and (not causal or source <= target)

    if kind not in ("position", "uniform", "length"):
        return [arrow for t in targets if (arrow := _retrieved(t, tokens, readout, shift, causal, allowed))]
    return [(s, t) for s, t in _fetched(kind, position, tokens, columns, targets, length) if allowed(s, t)]


def _retrieved(target: int, tokens: list[int], readout: int, shift: int, causal: bool,
               allowed: Callable[[int, int], bool]) -> tuple[int, int] | None:
    """An illustrative retrieved position for one querying column: ``shift`` tokens on (back, in
    a causal target), or the next one from there that the head's mask allows; None if none."""
    count = len(tokens)
    start = (shift - 1) % count if target == readout else tokens.index(target) + (-shift if causal else shift)
    step = -1 if causal else 1
    order = [tokens[(start + step * i) % count] for i in range(count)] if start >= 0 or not causal else []
    return next(((source, target) for source in order if allowed(source, target)), None)


def _fetched(kind: str, position: object, tokens: list[int], columns: list[str], targets: list[int],
             length: int) -> list[tuple[int, int]]:
    """A position head's arrows (from the position it fetches), a uniform or length head's (from
    every token), before the mask."""
    if kind == "position" and isinstance(position, ir.ReflectedPosition):  # len + c - t with len = T
        base = (length if position.from_length else 0) + position.offset
        return [(columns.index(str(base - int(columns[t]))), t) for t in tokens
                if str(base - int(columns[t])) in columns]
    if kind == "position" and isinstance(position, ir.RunLength):
        position = ir.FixedPosition(length + position.offset)
    if kind == "position" and isinstance(position, ir.PositionVariable):  # x(t ± k): from k places away
        return [(columns.index(str(int(columns[t]) + position.offset)), t) for t in tokens
                if str(int(columns[t]) + position.offset) in columns]
    if kind == "position":
        label = str(ir.position_label(position))
        label = str(len([c for c in columns if c != "…"]) - 1) if label == "T" else label
        source = columns.index(label) if label in columns else tokens[-1]
        return [(source, t) for t in targets]
    return [(s, t) for t in targets for s in tokens]
