"""Benchmark: InfoFlow's dividing line on real weights (issue 9).

    python bench/bench_gather.py             # writes its section of BENCHMARKS.md and bench/gather.png

Nonzero parameters against T at ε = 1e-2 (float64): targets the verdict calls inefficient,
compiled through the gather route (``--allow-inefficient``), next to efficient targets through
the usual route (flat in T). The fitted exponent of T (least squares on log-log) stands beside
the law analyze prints (``cost.fallback.exponent_T``). A size that would pass the compiler's
limit of 1,000,000 hidden units is reported as refused.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import torch
from report import write_section

import infoflow_dsl as ifl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from programs import by_name  # noqa: E402

LENGTHS = [4, 6, 8, 12, 16, 24, 32]
CASES = ["third_largest", "ineff_triple_product", "ineff_triangle_squared", "triangle_center", "min_pairwise",
         "intrinsic_3"]
#: The gather route's square routes: compile's default (auto) and one wide layer.
ROUTES = (None, "wide")
#: The model holds its weights dense (d_model grows like T on the gather route): triangle_center
#: at T = 16 already stores 90 M numbers, so it stops there (within the 8 GB the issue allows).
LONGEST = {"triangle_center": 16}
EPS = 1e-2
SECONDS = 120  # a compile slower than this ends its row


def program(name: str, length: int) -> ifl.Program:
    example = by_name(name)
    return ifl.parse_program(example.source, example.path, length=length)


def count(name: str, length: int, ffn: str | None) -> int | None:
    try:
        model = ifl.compile(program(name, length), eps=EPS, dtype="float64", samples=0, allow_inefficient=True,
                            ffn=ffn)
    except ifl.CompileError:
        return None
    return model.nonzero_parameter_count()


def slope(points: list[tuple[int, int]]) -> float:
    xs, ys = [math.log(t) for t, _ in points], [math.log(c) for _, c in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def row(name: str, ffn: str | None) -> tuple[list[str], list[tuple[int, int]]]:
    """One table row's cells (a count, "refused", or "—" past the last length measured) and its points."""
    points: list[tuple[int, int]] = []
    cells = []
    stopped = False
    for length in LENGTHS:
        if stopped or length > LONGEST.get(name, LENGTHS[-1]):
            cells.append("—")
            continue
        start = time.perf_counter()
        value = count(name, length, ffn)
        cells.append(f"{value:,}" if value is not None else "refused")
        if value is not None:
            points.append((length, value))
        stopped = value is None or time.perf_counter() - start > SECONDS
    return cells, points


def main() -> None:
    torch.set_num_threads(1)
    rows, series = [], {}
    for name in CASES:
        report = ifl.analyze(program(name, LENGTHS[0])).to_dict()
        inefficient = report["verdict"] == "inefficient"
        fallback = report["cost"].get("fallback") or {}
        for ffn in ROUTES if inefficient else (None,):
            law = (fallback["exponent_T_wide"] if ffn == "wide" else fallback["exponent_T"]) if inefficient else 0
            cells, points = row(name, ffn)
            fitted = f"{slope(points):.2f}" if len(points) >= 2 else "—"
            route = f"gather, {ffn or 'auto'}" if inefficient else "efficient"
            rows.append(f"| {name} | {route} | {' | '.join(cells)} | {fitted} | {law:g} |")
            series[f"{name} ({route})"] = points
    header = ("| target | route | " + " | ".join(f"T = {t}" for t in LENGTHS) + " | fitted exponent of T | "
              "analyze's exponent |\n|" + "---|" * (len(LENGTHS) + 4))
    plot(series)
    write_section("Gather route: parameters against T (bench/bench_gather.py)", f"""
Nonzero parameters at ε = {EPS:g}, float64, per T (one run, this machine; "refused" = over the
compiler's 1,000,000-unit limit; "—" = not run). Efficient targets stay flat. The gather route
unrolls k variables into T^k slots whose error shares shrink like ε/T^k. Through `--ffn auto`
(compile's default on this route) each square costs O(log(T^k/ε)) tent-map units, so the size
grows like T^k up to a logarithm (analyze's `cost.fallback.exponent_T`); through one wide layer
(`--ffn wide`) each function costs (T^k/ε)^e units, T^(k(1+e)) in all (`exponent_T_wide`), e = 1/2,
or 1 where a norm can reach 0: triangle_center through one wide layer is refused at ε = 1e-2 from
T = 4 on, through auto it compiles (its fits are over T = 4 … {LONGEST["triangle_center"]}: the
weights are stored dense and d_model grows like T). Plot: bench/gather.png.

{header}
""" + "\n".join(rows))


def plot(series: dict[str, list[tuple[int, int]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    for name, points in series.items():
        if points:
            axes.plot([t for t, _ in points], [c for _, c in points], marker="o", label=name)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("T")
    axes.set_ylabel(f"nonzero parameters (ε = {EPS:g})")
    axes.set_title("InfoFlow's dividing line: efficient targets are flat, gathered ones grow with T", fontsize=9)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(ROOT / "bench" / "gather.png", metadata={"Software": None})


if __name__ == "__main__":
    main()
