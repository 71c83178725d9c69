"""Benchmarks: compile time, and the forward's two optimisations as ratios measured in one run.

    python bench/bench_forward.py            # writes BENCHMARKS.md

For a few canonical examples at ε = 1e-3 (float32): the compile time, the time of a forward
over a batch with the sparse (CSR) FFN against the dense product, and the readout-only last
layer of ``forward`` against computing every row (``residual_stream``). Ratios, not absolute
times, are what carry over between machines; tests never assert on time.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

import infoflow_dsl as ifl
from infoflow_dsl import model as model_module

EXAMPLES = Path(__file__).resolve().parent.parent / "compiled_examples"
NAMES = ["min_pairwise", "intrinsic_3", "nearest_neighbour", "d_retrieval"]
BATCH = 256
REPEATS = 3


def timed(function, *arguments) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        function(*arguments)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    torch.set_num_threads(1)
    rows = ["| example | compile (s) | dense FFN / sparse FFN | all rows / readout-only last layer |",
            "|---|---|---|---|"]
    for name in NAMES:
        program = ifl.load_program(EXAMPLES / f"{name}.iflow")
        start = time.perf_counter()
        model = ifl.compile(program, eps=1e-3, device="cpu", samples=0)
        compile_seconds = time.perf_counter() - start
        x = ifl.sample_inputs(program, BATCH, seed=0).to(torch.float32)
        with torch.no_grad():
            sparse = timed(model, x)
            full = timed(model.residual_stream, x)
            original = model_module._sparse_weights
            model_module._sparse_weights = lambda *args: None
            try:
                dense = timed(model, x)
            finally:
                model_module._sparse_weights = original
        rows.append(f"| {name} | {compile_seconds:.3f} | {dense / sparse:.2f} | {full / sparse:.2f} |")
    text = ("# Benchmarks\n\nMeasured by `python bench/bench_forward.py` in one run (one torch thread, "
            f"batch {BATCH}, best of {REPEATS}, float32, ε = 1e-3). Ratios above 1 mean the optimised path is "
            "faster.\n\n" + "\n".join(rows) + "\n")
    (Path(__file__).resolve().parent.parent / "BENCHMARKS.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
