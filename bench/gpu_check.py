"""The GPU check's figures (``scripts/gpu_check.sh`` runs the device's tests first, then this):
one JSON of what the device does, each figure beside the device's name.

    python bench/gpu_check.py --out OUT [--budget SECONDS] [--small] [--tests JUNIT.xml]

Sections, each started only while the budget leaves it room (its estimate), each caught on its
own (an error is recorded, the next section runs); they run training, paper_sweep, forward,
compile, check, ground_truth, training_compiled, the figures the training goal needs first:

- ``compile``: min_pairwise at ε = 1e-4 on the device, its weights against the CPU's (bit for
  bit), its error on 20,000 inputs there;
- ``check``: ``check_model`` on the device against the CPU (the worst error, the verdict, seconds);
- ``ground_truth``: ``edge_truth`` (every ablation) and ``discover`` (EAP-IG, mean ablation) of
  min_pairwise and Tracr's frac_prevs on the CPU and on the device: seconds, the same verdicts;
- ``forward``: min_pairwise (ε = 1e-3, float32) at T = 4096 against a plain SDPA transformer of
  its shape (bench/plain.py) at batch 8 and 64, and the peak memory;
- ``training``: intrinsic_2 at T = 64 with the paper's widths: ``train`` alone, then the three
  head configurations × three seeds as one stacked model (``train_many``), steps/s;
- ``training_compiled``: the same nine runs with ``torch.compile`` (skipped when the budget is short);
- ``paper_sweep``: the paper-scale sweep (IF, D = 2..6, heads (D, D), (D−1, D), (D, D−1), three
  seeds, T = 64) at reduced steps, each D one batched sweep (``sweep.execute``): the aggregate
  steps/s and the minutes the full 40,000-step sweep would take at that rate;
- ``tests``: the counts of the device's test run (a JUnit file) when given.

``--paper-minutes M`` runs, instead, the whole paper-scale sweep time-boxed: a 200-step pilot
measures the aggregate rate and every D then trains at the steps that fit M minutes (40,000,
the paper's, when they do); its rows and models are under OUT/paper_sweep/steps_N/.

``--small`` shrinks every size (for the CPU: tests/test_bench.py runs it end to end). On a
machine without CUDA the device is the CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from plain import plain_like  # noqa: E402

import infoflow_dsl as ifl  # noqa: E402
from infoflow_dsl.training import sweep  # noqa: E402
from infoflow_dsl.training.train import Distribution, TrainSettings, train  # noqa: E402
from infoflow_dsl.training.train_many import train_many  # noqa: E402

PAPER = TrainSettings(heads=(2, 2), d_model=64, d_head=16, d_mlp=256, batch=256, lr=1e-3,
                      dist=Distribution("normal", 1.0), validation=1024)
PAPER_STEPS, PAPER_SEEDS, PAPER_DS = 40_000, 3, (2, 3, 4, 5, 6)


@dataclass(frozen=True)
class Sizes:
    compile_inputs: int
    check_samples: int
    forward_length: int
    forward_batches: tuple[int, ...]
    train_steps: int
    sweep_steps: int
    sweep_length: int
    settings: TrainSettings


FULL = Sizes(20_000, 10_000, 4096, (8, 64), 300, 400, 64, PAPER)
SMALL = Sizes(200, 100, 64, (2, 4), 4, 3, 8, replace(PAPER, d_model=16, d_head=4, d_mlp=16, batch=16, validation=64))


def program(name: str, length: int | None = None) -> ifl.Program:
    return ifl.load_program(ROOT / "compiled_examples" / f"{name}.iflow", length=length)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(work: Callable[[], Any], device: str) -> tuple[float, Any]:
    """(seconds, result) of ``work`` with the device synchronised before and after."""
    synchronize(device)
    start = time.perf_counter()
    result = work()
    synchronize(device)
    return time.perf_counter() - start, result


# ---------------------------------------------------------------------------- sections


def compile_section(sizes: Sizes, device: str) -> dict[str, Any]:
    target = program("min_pairwise")
    seconds, there = timed(lambda: ifl.compile(target, eps=1e-4, device=device, samples=0), device)
    here = ifl.compile(target, eps=1e-4, device="cpu", samples=0)
    cpu_state = here.state_dict()
    identical = all(torch.equal(t.cpu().to_dense() if t.is_sparse else t.cpu(),
                                cpu_state[k].to_dense() if cpu_state[k].is_sparse else cpu_state[k])
                    for k, t in there.state_dict().items())
    from infoflow_dsl.measure.vectors import errors_on, model_inputs

    x = model_inputs(target, sizes.compile_inputs, seed=7)
    measure_seconds, (error, kept) = timed(lambda: errors_on(there, target, x), device)
    worst = float(error[kept].max())
    return {"program": "min_pairwise", "eps": 1e-4, "seconds": round(seconds, 3), "weights_identical_to_cpu": identical,
            "inputs": int(x.shape[0]), "worst_error": worst, "within_eps": worst <= 1e-4,
            "measure_seconds": round(measure_seconds, 3)}


def check_section(sizes: Sizes, device: str) -> dict[str, Any]:
    from infoflow_dsl.pipeline.devices import on_device
    from infoflow_dsl.pipeline.reading import program_of
    from infoflow_dsl.verify.check import check_model

    model = ifl.load(ROOT / "compiled_examples" / "min_pairwise.safetensors", device="cpu")
    target = program_of(model)
    out: dict[str, Any] = {"model": "compiled_examples/min_pairwise.safetensors", "samples": sizes.check_samples}
    for where in ("cpu", device) if device != "cpu" else ("cpu",):
        seconds, result = timed(lambda where=where: check_model(on_device(model, where), target,
                                                                sizes.check_samples, progress=False), where)
        out[where] = {"seconds": round(seconds, 3), "worst_error": result.worst_error, "within": result.within}
    return out


def forward_section(sizes: Sizes, device: str) -> dict[str, Any]:
    length = sizes.forward_length
    model = ifl.compile(program("min_pairwise", length), eps=1e-3, device=device, samples=0)
    plain = plain_like(model).to(device)
    rows = []
    for batch in sizes.forward_batches:
        x = ifl.sample_inputs(program("min_pairwise", length), batch, seed=0).to(device, model.dtype)
        times = []
        with torch.no_grad():
            for function in (model, plain):
                function(x)  # warm-up
                times.append(min(timed(lambda f=function, x=x: f(x), device)[0] for _ in range(5)))
        rows.append({"batch": batch, "compiled_ms": round(times[0] * 1e3, 3), "plain_ms": round(times[1] * 1e3, 3),
                     "compiled_over_plain": round(times[0] / times[1], 3)})
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
    return {"program": "min_pairwise", "eps": 1e-3, "T": length, "rows": rows, "peak_gib": peak}


def ground_truth_section(sizes: Sizes, device: str) -> dict[str, Any]:
    """``edge_truth`` and ``discover`` on the CPU and on the device: seconds each, the same verdicts."""
    samples = 300 if sizes is FULL else 20
    out: dict[str, Any] = {"samples": samples}
    for name in ("min_pairwise", "tracr/frac_prevs"):
        model = ifl.load(ROOT / "compiled_examples" / f"{name}.safetensors", device="cpu")
        found: dict[str, Any] = {where: truth_and_discovery(model, samples, where)
                                 for where in dict.fromkeys(("cpu", device))}
        if device != "cpu":
            found["same_verdicts"] = found["cpu"]["necessary"] == found[device]["necessary"]
        out[name] = found
    return out


def truth_and_discovery(model: ifl.CompiledTransformer, samples: int, where: str) -> dict[str, Any]:
    truth_seconds, (_, truths) = timed(lambda: ifl.edge_truth(model, samples=samples, device=where), where)
    seconds, result = timed(lambda: ifl.discover(model, "eap-ig", "mean", samples=samples, device=where), where)
    return {"truth_seconds": round(truth_seconds, 3), "discover_eap_ig_seconds": round(seconds, 3),
            "necessary": {a: len(t.necessary) for a, t in truths.items()}, "auroc": result.auroc}


def nine_runs(settings: TrainSettings) -> list[TrainSettings]:
    """The three head configurations of D = 2 × three seeds."""
    return [replace(settings, heads=heads, seed=seed) for heads in ((2, 2), (1, 2), (2, 1)) for seed in range(3)]


def training_section(sizes: Sizes, device: str, compiled: bool = False) -> dict[str, Any]:
    target = program("intrinsic_2", 64 if sizes is FULL else sizes.sweep_length)
    settings = replace(sizes.settings, steps=sizes.train_steps, device=device, validation=256)
    out: dict[str, Any] = {"program": "intrinsic_2", "T": target.length, "d_model": settings.d_model,
                           "batch": settings.batch, "steps": settings.steps, "compile": compiled}
    if not compiled:
        seconds, _ = timed(lambda: train(target, settings, quiet=True), device)
        out["alone_steps_per_second"] = round(settings.steps / seconds, 2)
    runs = nine_runs(settings)
    seconds, _ = timed(lambda: train_many(target, runs, quiet=True, compile=compiled), device)
    out["batched_runs"] = len(runs)
    out["batched_steps_per_second"] = round(settings.steps / seconds, 2)
    out["batched_aggregate_steps_per_second"] = round(len(runs) * settings.steps / seconds, 2)
    return out


def paper_sweep_section(sizes: Sizes, device: str, out: Path, ds: Sequence[int] = PAPER_DS) -> dict[str, Any]:
    """Each D a batched sweep of its nine runs at ``sizes.sweep_steps`` steps (a fresh folder
    OUT/paper_sweep/steps_N/intrinsic_D each)."""
    import shutil

    per_d, total_steps, total_seconds = [], 0, 0.0
    settings = replace(sizes.settings, device=device)
    folder = out / "paper_sweep" / f"steps_{sizes.sweep_steps}"
    shutil.rmtree(folder, ignore_errors=True)  # a rerun measures again rather than resuming
    for d in ds:
        path = ROOT / "compiled_examples" / f"intrinsic_{d}.iflow"
        heads = ((d, d), (d - 1, d), (d, d - 1))
        grid = sweep.Grid(heads, (None,), (sizes.sweep_length,), (settings.d_model,), (sizes.sweep_steps,),
                          PAPER_SEEDS, settings)
        runs = sweep.expand(grid, path.name, path.read_text(encoding="utf-8"))
        seconds, rows = timed(lambda runs=runs, d=d: sweep.execute(runs, folder / f"intrinsic_{d}", workers=1),
                              device)
        steps = len(runs) * sizes.sweep_steps
        total_steps, total_seconds = total_steps + steps, total_seconds + seconds
        per_d.append({"D": d, "runs": len(runs), "rows": len(rows), "seconds": round(seconds, 2),
                      "aggregate_steps_per_second": round(steps / seconds, 1),
                      "best_nmse": {",".join(map(str, h)): min(float(r["best_nmse"]) for r in rows
                                                                if r["heads"] == ",".join(map(str, h)))
                                    for h in heads}})
    rate = total_steps / total_seconds
    full = len(PAPER_DS) * 3 * PAPER_SEEDS * PAPER_STEPS
    return {"T": sizes.sweep_length, "steps_per_run": sizes.sweep_steps, "per_D": per_d,
            "aggregate_steps_per_second": round(rate, 1),
            "full_sweep_run_steps": full, "full_sweep_minutes_at_this_rate": round(full / rate / 60, 1),
            "note": "wall time includes start-up, validation (20 points a run), the declared-domain NMSE and writes"}


def time_boxed_paper_sweep(sizes: Sizes, device: str, out: Path, minutes: float) -> dict[str, Any]:
    """The paper-scale sweep in ``minutes``: a 200-step pilot of D = 2 measures the aggregate
    rate, then every D runs at the steps that fit (at most the paper's 40,000, a multiple of 100)."""
    pilot = paper_sweep_section(replace(sizes, sweep_steps=200 if sizes is FULL else 2), device, out, ds=(2,))
    rate = pilot["aggregate_steps_per_second"]
    fitting = 0.8 * minutes * 60 * rate / (len(PAPER_DS) * 3 * PAPER_SEEDS)
    steps = max(100, min(PAPER_STEPS, int(fitting // 100) * 100)) if sizes is FULL else 3
    return {"pilot": pilot, "minutes": minutes, **paper_sweep_section(replace(sizes, sweep_steps=steps), device, out)}


def test_counts(junit: Path) -> dict[str, Any]:
    """Tests, failures, errors and skips of a JUnit file (pytest's --junitxml)."""
    if not junit.exists():
        return {"file": str(junit), "found": False}
    root = ElementTree.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    failed = [f"{case.get('classname')}::{case.get('name')}" for s in suites for case in s.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    return {**counts, "failed": failed[:50]}


# ---------------------------------------------------------------------------- the run


#: (name, estimated seconds on the GPU at full size): a section starts only when the budget leaves it
#: in the order they run: the training figures first (what the issue's goal is about), torch.compile's last
ESTIMATES = {"training": 40, "paper_sweep": 60, "forward": 30, "compile": 20, "check": 30, "ground_truth": 40,
             "training_compiled": 90}


def run_sections(sizes: Sizes, device: str, out: Path, budget: float,
                 names: Sequence[str] = tuple(ESTIMATES)) -> dict[str, Any]:
    """Every section the budget has room for, each on its own (an error is recorded)."""
    calls: dict[str, Callable[[], dict[str, Any]]] = {
        "compile": lambda: compile_section(sizes, device), "check": lambda: check_section(sizes, device),
        "forward": lambda: forward_section(sizes, device), "training": lambda: training_section(sizes, device),
        "paper_sweep": lambda: paper_sweep_section(sizes, device, out),
        "ground_truth": lambda: ground_truth_section(sizes, device),
        "training_compiled": lambda: training_section(sizes, device, compiled=True)}
    start = time.monotonic()
    results: dict[str, Any] = {}
    for name in names:
        left = budget - (time.monotonic() - start)
        if sizes is FULL and left < ESTIMATES[name]:
            results[name] = {"skipped": f"{left:.0f} s of the budget left, the section needs about {ESTIMATES[name]}"}
            continue
        began = time.monotonic()
        try:
            results[name] = calls[name]()
        except Exception as error:  # a section's failure is a figure too; the others still run
            results[name] = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()[-2000:]}
        results[name]["section_seconds"] = round(time.monotonic() - began, 2)
    return results


def device_description(device: str) -> dict[str, Any]:
    described: dict[str, Any] = {"device": device, "torch": torch.__version__}
    if device.startswith("cuda"):
        described |= {"name": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
                      "memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)}
    return described


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_out"))
    parser.add_argument("--budget", type=float, default=240.0, help="seconds for the sections (240)")
    parser.add_argument("--small", action="store_true", help="toy sizes (a run end to end on the CPU)")
    parser.add_argument("--tests", type=Path, help="the JUnit file of the device's test run")
    parser.add_argument("--sections", help=f"comma-separated, of {','.join(ESTIMATES)} (default all; with --small "
                                           "all but training_compiled)")
    parser.add_argument("--paper-minutes", type=float, metavar="M",
                        help="instead of the sections: the paper-scale sweep (D = 2..6, three configurations, three "
                             "seeds, T = 64) at the steps that fit M minutes (at most 40,000)")
    arguments = parser.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)
    arguments.out.mkdir(parents=True, exist_ok=True)
    every = tuple(name for name in ESTIMATES if not (arguments.small and name == "training_compiled"))
    names = tuple(arguments.sections.split(",")) if arguments.sections else every
    sizes = SMALL if arguments.small else FULL
    started = time.monotonic()
    figures: dict[str, Any] = {"measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               **device_description(device), "small": arguments.small}
    if arguments.tests is not None:
        figures["tests"] = test_counts(arguments.tests)
    if arguments.paper_minutes is not None:
        figures["paper_sweep_time_boxed"] = time_boxed_paper_sweep(sizes, device, arguments.out,
                                                                   arguments.paper_minutes)
    else:
        figures |= run_sections(sizes, device, arguments.out, arguments.budget, names)
    figures["seconds"] = round(time.monotonic() - started, 1)
    text = json.dumps(figures, indent=1, default=lambda v: None if isinstance(v, float) and math.isnan(v) else str(v))
    (arguments.out / "gpu_check.json").write_text(text + "\n", encoding="utf-8")
    print(text)
    return figures


if __name__ == "__main__":
    main()
