"""Benchmark: the memory a check takes, against the memory of the compiled model alone.

    python bench/bench_memory.py             # writes its section of BENCHMARKS.md

Each case runs in a fresh process (peak RSS is per process): compile, note the resident set,
then measure the model on 10,000 random inputs and 256 corners as ``infoflowc check`` and the
tests do, and note the peak. The FFN forward writes each chunk of rows into one preallocated
output; joined from a list instead, the heap fragmented until one such check held 24 GB (an
out-of-memory kill in CI). The reference is evaluated in the same batches as the model (whole,
its (N, T, T) pairwise tensors took intrinsic_6's check to 2.7 GB; batched, 0.96 GB). The ratio
peak / after-compile is what should stay small.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import torch
from report import write_section

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import errors_on, model_inputs

EXAMPLES = Path(__file__).resolve().parent.parent / "compiled_examples"
CASES = [("min_pairwise", 1e-4), ("intrinsic_3", 1e-4), ("intrinsic_6", 1e-4), ("nearest_neighbour", 1e-4)]
SAMPLES = 10_000


def resident_megabytes() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(name: str, eps: float) -> dict[str, float]:
    """In this process: compile ``name`` at ``eps`` (float64), then check it on SAMPLES inputs."""
    torch.set_num_threads(1)
    program = ifl.load_program(EXAMPLES / f"{name}.iflow")
    model = ifl.compile(program, eps=eps, dtype="float64", device="cpu", samples=0)
    after_compile = resident_megabytes()
    errors_on(model, program, model_inputs(program, SAMPLES, seed=0))
    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 2**20
    return {"weights": weights, "after_compile": after_compile, "peak": resident_megabytes()}


def main() -> None:
    rows = ["| example | ε (float64) | weights (MB) | RSS after compile (MB) | peak RSS in the check (MB) "
            "| peak / after compile |", "|---|---|---|---|---|---|"]
    for name, eps in CASES:
        child = subprocess.run([sys.executable, __file__, "--child", name, repr(eps)], check=True,
                               capture_output=True, text=True)
        m = json.loads(child.stdout.strip().splitlines()[-1])
        rows.append(f"| {name} | {eps:g} | {m['weights']:.1f} | {m['after_compile']:.0f} | {m['peak']:.0f} "
                    f"| {m['peak'] / m['after_compile']:.2f} |")
    write_section("Memory of a check (bench/bench_memory.py)",
                  f"One process per case, one torch thread, {SAMPLES:,} random inputs and 256 corners.\n\n"
                  + "\n".join(rows))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(measure(sys.argv[2], float(sys.argv[3]))))
    else:
        main()
