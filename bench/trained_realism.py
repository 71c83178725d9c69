"""How far ``train --keep-circuit`` moves a compiled model toward a model trained from scratch of
the same task and shape (issue "Trained, and still certified").

    python bench/trained_realism.py [--steps N] [--noise R] [--lr L] [--rebalance flip,pairs,balance,rotate]
                                    [--programs a,b,c] [--benchmarks]

For each token program (two of Tracr's shipped models and three token-output programs of the RASP
suite, ``bench/rasp_suite.py``, compiled at T = 6, by default): the compiled model; the model trained
from it keeping its circuit (heads at least 2 a layer, d_model ≥ 32, d_head ≥ 8, d_mlp ≥ 32,
covering the compiled widths), certified on its own weights (``circuits/certify.py``; with
``--rebalance``, rewritten first by ``training/rebalance.py`` and trained at the first (noise,
learning rate) of :data:`ADMISSION`, then ``--noise``/``--lr``, that the certification admits); and a
model of exactly that shape trained from scratch (``train``, 1,000 steps, lr 1e-3). The
statistics (``circuits/statistics.py``) on 256 random inputs at T, and the residual stream's
activation sparsity: the fraction of its entries (every layer, every row) below 10⁻⁶ of the
largest in absolute value.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
PROGRAMS = ("tracr:reverse", "tracr:shift_by_2", "rasp:reverse_digits", "rasp:sort_unique_digits", "rasp:word_class")
#: with --rebalance, the (noise, learning rate) tried in turn, the first the certification admits kept
ADMISSION = ((1e-2, 1e-4), (1e-3, 1e-5))
STATISTICS = ("zeros", "distinct", "kurtosis", "stable_rank", "active", "sparsity")


def residual_sparsity(model: Any, x: Any) -> float:
    """The fraction of residual-stream entries (every layer's output) below 10⁻⁶ of the largest."""
    import torch

    small, total = [0], [0]

    def tap(name: str, value: torch.Tensor) -> torch.Tensor:
        if name.endswith("hook_resid_post"):
            scale = float(value.abs().max()) or 1.0
            small[0] += int((value.abs() < 1e-6 * scale).sum())
            total[0] += value.numel()
        return value

    tap.listens = lambda name: name.endswith("hook_resid_post")  # type: ignore[attr-defined]
    with torch.no_grad():
        model.run(x, tap)
    return small[0] / max(total[0], 1)


def statistics(model: Any, x: Any) -> dict[str, float]:
    from infoflow_dsl.circuits.statistics import weight_statistics

    return {**weight_statistics(model, x), "sparsity": residual_sparsity(model, x)}


def measure(name: str, steps: int, noise: float, scratch_steps: int, lr: float = 1e-5,
            rebalance: tuple[str, ...] = ()) -> dict[str, Any]:
    """One program's row: the statistics of the three models and the certification."""
    import torch
    from circuit_corpus import build

    import infoflow_dsl as ifl
    from infoflow_dsl.oracle.tokens import random_ids
    from infoflow_dsl.pipeline.reading import program_of
    from infoflow_dsl.training.circuit_keeping import KeepSettings, covering_settings, train_until_certified
    from infoflow_dsl.training.settings import TrainSettings
    from infoflow_dsl.training.train import train

    torch.set_num_threads(1)
    kind, _, what = name.partition(":")
    init = ifl.load(ROOT / "compiled_examples" / "tracr" / f"{what}.safetensors", device="cpu") if kind == "tracr" \
        else build("rasp", what)
    program = program_of(init)
    settings = covering_settings(init, TrainSettings(heads=(2,), d_model=32, d_head=8, d_mlp=32, steps=steps,
                                                     batch=64, lr=lr))
    start = time.perf_counter()
    tries = [*ADMISSION, (noise, lr)] if rebalance else [(noise, lr)]
    # rebalanced: the largest noise and learning rate the certification admits
    admitted = train_until_certified(program, settings, init, tries, KeepSettings(rebalance=rebalance))
    kept, certification, noise, lr = admitted.result, admitted.certification, admitted.noise, admitted.lr
    trained_seconds = time.perf_counter() - start
    scratch = train(program, TrainSettings(heads=settings.heads, d_model=settings.d_model, d_head=settings.d_head,
                                           d_mlp=settings.d_mlp, steps=scratch_steps, batch=64, lr=1e-3,
                                           validation=512), quiet=True)
    x = random_ids(program, 256, seed=11)
    return {"program": name, "noise": noise, "lr": lr,
            "shape": {"heads": list(settings.heads), "d_model": settings.d_model,
                      "d_head": settings.d_head, "d_mlp": settings.d_mlp},
            "certified": certification.holds, "failures": certification.failures(),
            "accuracy": certification.function.get("accuracy"),
            "necessary": {a: len(t.necessary) for a, t in certification.truths.items()},
            "edges": len(kept.graph.edges), "pairs": len(kept.graph.pairs()),
            "seconds": round(trained_seconds, 1), "scratch_nmse": scratch.final_nmse,
            "compiled": statistics(init, x), "kept": statistics(kept.model, x), "scratch": statistics(scratch.model, x)}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| program | shape | certified | model | " + " | ".join(STATISTICS) + " |",
             "|---|---|---|---|" + "---:|" * len(STATISTICS)]
    for row in rows:
        shape = row["shape"]
        described = f"heads {shape['heads']}, d {shape['d_model']}, d_mlp {shape['d_mlp']}"
        for model in ("compiled", "kept", "scratch"):
            stats = row[model]
            mark = ("yes" if row["certified"] else "REFUSED") if model == "kept" else ""
            lines.append(f"| {row['program']} | {described} | {mark} | {model} | "
                         + " | ".join(f"{stats[s]:.3g}" for s in STATISTICS) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--noise", type=float, default=1e-4)
    parser.add_argument("--scratch-steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--rebalance", default="", help="the passes before training (training/rebalance.py)")
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--benchmarks", action="store_true", help='write the table to BENCHMARKS.md')
    arguments = parser.parse_args(argv)
    rows = []
    for name in arguments.programs.split(","):
        row = measure(name, arguments.steps, arguments.noise, arguments.scratch_steps, arguments.lr,
                      tuple(p for p in arguments.rebalance.split(",") if p))
        rows.append(row)
        print(f"{name}: noise {row['noise']:g}, lr {row['lr']:g}: "
              f"certified {row['certified']} (accuracy {row['accuracy']}), necessary {row['necessary']} of "
              f"{row['edges']} edges / {row['pairs']} pairs; {row['seconds']} s; scratch NMSE "
              f"{row['scratch_nmse']:.3g} {row['failures'][:1]}", flush=True)
    text = table(rows)
    print(text)
    if arguments.benchmarks:
        from report import write_section

        write_section("Trained, and still certified: realism", f"`python bench/trained_realism.py --steps "
                      f"{arguments.steps} --noise {arguments.noise:g}`.\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
