"""Benchmark: the cost of the hook points (infoflow_dsl.transformer.lens), as ratios measured in one run.

    python bench/bench_hooks.py            # writes its section of BENCHMARKS.md

``model(x)`` now runs one forward that passes every intermediate through a tap (the identity
when nothing listens). Against the forward as it was before the taps (``infoflow_dsl/model.py``
at BASELINE, read from git and built on the same weights), and, for scale, the TransformerLens
wrapper with no hooks attached (every row of the last layer, HookPoint calls) and
``run_with_cache`` of every hook. Timings are process CPU time (one torch thread, so other
processes on the machine inflate them less than wall time), the variants alternating each
round: best of REPEATS rounds (more for small models, BUDGET seconds' worth) for the two plain
forwards, of WRAPPER_REPEATS for the wrapper.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_forward import CASES, EXAMPLES
from report import write_section

import infoflow_dsl as ifl

BASELINE = "e923de3"  # main as merged: the forward without the taps (per-token targets included)
ROOT = Path(__file__).resolve().parent.parent
BATCH = 256
REPEATS = 31
BUDGET = 3.0  # seconds of CPU per plain variant at least (a 4 ms forward gets 750 rounds)
WRAPPER_REPEATS = 5


def baseline_module():
    """infoflow_dsl/model.py as of BASELINE, imported under another name."""
    source = subprocess.run(["git", "show", f"{BASELINE}:infoflow_dsl/model.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "baseline_model.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("baseline_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_model"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def best_times(functions: list, x: torch.Tensor, repeats: int) -> list[float]:
    """Best CPU time of ``repeats`` per function, the functions called in turn each round, in
    reverse order every other round (whichever runs second inherits the first's freed memory)."""
    best = [float("inf")] * len(functions)
    for round_ in range(repeats):
        order = range(len(functions)) if round_ % 2 == 0 else reversed(range(len(functions)))
        for i in order:
            start = time.process_time()
            functions[i](x)
            best[i] = min(best[i], time.process_time() - start)
    return best


def main() -> None:
    torch.set_num_threads(1)
    old = baseline_module()
    rows = ["| example | ε, dtype | before (ms) | model(x) / before | hooked, no hooks / before "
            "| run_with_cache / before |", "|---|---|---|---|---|---|"]
    for name, eps, dtype, *route in CASES:
        if route:  # bench_forward's route cases (deep): this table keeps the wide examples it had
            continue
        program = ifl.load_program(EXAMPLES / f"{name}.iflow")
        model = ifl.compile(program, eps=eps, dtype=dtype, device="cpu", samples=0)
        before = old.CompiledTransformer(model.config, model.state_dict(), device="cpu", dtype=model.dtype)
        hooked = ifl.hooked(model)
        x = ifl.sample_inputs(program, BATCH, seed=0).to(model.dtype)
        with torch.no_grad():
            # the fused attention rounds differently from the explicit softmax of BASELINE: both are
            # within the model's ε of the reference; the hooked forward is the plain one, bit for bit
            torch.testing.assert_close(model(x), before(x), rtol=0, atol=2 * eps)
            assert torch.equal(hooked(x), model(x))
            start = time.process_time()
            model(x)
            repeats = max(REPEATS, int(BUDGET / (time.process_time() - start)))  # small models: more rounds
            times = best_times([before, model], x, repeats) + best_times([hooked, hooked.run_with_cache], x,
                                                                          WRAPPER_REPEATS)
        cells = [name, f"{eps:g}, {dtype}", f"{1000 * times[0]:.2f}", *(f"{t / times[0]:.3f}" for t in times[1:])]
        rows.append("| " + " | ".join(cells) + " |")
    write_section("Hook points (bench/bench_hooks.py)",
                  f"One torch thread, batch {BATCH}, CPU time, best of max({REPEATS}, {BUDGET:g} s worth) rounds "
                  f"(wrapper: {WRAPPER_REPEATS}), variants alternating (order reversed every other round). "
                  f"`before`: the forward before the taps (model.py at {BASELINE}, explicit softmax); ratios below "
                  "1.05 mean the plain forward is within 5% of it. Since the fused attention (model.py, "
                  "`fused_attention`) the plain forward also no longer stores the (B, H, T'+1, T') scores, and "
                  "its outputs agree with BASELINE's to rounding (within 2ε, asserted) rather than bit for bit; "
                  "the hooked forward still equals it bit for bit (asserted).\n\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
