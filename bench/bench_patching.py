"""Benchmark: exact edge patching (every candidate pair ablated alone, one forward each) with the
patched runs starting from the clean run (``EdgeForward.run(..., clean=)``: the layers before the
ablated edge's receiver taken from it) against running every layer, as ratios measured in one run.

    python bench/bench_patching.py            # writes its section of BENCHMARKS.md

Models: shipped ones disguised as the corpus's second tier (heads and units split in 2, shuffled,
rotated), on 300 random token sequences of length 5 (vectors: 300 inputs at T ≤ 8), zero ablation.
One process, one torch thread; the two ways alternate, best of 2 each, and their outputs are
compared bit for bit. Tests never assert on time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from report import write_section

import infoflow_dsl as ifl
from infoflow_dsl.circuits.patching import EdgeForward, PatchedRun, stand_ins
from infoflow_dsl.oracle.sampling import sample_inputs
from infoflow_dsl.oracle.tokens import random_ids
from infoflow_dsl.pipeline.reading import program_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
MODELS = ["tracr/shuffle_dyck3", "tracr/sort", "intrinsic_3", "min_pairwise"]
REPEATS = 2


def every_pair(forward: EdgeForward, x: torch.Tensor, stands: dict[str, torch.Tensor],
               clean: PatchedRun | None) -> tuple[float, list[torch.Tensor]]:
    """Seconds for every candidate pair's patched forward, and their outputs."""
    start = time.perf_counter()
    outputs = [forward.run(x, [pair], stands, clean=clean).y for pair in forward.graph.pairs()]
    return time.perf_counter() - start, outputs


def main() -> None:
    from circuit_corpus import TIERS

    torch.set_num_threads(1)
    rows = ["| model (disguised) | layers | candidate pairs | every layer (s) | from the clean run (s) | ratio | "
            "same bits |", "|---|---:|---:|---:|---:|---:|---|"]
    for name in MODELS:
        model = ifl.disguise(ifl.load(ROOT / "compiled_examples" / f"{name}.safetensors", device="cpu"), seed=7,
                             **TIERS["disguised"])
        program = program_of(model)
        x = random_ids(program, 300, seed=1, length=5) if program.over_tokens else sample_inputs(
            program, 300, seed=1, length=min(program.length, 8)).to(model.dtype)
        forward = EdgeForward(model, ifl.circuit_graph(model))
        stands, clean = stand_ins(forward, x, "zero"), forward.run(x)
        best = {"full": float("inf"), "clean": float("inf")}
        found: dict[str, list[torch.Tensor]] = {}
        for _ in range(REPEATS):
            for way, start in (("full", None), ("clean", clean)):
                seconds, found[way] = every_pair(forward, x, stands, start)
                best[way] = min(best[way], seconds)
        same = all(torch.equal(a, b) for a, b in zip(found["full"], found["clean"], strict=True))
        rows.append(f"| {name} | {len(model.blocks)} | {len(forward.graph.pairs())} | {best['full']:.2f} | "
                    f"{best['clean']:.2f} | {best['full'] / best['clean']:.2f} | {'yes' if same else 'NO'} |")
        print(rows[-1], flush=True)
    write_section("Edge patching from the clean run (bench/bench_patching.py)",
                  "Exact edge patching on the corpus's disguised tier: every candidate pair ablated alone "
                  "(zero), one forward each, running every layer or starting from the clean run (the "
                  "layers before the pair's receiver taken from it). One run, one thread, best of 2, "
                  "alternated.\n\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
