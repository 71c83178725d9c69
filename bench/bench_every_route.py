"""Benchmark: every efficient program through every square route, measured in full.

    python bench/bench_every_route.py [--workers 2]   # writes its section of BENCHMARKS.md

The tests (tests/test_approximations.py) check every efficient program with ``--ffn deep`` on a
few hundred inputs, so that CI stays short; this script is the full measurement behind
``--ffn deep|auto`` (issue 10's acceptance), run once and recorded:

- every efficient program of the test table (``tests/programs.py``, verdict ``efficient``) and
  every efficient canonical example, compiled with ``ffn="deep"`` at ε ∈ {1e-3, 1e-6}, float64:
  the worst error on 10,000 random inputs + 256 corners (``measure.vectors.errors_on``, the inputs the
  guarantee covers) against ε and the model's a-priori bound;
- the nonzero parameters of ``wide``, ``deep`` and ``auto`` at both ε: auto must need no more
  than the smaller of the other two (±5%);
- the canonical examples with ``ffn="deep"`` in float32 at ε = 1e-3: within ε, or refused with
  the smallest ε float32 can honour.

Programs run in parallel processes (``--workers``); each line of the table is one program.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
from report import write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from programs import ALL, by_name  # noqa: E402

import infoflow_dsl as ifl  # noqa: E402
from infoflow_dsl.measure.vectors import CORNERS, errors_on, model_inputs  # noqa: E402

EPSILONS = (1e-3, 1e-6)
ROUTES = ("wide", "deep", "auto")
SAMPLES = 10_000
AUTO_SLACK = 1.05
TITLE = "Every efficient program through every square route (bench/bench_every_route.py)"


@dataclass(frozen=True)
class RouteResult:
    """One program at one ε: nonzero parameters per route (None: refused), the deep model's worst
    measured error and a-priori bound (float64), and the refusal text when there is one."""

    name: str
    eps: float
    nonzero: dict[str, int | None]
    deep_error: float | None
    deep_bound: float | None
    refused: str = ""

    @property
    def deep_within(self) -> bool:
        return self.deep_error is not None and self.deep_error <= min(self.eps, self.deep_bound or self.eps)

    @property
    def auto_ok(self) -> bool:
        counts = [self.nonzero[r] for r in ("wide", "deep") if self.nonzero[r] is not None]
        auto = self.nonzero["auto"]
        return auto is not None and bool(counts) and auto <= AUTO_SLACK * min(counts)


def efficient_programs() -> list[str]:
    """Every program of the table whose verdict is efficient, canonical ones first."""
    names = []
    for example in ALL:
        program = ifl.parse_program(example.source, example.path)
        if ifl.analyze(program).verdict == "efficient":
            names.append(example.name)
    return names


def worst_error(model: ifl.CompiledTransformer, program: ifl.Program) -> float:
    """The worst error over 10,000 random inputs and the corners that the guarantee covers."""
    error, kept = errors_on(model, program, model_inputs(program, SAMPLES, seed=11, corners=CORNERS))
    return float(error[kept].max()) if bool(kept.any()) else 0.0


def measure_program(name: str) -> list[RouteResult | tuple[str, str]]:
    """Both ε for one program, and (for a canonical example) the float32 deep result."""
    torch.set_num_threads(1)
    example = by_name(name)
    program = ifl.parse_program(example.source, example.path)
    out: list[RouteResult | tuple[str, str]] = []
    for eps in EPSILONS:
        nonzero: dict[str, int | None] = {}
        deep, refused = None, ""
        for route in ROUTES:
            try:
                model = ifl.compile(program, eps=eps, dtype="float64", device="cpu", samples=0, ffn=route)
            except ifl.CompileError as error:
                nonzero[route], refused = None, str(error).splitlines()[0]
                continue
            nonzero[route] = model.nonzero_parameter_count()
            if route == "deep":
                deep = model
        error = worst_error(deep, program) if deep is not None else None
        bound = deep.config["a_priori_bound"] if deep is not None else None
        out.append(RouteResult(name, eps, nonzero, error, bound, refused))
    if "canonical" in example.constructs:
        out.append((name, float32_deep(program)))
    print(name, "done", flush=True)
    return out


def float32_deep(program: ifl.Program) -> str:
    """The float32 deep model at ε = 1e-3: its worst error, or the refusal's smallest ε."""
    try:
        model = ifl.compile(program, eps=1e-3, dtype="float32", device="cpu", samples=0, ffn="deep")
    except ifl.CompileError as error:
        text = str(error)
        return "refused: " + text[text.find("the smallest ε"):].split(";")[0].strip() if "smallest ε" in text \
            else "refused: " + text.splitlines()[0]
    worst = worst_error(model, program)
    return f"{worst:.2e} ({'within' if worst <= 1e-3 else 'NOT within'} ε)"


def cell(result: RouteResult) -> str:
    counts = " / ".join("—" if result.nonzero[r] is None else f"{result.nonzero[r]:,}" for r in ROUTES)
    if result.deep_error is None:
        return f"refused | {counts} |"
    mark = "" if result.deep_within else " **over**"
    auto = "" if result.auto_ok else " **auto over**"
    return f"{result.deep_error:.2e} ≤ {result.deep_bound:.2e}{mark} | {counts}{auto} |"


def render(results: list[RouteResult], float32: dict[str, str], seconds: float, workers: int) -> str:
    by_program: dict[str, dict[float, RouteResult]] = {}
    for r in results:
        by_program.setdefault(r.name, {})[r.eps] = r
    rows = ["| program | deep ε = 1e-3: worst error ≤ bound | nonzero wide / deep / auto | "
            "deep ε = 1e-6: worst error ≤ bound | nonzero wide / deep / auto |", "|---|---|---|---|---|"]
    for name, per_eps in by_program.items():
        rows.append(f"| {name} | " + " ".join(cell(per_eps[eps]) for eps in EPSILONS))
    compiled = [r for r in results if r.deep_error is not None]
    within = sum(r.deep_within for r in compiled)
    auto_ok = sum(r.auto_ok for r in results)
    refused = [f"{r.name} (ε = {r.eps:g}: {r.refused})" for r in results if r.deep_error is None]
    f32 = ["| canonical example | float32, deep, ε = 1e-3 |", "|---|---|",
           *(f"| {name} | {text} |" for name, text in float32.items())]
    return (
        f"{len(by_program)} programs (every efficient one of tests/programs.py, the canonical examples among them), "
        f"float64, ε ∈ {{1e-3, 1e-6}}; worst error over {SAMPLES:,} random inputs + {CORNERS} corners "
        f"(seed 11) for the deep model; nonzero parameters of all three routes (`samples=0`). One run, "
        f"{workers} worker processes, {seconds / 60:.0f} minutes.\n\n"
        f"- deep within ε and its a-priori bound: **{within} of {len(compiled)}** compiled models"
        f"{'; refused: ' + ', '.join(refused) if refused else ''}\n"
        f"- auto ≤ {AUTO_SLACK:g} × min(wide, deep) nonzero: **{auto_ok} of {len(results)}**\n\n"
        + "\n".join(rows) + "\n\n" + "\n".join(f32)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="these programs only (the section is not written)")
    arguments = parser.parse_args()
    names = arguments.only or efficient_programs()
    start = time.monotonic()
    with ProcessPoolExecutor(arguments.workers) as pool:
        outputs = [item for chunk in pool.map(measure_program, names) for item in chunk]
    results = [o for o in outputs if isinstance(o, RouteResult)]
    float32 = dict(o for o in outputs if isinstance(o, tuple))
    body = render(results, float32, time.monotonic() - start, arguments.workers)
    if arguments.only:
        print(body)
    else:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()
