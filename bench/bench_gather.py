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
EPS = 1e-2


def program(name: str, length: int) -> ifl.Program:
    example = by_name(name)
    return ifl.parse_program(example.source, example.path, length=length)


def count(name: str, length: int) -> int | None:
    try:
        model = ifl.compile(program(name, length), eps=EPS, dtype="float64", samples=0, allow_inefficient=True)
    except ifl.CompileError:
        return None
    return model.nonzero_parameter_count()


def slope(points: list[tuple[int, int]]) -> float:
    xs, ys = [math.log(t) for t, _ in points], [math.log(c) for _, c in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    torch.set_num_threads(1)
    rows, series = [], {}
    for name in CASES:
        report = ifl.analyze(program(name, LENGTHS[0])).to_dict()
        law = report["cost"].get("fallback", {}).get("exponent_T", 0) if report["verdict"] == "inefficient" else 0
        points: list[tuple[int, int]] = []
        cells = []
        for length in LENGTHS:
            start = time.perf_counter()
            value = count(name, length) if len(points) == len(cells) else None  # stop after a refusal
            if value is not None and time.perf_counter() - start < 120:
                points.append((length, value))
            cells.append(f"{value:,}" if value is not None else "refused")
        fitted = f"{slope(points):.2f}" if len(points) >= 2 else "—"
        route = "gather" if report["verdict"] == "inefficient" else "efficient"
        rows.append(f"| {name} | {route} | {' | '.join(cells)} | {fitted} | {law} |")
        series[name] = points
    header = ("| target | route | " + " | ".join(f"T = {t}" for t in LENGTHS) + " | fitted exponent of T | "
              "analyze's exponent |\n|" + "---|" * (len(LENGTHS) + 4))
    plot(series)
    write_section("Gather route: parameters against T (bench/bench_gather.py)", f"""
Nonzero parameters at ε = {EPS:g}, float64, per T (one run, this machine; "refused" = over the
compiler's 1,000,000-unit limit). Efficient targets stay flat; the gather route grows like T^k
where every step is exact (top(3)) and like T^(k(1+e)) where each of the T^k slots interpolates
functions to ε^-e (the shared error budget), k the number of unrolled variables (analyze's
`cost.fallback.exponent_T`). triangle_center's norm can reach 0, which costs ε^-1 units per slot:
refused at ε = 1e-2 from T = 4 on; its squared-norm variant (ineff_triangle_squared) compiles and
grows as analyze predicts. Plot: bench/gather.png.

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
