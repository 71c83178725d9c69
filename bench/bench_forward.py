"""Benchmarks: compile time, and the forward's two optimisations as ratios measured in one run.

    python bench/bench_forward.py            # writes its section of BENCHMARKS.md

For a few canonical examples: the compile time, the time of a forward
over a batch with the sparse (CSR) FFN against the dense product, the CSR products over every
residual direction against those over the directions the block's units read and write (the
same bits; ``sparse.SparseProducts``), with FFN chunks of 2^22
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
         ("d_retrieval", 1e-3, "float32"), ("intrinsic_3", 1e-4, "float64"),
         ("min_pairwise", 1e-6, "float64", "deep")]
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


def every_direction(w_in: torch.Tensor, b_in: torch.Tensor, w_out: torch.Tensor) -> sparse_module.SparseProducts:
    """The CSR products over the whole stream: every direction read and written (the products
    before they were cut to the touched directions)."""
    every_in, every_out = torch.arange(w_in.shape[0]), torch.arange(w_out.shape[1])
    return sparse_module.SparseProducts(
        reads=every_in, w_in_t=sparse_module._transposed_csr(w_in, b_in.detach()),
        writes=every_out, w_out_t=sparse_module._transposed_csr(w_out))


def main() -> None:
    torch.set_num_threads(1)
    rows = ["| example | ε, dtype, route | compile (s) | dense FFN / sparse FFN | every direction / touched "
            "| 2^22 / 2^18 FFN chunks | all rows / readout-only last layer |", "|---|---|---|---|---|---|---|"]
    for name, eps, dtype, *route in CASES:
        ffn = route[0] if route else "wide"
        program = ifl.load_program(EXAMPLES / f"{name}.iflow")
        start = time.perf_counter()
        model = ifl.compile(program, eps=eps, dtype=dtype, device="cpu", samples=0, ffn=ffn)
        compile_seconds = time.perf_counter() - start
        x = ifl.sample_inputs(program, BATCH, seed=0).to(model.dtype)
        with torch.no_grad():
            sparse = timed(model, x)
            full = timed(model.residual_stream, x)
            with patched("sparse_weights", lambda *args: None):
                dense = timed(model, x)
            for module in (model.embed, *(block.mlp for block in model.blocks)):
                module.__dict__.pop("_csr_cache", None)  # rebuilt by the patched products
            with patched("sparse_products", every_direction):
                whole = timed(model, x)
            for module in (model.embed, *(block.mlp for block in model.blocks)):
                module.__dict__.pop("_csr_cache", None)
            with patched("HIDDEN_CHUNK", 1 << 22):
                large_chunks = timed(model, x)
        ratios = (dense / sparse, whole / sparse, large_chunks / sparse, full / sparse)
        cells = [name, f"{eps:g}, {dtype}, {ffn}", f"{compile_seconds:.3f}", *(f"{r:.2f}" for r in ratios)]
        rows.append("| " + " | ".join(cells) + " |")
    write_section("Forward (bench/bench_forward.py)",
                  f"One torch thread, batch {BATCH}, best of {REPEATS}. Ratios above 1 mean the optimised path "
                  "is faster.\n\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
