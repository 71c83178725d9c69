"""Benchmark: compile and analyze with the collector's first generation at 10,000 allocations
(``infoflow_dsl.collector``, what ``compile``, ``analyze`` and ``relower`` set while they
build) against Python's default 700, as ratios measured in one run.

    python bench/bench_collector.py            # writes its section of BENCHMARKS.md

One process, one torch thread; the two settings alternate, best of 3 each. Tests never assert
on time.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path

import torch
from report import write_section

import infoflow_dsl as ifl
from infoflow_dsl import collector

EXAMPLES = Path(__file__).resolve().parent.parent / "compiled_examples"
REPEATS = 3


def cases() -> list[tuple[str, Callable[[], object]]]:
    """(what, the call): a token program's compile and analysis at T = 40, and a wide
    continuous compile."""
    sort_freq = ifl.load_program(EXAMPLES / "tracr" / "sort_freq.iflow", length=40)
    intrinsic = ifl.load_program(EXAMPLES / "intrinsic_6.iflow")
    return [
        ("tracr/sort_freq, T = 40: compile (no measurement)", lambda: ifl.compile(sort_freq, samples=0)),
        ("tracr/sort_freq, T = 40: analyze", lambda: ifl.analyze(sort_freq)),
        ("intrinsic_6, ε = 1e-4, float64: compile (no measurement)",
         lambda: ifl.compile(intrinsic, eps=1e-4, dtype="float64", samples=0)),
    ]


def timed(call: Callable[[], object], first_generation: int) -> float:
    """The time of ``call`` with the collector tuned to ``first_generation`` (700: untuned)."""
    collector.FIRST_GENERATION = first_generation
    gc.set_threshold(700, 10, 10)
    gc.collect()
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(1)
    tuned = collector.FIRST_GENERATION
    rows = ["| call | untuned (s) | tuned (s) | untuned / tuned |", "|---|---:|---:|---:|"]
    for what, call in cases():
        call()  # warm: imports, caches
        times = {700: float("inf"), tuned: float("inf")}
        for _ in range(REPEATS):
            for setting in times:
                times[setting] = min(times[setting], timed(call, setting))
        rows.append(f"| {what} | {times[700]:.2f} | {times[tuned]:.2f} | {times[700] / times[tuned]:.2f} |")
    collector.FIRST_GENERATION = tuned
    write_section("Garbage collector (bench/bench_collector.py)",
                  f"One process, one torch thread, the collector's first generation at Python's default 700 "
                  f"allocations (untuned) and at {tuned:,} (tuned: what compile, analyze and relower set while "
                  f"they build), alternated, best of {REPEATS}.\n\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
