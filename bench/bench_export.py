"""Benchmark: every shipped example exported to a Hugging Face GPT-2, measured in one run.

    python bench/bench_export.py            # writes its section of BENCHMARKS.md
    python bench/bench_export.py active     # the active LayerNorm's section
    python bench/bench_export.py targets    # tl-native, hf-llama and the self-contained GPT-2

For each example: ``ifl.export`` in float64 and in float32, each read back with
``AutoModelForCausalLM``; on SAMPLES random inputs and the 256 corners, the largest
|export − model(x)| (float64), the largest error against the reference over the inputs the
guarantee covers, and the float32 export's distance from the float64 model against the float32
model's own; times are wall seconds (export, forward of all inputs). ``targets``: the same
models exported to tl-native and hf-llama and as a self-contained GPT-2, float64, on
TARGET_SAMPLES inputs: each one's largest |export − model(x)| and error, Llama's against the
float32 model's own distance (its RMSNorm computes in float32), the penalty P and score bound S.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from report import write_section

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from exported import SHIPPED, largest_error, largest_gap, shipped

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import errors_on, model_inputs
from infoflow_dsl.pipeline.reading import program_of

SAMPLES = 2000
TARGET_SAMPLES = 500
ACTIVE = ["min_pairwise", "induction", "d_retrieval", "intrinsic_3"]
ACTIVE_SAMPLES = 10_000


def measure(name: str, samples: int, folder: Path) -> str:
    model64, model32 = shipped(name), shipped(name, torch.float32)
    start = time.perf_counter()
    ifl.export(model64, folder / f"{name}64")
    exported_in = time.perf_counter() - start
    ifl.export(model32, folder / f"{name}32")
    e64, e32 = ifl.load_exported(folder / f"{name}64"), ifl.load_exported(folder / f"{name}32")
    x = model_inputs(program_of(model64), samples, seed=5)
    with torch.no_grad():
        start = time.perf_counter()
        y64 = e64(x)
        forward = time.perf_counter() - start
        y32, own32, m64 = e32(x).double(), model32(x.float()).double(), model64(x)
    gap, error = largest_gap(y64, m64), largest_error(e64, model64, x)
    ratio = largest_gap(y32, m64) / max(largest_gap(own32, m64), 1e-300)
    config = e64.hf.config
    return (f"| {name} | {config.n_layer} × {config.n_head} × {config.n_embd // config.n_head}, {config.n_inner} | "
            f"{gap:.1e} | {error:.2e} | {model64.config['eps']:g} | {ratio:.2f} | {exported_in:.2f} | {forward:.1f} |")


def measured_rows(measure_row: Callable[[Any, Path], str], items: Iterable[Any]) -> list[str]:
    """One table row per item, each measured in a shared temporary folder and printed as it comes."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for item in items:
            rows.append(measure_row(item, Path(folder)))
            print(rows[-1], flush=True)
    return rows


def main(samples: int = SAMPLES) -> None:
    rows = measured_rows(lambda name, folder: measure(name, samples, folder), SHIPPED)
    body = (f"{samples} random inputs and 256 corners per example; float64 unless said. Layers × heads × head_dim, "
            "n_inner of the GPT-2; float32 ratio: |export32 − model64| / |model32 − model64|.\n\n"
            "| example | GPT-2 | max \\|export − model\\| | max error | ε | float32 ratio | export s | forward s |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
    write_section("Export to Hugging Face GPT-2 (bench/bench_export.py)", body)


def active_error(model, target, x, directory: Path, constant: float | None) -> tuple[dict, float]:
    """(the export's LayerNorm record, its largest error on x) with the active LayerNorm at ``constant``."""
    ifl.export(model, directory, layernorm="active", ln_constant=constant)
    info = json.loads((directory / "infoflow.json").read_text())
    error, kept = errors_on(ifl.load_exported(directory), target, x)
    return info["layernorm"], float(error[kept].max())


def measure_active(name: str, dtype: torch.dtype, samples: int, folder: Path) -> str:
    """One row: the active LayerNorm's C, K and share, the error on ``samples`` inputs and at C/10."""
    model = shipped(name, dtype)
    target = program_of(model)
    x = model_inputs(target, samples, seed=31)
    tag = f"{name}-{str(dtype).removeprefix('torch.')}"
    ln, error = active_error(model, target, x, folder / f"{tag}-chosen", None)
    _, weak = active_error(model, target, x, folder / f"{tag}-tenth", ln["constant"] / 10)
    return (f"| {name} | {str(dtype).removeprefix('torch.')} | {ln['constant']:.4g} | {ln['K']:.4g} | "
            f"{ln['share']:.3g} | {model.config['eps']:g} | {error:.3g} | {weak:.3g} |")


def main_active(samples: int = ACTIVE_SAMPLES) -> None:
    rows = measured_rows(lambda item, folder: measure_active(*item, samples, folder),
                         [(name, dtype) for name in ACTIVE for dtype in (torch.float64, torch.float32)])
    body = (f"`--layernorm active` (ε_LN = 1e-5, gain 1): {samples} random inputs and 256 corners; C chosen so that "
            "4·K/C² is the share of ε the compiled bound leaves, K measured at first order.\n\n"
            "| example | dtype | C | K | share | ε | max error | max error at C/10 |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
    write_section("Export with the active LayerNorm (bench/bench_export.py active)", body)


def measure_targets(name: str, samples: int, folder: Path) -> str:
    """One row: tl-native, hf-llama and the self-contained GPT-2 of one example, float64."""
    model64, model32 = shipped(name), shipped(name, torch.float32)
    x = model_inputs(program_of(model64), samples, seed=5)
    with torch.no_grad():
        m64, own32 = model64(x), model32(x.float()).double()
    cells = []
    for to in ("tl-native", "hf-llama"):
        ifl.export(model64, folder / f"{name}-{to}", to=to)
        exported = ifl.load_exported(folder / f"{name}-{to}")
        with torch.no_grad():
            gap = largest_gap(exported(x), m64)
        cells.append(f"{gap:.1e}")
        if to == "hf-llama":
            cells.append(f"{gap / max(largest_gap(own32, m64), 1e-300):.2f}")
        cells.append(f"{largest_error(exported, model64, x):.2e}")
    start = time.perf_counter()
    ifl.export(model64, folder / f"{name}-sc", self_contained=True)
    exported_in = time.perf_counter() - start
    info = json.loads((folder / f"{name}-sc" / "infoflow.json").read_text())
    penalty = info["self_contained"]
    exported = ifl.load_exported(folder / f"{name}-sc")
    with torch.no_grad():
        gap = largest_gap(exported(x), m64)
    cells += [f"{gap:.1e}", f"{largest_error(exported, model64, x):.2e}", f"{penalty['score_bound']:.3g}",
              f"2^{int(penalty['penalty']).bit_length() - 1}", str(penalty["is_causal"]).lower(),
              f"{info['layout']['n_head']} × {info['layout']['head_dim']}", f"{exported_in:.2f}"]
    return f"| {name} | " + " | ".join(cells) + " |"


def main_targets(samples: int = TARGET_SAMPLES) -> None:
    rows = measured_rows(lambda name, folder: measure_targets(name, samples, folder), SHIPPED)
    body = (f"{samples} random inputs and 256 corners per example, float64. gap: max \\|export − model(x)\\|; "
            "error: against the reference over the inputs the guarantee covers (ε = 0.01 for all); Llama ratio: its "
            "gap / \\|model32 − model64\\| (HF's RMSNorm computes in float32); self-contained: S the interval bound "
            "on the scores, P the penalty, is_causal as written in config.json, heads × head_dim with the "
            "penalty dimensions, export seconds.\n\n"
            "| example | tl-native gap | tl-native error | Llama gap | Llama ratio | Llama error | self-contained gap "
            "| self-contained error | S | P | is_causal | heads × head_dim | export s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows))
    write_section("Export to tl-native, hf-llama and a self-contained GPT-2 (bench/bench_export.py targets)", body)


if __name__ == "__main__":
    modes = {"active": main_active, "targets": main_targets}
    modes.get(sys.argv[1] if sys.argv[1:] else "", main)()
