"""Benchmarks: compile time, and the forward's two optimisations as ratios measured in one run.

    python bench/bench_forward.py            # writes its section of BENCHMARKS.md

For a few canonical examples: the compile time, the time of a forward
over a batch with the sparse (CSR) FFN against the dense product, with FFN chunks of 2^22
hidden activations against the default 2^18 (which stay in a core's L2 cache), and the
readout-only last layer of ``forward`` against computing every row (``residual_stream``). Ratios, not absolute
times, are what carry over between machines; tests never assert on time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from report import write_section

import infoflow_dsl as ifl
from infoflow_dsl.transformer import sparse as sparse_module

EXAMPLES = Path(__file__).resolve().parent.parent / "compiled_examples"
#: (example, ε, dtype): the shipped setting, and intrinsic_3 where check's own tests spend their time.
CASES = [("min_pairwise", 1e-3, "float32"), ("intrinsic_3", 1e-3, "float32"), ("nearest_neighbour", 1e-3, "float32"),
         ("d_retrieval", 1e-3, "float32"), ("intrinsic_3", 1e-4, "float64")]
BATCH = 256
REPEATS = 3


def timed(function, *arguments) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        function(*arguments)
        best = min(best, time.perf_counter() - start)
    return best


@contextmanager
def patched(attribute: str, value: object) -> Iterator[None]:
    """``infoflow_dsl.transformer.sparse.<attribute>`` replaced by ``value`` for the duration."""
    original = getattr(sparse_module, attribute)
    setattr(sparse_module, attribute, value)
    try:
        yield
    finally:
        setattr(sparse_module, attribute, original)


def main() -> None:
    torch.set_num_threads(1)
    rows = ["| example | ε, dtype | compile (s) | dense FFN / sparse FFN | 2^22 / 2^18 FFN chunks "
            "| all rows / readout-only last layer |", "|---|---|---|---|---|---|"]
    for name, eps, dtype in CASES:
        program = ifl.load_program(EXAMPLES / f"{name}.iflow")
        start = time.perf_counter()
        model = ifl.compile(program, eps=eps, dtype=dtype, device="cpu", samples=0)
        compile_seconds = time.perf_counter() - start
        x = ifl.sample_inputs(program, BATCH, seed=0).to(model.dtype)
        with torch.no_grad():
            sparse = timed(model, x)
            full = timed(model.residual_stream, x)
            with patched("sparse_weights", lambda *args: None):
                dense = timed(model, x)
            with patched("HIDDEN_CHUNK", 1 << 22):
                large_chunks = timed(model, x)
        ratios = (dense / sparse, large_chunks / sparse, full / sparse)
        cells = [name, f"{eps:g}, {dtype}", f"{compile_seconds:.3f}", *(f"{r:.2f}" for r in ratios)]
        rows.append("| " + " | ".join(cells) + " |")
    write_section("Forward (bench/bench_forward.py)",
                  f"One torch thread, batch {BATCH}, best of {REPEATS}. Ratios above 1 mean the optimised path "
                  "is faster.\n\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
