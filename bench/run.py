"""Benchmark: speed and size at scale, the tables a user reads before adopting infoflow.

    python bench/run.py                  # (or python -m bench) writes its section of BENCHMARKS.md
    python bench/run.py --device cuda    # forward figures on the GPU as well, when there is one

Tables, each measured once in one run (times are noisy on a shared machine; ratios carry over):

1. compile latency per canonical example: the compiler core (``ifl.compile``, no measurement)
   and the whole CLI call (``infoflowc compile FILE`` with default flags, a fresh process);
2. the CLI compile of min_pairwise at T = 64 and T = 4096 (float32, ε = 1e-3, default flags);
3. nonzero parameters against ε (float64) with the fitted exponent of 1/ε (InfoFlow: O(ε⁻¹));
4. parameters against T;
5. the compiled forward against a plain PyTorch transformer of the same shape (bench/plain.py);
6. the reference evaluator against plain numpy (x @ x.T, then a min) on min_pairwise;
7. peak memory (RSS) of ``infoflowc check`` of a T = 4096 model, and of compiles at growing d;
and ``bench/scaling.png``: parameters against ε and against T.

``measure(SIZES)`` builds the report; the smoke test runs it at toy sizes (``SMOKE``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
EXAMPLES = ROOT / "compiled_examples"
sys.path.insert(0, str(BENCH))

from plain import plain_like  # noqa: E402
from report import write_section  # noqa: E402

import infoflow_dsl as ifl  # noqa: E402
from infoflow_dsl.oracle.evaluate import at_length  # noqa: E402
from infoflow_dsl.transformer.sparse import nonzero_entries  # noqa: E402

TITLE = "Speed at scale (bench/run.py)"


@dataclass(frozen=True)
class Sizes:
    """What to measure: the full benchmark or a toy run for the smoke test."""

    examples: tuple[str, ...]  # canonical examples for the compile-latency table
    cli_samples: int | None  # --samples for the CLI calls (None: the default budget)
    scale_lengths: tuple[int, int]  # T of the compile-latency ratio (acceptance: ≤ 4×)
    eps_programs: tuple[str, ...]
    eps_values: tuple[float, ...]
    lengths: tuple[int, ...]  # parameters against T
    forward_lengths: tuple[int, ...]
    forward_numbers: int  # B × T per forward batch
    reference_lengths: tuple[int, ...]
    reference_batch: int
    check_length: int
    check_samples: int | None  # None: check's default
    widths: tuple[int, ...]  # d of min_pairwise at T = 128, ε = 1e-2 (file size, compile memory)
    width_length: int
    repeats: int  # timed CLI compiles at long T: best of this many
    scale_runs: int = 3  # the long-T table's settings timed: every core, one thread, --samples 0 (smoke: the first)


FULL = Sizes(
    examples=("d_retrieval", "first_three", "intrinsic_2", "intrinsic_3", "intrinsic_4", "intrinsic_5", "intrinsic_6",
              "kth_largest", "min_pairwise", "nearest_neighbour"),
    cli_samples=None, scale_lengths=(64, 4096),
    eps_programs=("min_pairwise", "intrinsic_3", "d_retrieval"), eps_values=(1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6),
    lengths=(8, 64, 512, 4096), forward_lengths=(64, 1024, 4096), forward_numbers=1 << 14,
    reference_lengths=(1024, 4096), reference_batch=8, check_length=4096, check_samples=None,
    widths=(16, 64, 256), width_length=128, repeats=3,
)
SMOKE = Sizes(
    examples=("first_three",), cli_samples=8, scale_lengths=(4, 8), eps_programs=("min_pairwise",),
    eps_values=(1e-1, 1e-2), lengths=(4, 8), forward_lengths=(8,), forward_numbers=64, reference_lengths=(8,),
    reference_batch=2, check_length=8, check_samples=8, widths=(2,), width_length=4, repeats=1, scale_runs=1,
)


# ----------------------------------------------------------------------------- helpers


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} logical cores (shared with other jobs), Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def program(name: str, length: int | None = None, source: str | None = None) -> ifl.Program:
    target = ifl.parse_program(source, f"{name}.iflow") if source else ifl.load_program(EXAMPLES / f"{name}.iflow")
    return target if length is None else at_length(target, length)


def seconds(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def child_env(threads: int | None = 1) -> dict[str, str]:
    """The environment of a timed child process: one OpenMP thread, or (None) what a user's shell
    gives (torch then takes every core)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    return env if threads is None else {**env, "OMP_NUM_THREADS": str(threads)}


def peak_of(argv: list[str], threads: int | None = 1) -> tuple[float, float, int]:
    """Run ``argv`` in a fresh process (``threads`` OpenMP threads, None: the default): (wall
    seconds, peak RSS in MB, exit code)."""
    wrapper = ("import resource, subprocess, sys, time; start = time.perf_counter(); "
               "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
               "wall = time.perf_counter() - start; "
               "print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, code)")
    out = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, check=True,
                         env=child_env(threads), cwd=ROOT)
    wall, peak, code = out.stdout.split()
    return float(wall), float(peak), int(code)


def cli(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "infoflow_dsl.cli.main", *arguments]


def samples_flag(sizes: Sizes) -> list[str]:
    return [] if sizes.cli_samples is None else ["--samples", str(sizes.cli_samples)]


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


def fitted_exponent(eps: list[float], counts: list[int]) -> float:
    """The slope k of log(count) against log(1/ε): count ∝ ε^-k (least squares)."""
    if len(eps) < 2:
        return float("nan")
    return float(np.polyfit(np.log(1 / np.asarray(eps)), np.log(np.asarray(counts, dtype=float)), 1)[0])


# ----------------------------------------------------------------------------- tables


def compile_latency(sizes: Sizes, folder: Path) -> str:
    rows = []
    for name in sizes.examples:
        core = seconds(lambda name=name: ifl.compile(program(name), eps=1e-3, device="cpu", samples=0))
        wall, _, code = peak_of(cli("compile", str(EXAMPLES / f"{name}.iflow"), "--device", "cpu",
                                    *samples_flag(sizes), "-o", str(folder / f"{name}.safetensors")))
        rows.append([name, f"{core:.3f}", f"{wall:.1f}" if code == 0 else f"exit {code}"])
    return ("Compile latency, ε = 1e-3, float32: the compiler core (`ifl.compile(..., samples=0)`, in process) and "
            "the whole CLI call (`infoflowc compile FILE --device cpu`, default flags: the measurement fits its "
            "budget; a fresh process, start-up included).\n\n"
            + table(["example", "core (s)", "CLI (s)"], rows))


def compile_at_scale(sizes: Sizes, folder: Path) -> str:
    """The CLI compile at the two lengths, as a user runs it (every core) and on one thread, best
    of ``sizes.repeats`` each; and with ``--samples 0`` (start-up and compiler core alone)."""
    rows, ratios = [], {}
    runs = [(None, f"default (every core: {os.cpu_count()})", samples_flag(sizes)), (1, "1", samples_flag(sizes)),
            (None, f"default (every core: {os.cpu_count()}), `--samples 0`", ["--samples", "0"])]
    for threads, shown, flags in runs[:sizes.scale_runs]:
        walls = []
        for length in sizes.scale_lengths:
            out = folder / f"min_pairwise_{length}.safetensors"
            argv = cli("compile", str(EXAMPLES / "min_pairwise.iflow"), "--T", str(length), "--device", "cpu", *flags,
                       "-o", str(out))
            wall, peak, code = min(peak_of(argv, threads) for _ in range(sizes.repeats))
            measured = ifl.load(out).config["measured_error"] if code == 0 else {"samples": f"exit {code}",
                                                                                  "max_error": math.nan}
            walls.append(wall)
            counted = "—" if measured is None else str(measured["samples"])
            error = "—" if measured is None else f"{measured['max_error']:.3g}"
            rows.append([shown, str(length), f"{wall:.1f}", f"{peak:.0f}", counted, error])
        ratios[shown] = walls[1] / walls[0]
    short, long = sizes.scale_lengths
    shown_ratios = "; ".join(f"{threads} thread(s): **{ratio:.2f}×**" for threads, ratio in list(ratios.items())[:2])
    return (f"`infoflowc compile min_pairwise.iflow --T N --device cpu` (float32, ε = 1e-3, default flags), a fresh "
            f"process each, best of {sizes.repeats}, with the threads a user's shell gives torch (every core) and "
            f"with one. Ratio T = {long} / T = {short}: {shown_ratios}. The `--samples 0` rows are the start-up "
            "(imports) and compiler core both lengths share; the rest is the measurement: at T = 64 the budget (a few "
            "seconds of work) buys its cap of 10,000 random inputs, at T = 4096 its floor (256 random inputs and 256 "
            "corners) is what is left. A random input costs one T × T fused attention pattern per full layer and "
            "the upper triangle of one T × T reference product; a corner repeats 2^d = 16 tokens, so its attention "
            "runs over the 16 distinct keys and its reference min over the 16 distinct tokens "
            "(infoflow_dsl/repeated_rows.py).\n\n"
            + table(["threads", "T", "wall (s)", "peak RSS (MB)", "random inputs measured", "measured error"], rows))


def parameters_against_eps(sizes: Sizes) -> tuple[str, dict[str, tuple[list[float], list[int]]]]:
    rows, series = [], {}
    for name in sizes.eps_programs:
        done_eps, counts, cells = [], [], []
        for eps in sizes.eps_values:
            try:
                model = ifl.compile(program(name), eps=eps, dtype="float64", device="cpu", samples=0)
            except ifl.CompileError as error:
                cells.append(f"refused ({str(error).split(':')[0]})")
                continue
            done_eps.append(eps)
            counts.append(model.nonzero_parameter_count())
            cells.append(f"{counts[-1]:,}")
            del model
        series[name] = (done_eps, counts)
        rows.append([name, *cells, f"{fitted_exponent(done_eps, counts):.2f}"])
    header = ["program", *(f"ε = {eps:g}" for eps in sizes.eps_values), "fitted k (∝ ε^-k)"]
    return ("Nonzero parameters against ε (float64, the program's own T), and the exponent k of the least-squares "
            "fit count ∝ (1/ε)^k; InfoFlow's upper bound is O(ε^-1), k = 1.\n\n" + table(header, rows)), series


def parameters_against_length(sizes: Sizes) -> tuple[str, tuple[list[int], list[int]]]:
    rows, nonzero = [], []
    for length in sizes.lengths:
        model = ifl.compile(program("min_pairwise", length), eps=1e-3, device="cpu", samples=0)
        nonzero.append(model.nonzero_parameter_count())
        rows.append([str(length), f"{model.parameter_count():,}", f"{nonzero[-1]:,}", str(model.d_mlp)])
    return ("min_pairwise at ε = 1e-3, float32, against T (the positional code W_pos, T + 1 rows, not counted).\n\n"
            + table(["T", "parameters", "nonzero", "d_mlp per layer"], rows)), (list(sizes.lengths), nonzero)


def forward_against_plain(sizes: Sizes, devices: list[str]) -> str:
    rows = []
    for device in devices:
        for length in sizes.forward_lengths:
            model = ifl.compile(program("min_pairwise", length), eps=1e-3, device=device, samples=0)
            plain = plain_like(model).to(device)
            x = ifl.sample_inputs(program("min_pairwise", length), max(1, sizes.forward_numbers // length),
                                  seed=0).to(device, model.dtype)
            times = []
            with torch.no_grad():
                for function in (model, plain):
                    function(x)  # warm-up
                    times.append(min(_timed(function, x, device) for _ in range(3)))
            rows.append([device, str(length), str(x.shape[0]), f"{times[0] * 1e3:.1f}", f"{times[1] * 1e3:.1f}",
                         f"**{times[0] / times[1]:.2f}**"])
    return ("Forward of the compiled min_pairwise (ε = 1e-3, float32) against a plain PyTorch transformer of the same "
            "shape (bench/plain.py: same layers, heads, widths and FFN widths, dense, every row through every layer, "
            "fused `scaled_dot_product_attention`); one torch thread on the CPU, best of 3.\n\n"
            + table(["device", "T", "batch", "compiled (ms)", "plain (ms)", "compiled / plain"], rows))


def _timed(function: Callable[[torch.Tensor], object], x: torch.Tensor, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    function(x)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start


def reference_against_numpy(sizes: Sizes) -> str:
    rows = []
    for length in sizes.reference_lengths:
        target = program("min_pairwise", length)
        x = ifl.sample_inputs(target, sizes.reference_batch, seed=0)
        ours = seconds(lambda target=target, x=x: ifl.evaluate(target, x))
        arrays = x.numpy()
        plain = seconds(lambda arrays=arrays: [float((a @ a.T).min()) for a in arrays])
        rows.append([str(length), str(sizes.reference_batch), f"{ours:.3f}", f"{plain:.3f}", f"**{ours / plain:.2f}**"])
    return ("The reference evaluator (`ifl.evaluate`, float64, pair reductions by chunked matrix products: "
            "infoflow_dsl/fast_pairs.py: one reused chunk buffer, and a symmetric body's upper triangle only) "
            "against plain numpy (`(a @ a.T).min()` per input, which builds the whole T × T matrix) on min_pairwise; "
            "one thread, one run.\n\n"
            + table(["T", "inputs", "evaluate (s)", "numpy (s)", "evaluate / numpy"], rows))


def memory(sizes: Sizes, folder: Path) -> str:
    model_path = folder / "check_model.safetensors"
    ifl.save(ifl.compile(program("min_pairwise", sizes.check_length), eps=1e-3, device="cpu", samples=0), model_path)
    flags = [] if sizes.check_samples is None else ["--samples", str(sizes.check_samples)]
    wall, peak, code = peak_of(cli("check", str(model_path), *flags))
    shown = "default flags" if sizes.check_samples is None else f"`--samples {sizes.check_samples}`"
    check = table(["command", "peak RSS (MB)", "wall (s)", "exit"],
                  [[f"`infoflowc check`, min_pairwise T = {sizes.check_length} ({shown})", f"{peak:.0f}", f"{wall:.0f}",
                    str(code)]])
    rows = [[str(width), *width_row(width, sizes.width_length, folder)] for width in sizes.widths]
    widths = table(["d", "nonzero", "file (KB)", "values + int32 indices (KB)", "file / nonzero need",
                    "compile peak RSS (MB)", "compile wall (s)", "matrices held sparse",
                    "outputs = dense file's, bitwise"], rows)
    return ("Peak resident memory of a whole CLI call, a fresh process each (`ru_maxrss` of the child). The check "
            "evaluates its inputs in chunks (at T = 4096, the model 16 inputs at a time, the reference one), so its "
            "peak does not grow with --samples; the number of samples only sets the time.\n\n"
            f"{check}\n\nmin_pairwise (`min_<t1, t2> <x(t1), x(t2)>`) at growing d, T = {sizes.width_length}, "
            "ε = 1e-2, float32: `infoflowc compile --samples 0` (default layout: sparse), its file against what the "
            "nonzero weights need (4-byte values and 4-byte indices), and the compile's peak memory. ReLU matrices "
            "of a million entries or more, under 10% nonzero, are held sparse in memory from assemble on "
            "(`sparse.holds_sparse`); the last column loads the same model from its `--dense` file and compares 16 "
            "outputs bit for bit.\n\n" + widths)


def width_row(width: int, length: int, folder: Path) -> list[str]:
    """Compile min_pairwise at dimension ``width`` in a fresh process: the cells of its row."""
    path = folder / f"d{width}.iflow"
    path.write_text(f"input x : R^{width} in [-1, 1]\nlength T = {length}\ntarget min_<t1, t2> <x(t1), x(t2)>\n",
                    encoding="utf-8")
    out = folder / f"d{width}.safetensors"
    wall, peak, code = peak_of(cli("compile", str(path), "--eps", "1e-2", "--device", "cpu", "--samples", "0",
                                   "-o", str(out)))
    if code != 0:
        return [f"exit {code}", "", "", "", f"{peak:.0f}", f"{wall:.0f}", "", ""]
    model = ifl.load(out)
    nonzero = sum(nonzero_entries(t) for t in model.state_dict().values())
    need = nonzero * (model.dtype.itemsize + 4)
    size = out.stat().st_size
    dense_path = folder / f"d{width}_dense.safetensors"
    ifl.save(model, dense_path, dense=True)
    x = ifl.sample_inputs(ifl.load_program(path), 16, seed=0).to(model.dtype)
    with torch.no_grad():
        same = model(x).numpy().tobytes() == ifl.load(dense_path)(x).numpy().tobytes()
    dense_path.unlink()
    held = sum(t.is_sparse for t in model.state_dict().values())
    return [f"{nonzero:,}", f"{size / 1024:.0f}", f"{need / 1024:.0f}", f"{size / need:.2f}", f"{peak:.0f}",
            f"{wall:.0f}", str(held), "yes" if same else "**no**"]


def plot(eps_series: dict[str, tuple[list[float], list[int]]], length_series: tuple[list[int], list[int]],
         path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (left, right) = pyplot.subplots(1, 2, figsize=(10, 4))
    for name, (eps, counts) in eps_series.items():
        left.loglog([1 / e for e in eps], counts, "o-", label=name)
    left.set(xlabel="1/ε", ylabel="nonzero parameters", title="parameters against ε (float64)")
    left.legend()
    right.loglog(*length_series, "o-", label="min_pairwise, ε = 1e-3")
    right.set(xlabel="T", ylabel="nonzero parameters", title="parameters against T")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100, metadata={"Software": None})
    pyplot.close(figure)


# ----------------------------------------------------------------------------- the report


def measure(sizes: Sizes, devices: list[str], png: Path) -> str:
    """Every table, as the markdown body of the BENCHMARKS.md section."""
    torch.set_num_threads(1)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"Measured {stamp} on {machine()}; one run of `python bench/run.py`, each table once (a shared, "
              "noisy machine: the ratios, measured side by side, are what carry over). Figures under device `cuda` "
              "come from the GPU named there; all others from this CPU.")
    if "cuda" in devices:
        header += f" GPU: {torch.cuda.get_device_name()}."
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        eps_text, eps_series = parameters_against_eps(sizes)
        length_text, length_series = parameters_against_length(sizes)
        sections = [
            ("Compile latency", compile_latency(sizes, folder)),
            ("Compile at long T", compile_at_scale(sizes, folder)),
            ("Parameters against ε", eps_text),
            ("Parameters against T", length_text),
            ("Forward against a plain transformer", forward_against_plain(sizes, devices)),
            ("Reference evaluator against numpy", reference_against_numpy(sizes)),
            ("Peak memory", memory(sizes, folder)),
        ]
    plot(eps_series, length_series, png)
    where = f"*Measured {stamp}, CPU figures on {platform.machine()} ({os.cpu_count()} shared cores).*"
    body = "\n\n".join(f"### {title}\n\n{where} {text}" for title, text in sections)
    shown = png.relative_to(ROOT) if png.is_relative_to(ROOT) else png
    return f"{header}\n\n{body}\n\n![parameters against ε and T]({shown})\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="cuda: also time the forward on the GPU")
    parser.add_argument("--json", action="store_true", help="print the section instead of writing BENCHMARKS.md")
    arguments = parser.parse_args(argv)
    if arguments.device == "cuda" and not torch.cuda.is_available():
        print("bench: --device cuda was asked for, but no CUDA device is available", file=sys.stderr)
        return 2
    devices = ["cpu", "cuda"] if arguments.device == "cuda" else ["cpu"]
    body = measure(FULL, devices, BENCH / "scaling.png")
    if arguments.json:
        print(json.dumps(body))
    else:
        write_section(TITLE, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
