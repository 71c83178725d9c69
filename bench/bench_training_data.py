"""Benchmark: drawing a training batch and its exact targets, on the host and on the training device.

    python bench/bench_training_data.py          # writes its section of BENCHMARKS.md

Per case (a target, T, the sweep's model) and device: the time of a batch of 256 inputs from
N(0, I) and their targets by the reference evaluator (float64), drawn on the host then moved to
the device (the host path) or drawn and evaluated on the device (``train``'s path), and the time
of one training step of the model (forward, backward, AdamW) on that device. Best of REPEATS
after a warm-up; the table gives ratios: the data's share of a step, and host path / device path.
On the CPU the two paths are the same computation (ratio ≈ 1); on a GPU the second keeps the
batch off the host.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from report import measured_on, smoke_or_section

import infoflow_dsl as ifl
from infoflow_dsl.training.train import Distribution, TrainSettings, build_model, draw_inputs, squared_error

ROOT = Path(__file__).resolve().parent.parent
REPEATS = 20
BATCH = 256


@dataclass(frozen=True)
class Case:
    """A target at length T and the model a sweep trains on it."""

    program: str
    length: int
    heads: tuple[int, ...]
    d_mlp: int


CASES = (Case("intrinsic_2", 16, (2, 2), 512), Case("intrinsic_2", 64, (2, 2), 256), Case("d_retrieval", 32, (4,), 32))
SMOKE = (Case("d_retrieval", 4, (1,), 8),)


def best_seconds(work: Callable[[], object], device: str, repeats: int) -> float:
    """The best wall time of ``work`` over ``repeats`` calls after one warm-up call."""
    best = float("inf")
    for round_ in range(repeats + 1):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        work()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if round_ > 0:
            best = min(best, time.perf_counter() - start)
    return best


@dataclass(frozen=True)
class Timing:
    host: float  # draw + evaluate on the host, then move to the device
    device: float  # draw + evaluate on the device
    step: float  # one training step on the device


def measure_case(case: Case, device: str, repeats: int, batch: int = BATCH) -> Timing:
    program = ifl.load_program(ROOT / "compiled_examples" / f"{case.program}.iflow", length=case.length)
    dist = Distribution("normal", 1.0)

    def host() -> object:
        x = draw_inputs(program, dist, batch, seed=1)
        return x.to(device), ifl.evaluate(program, x).to(device)

    def on_device() -> object:
        x = draw_inputs(program, dist, batch, seed=1, device=device)
        return x, ifl.evaluate(program, x)

    settings = TrainSettings(heads=case.heads, d_model=32, d_head=8, d_mlp=case.d_mlp, steps=1, device=device)
    model, trainable = build_model(program, settings)
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    x, y = on_device()

    def step() -> object:
        loss, _ = squared_error(model(x.float()), y.float())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return Timing(best_seconds(host, device, repeats), best_seconds(on_device, device, repeats),
                  best_seconds(step, device, repeats))


def render(results: Sequence[tuple[Case, str, Timing]], repeats: int) -> str:
    lines = [f"*{measured_on()}; best of {repeats} after a warm-up.* A batch of {BATCH} inputs from N(0, I) and their "
             "targets (reference evaluator, float64): on the host then moved (host path) or on the device "
             "(`train`'s path), against one training step (forward, backward, AdamW) on the device.", "",
             "| target | T | heads | d_mlp | device | data / step, host path | data / step, device path | "
             "host / device path |", "|---|---|---|---|---|---|---|---|"]
    for case, device, t in results:
        lines.append(f"| {case.program} | {case.length} | {','.join(map(str, case.heads))} | {case.d_mlp} | {device} | "
                     f"{t.host / t.step:.3f} | {t.device / t.step:.3f} | {t.host / t.device:.2f} |")
    if not any(device.startswith("cuda") for _, device, _ in results):
        lines += ["", "No GPU on this machine: on the CPU the two paths are one computation; run this script on a "
                  "GPU machine for the device rows."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> str:
    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]

    def measure(smoke: bool) -> str:
        repeats = 2 if smoke else REPEATS
        return render([(case, device, measure_case(case, device, repeats)) for case in (SMOKE if smoke else CASES)
                       for device in devices], repeats)

    return smoke_or_section(argv, "Training data on the device (bench/bench_training_data.py)", measure)


if __name__ == "__main__":
    main()
