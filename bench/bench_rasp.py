"""Benchmark: RASP programs compiled as written (``ifl.from_rasp``), against RASP's evaluator.

    python bench/bench_rasp.py            # writes BENCHMARKS.md "RASP"
    python bench/bench_rasp.py --quick    # T = 5 only, the first programs (a smoke run)
    python bench/bench_rasp.py --field    # writes BENCHMARKS.md "RASP: the field's kinds" only
    python bench/bench_rasp.py --suite    # writes "RASP: the suite at N and 2N, default settings" only
    python bench/bench_rasp.py --rounding # writes "RASP: float32's bound against its rounding" only

1. Tracr's library (``infoflow_dsl.rasp.library``) at T = 10 and 40: the RASP program's model
   beside the hand translation of ``compiled_examples/tracr/`` (nonzero parameters and their
   ratio), and whether every output agrees with RASP's evaluator.
2. The suite of ``bench/rasp_suite.py`` (44 programs in 8 families) at max_seq_len = 6 and at
   2× and 4× it: exact or not, nonzero parameters, compile seconds.

3. ``--field``: the suite's FIELD (the kinds of programs the field's suites once failed on here),
   each at its N and 2N with the default settings, ``ifl.compile(ifl.from_rasp(p, vocab, N),
   eps=1e-3)``: the dtype compile chose, exact or not, nonzero parameters, seconds.

4. ``--suite``: the suite's programs as ``--field`` runs FIELD (N = 6 and 2N, default settings).

5. ``--rounding``: FIELD's numeric programs forced to float32 (ε = 1e3, so that the bound never
   refuses): the a-priori bound beside the largest error measured against RASP's evaluator.

"Exact": on every input of lengths 1..3 and SAMPLES random inputs of random lengths 1..T, every
output where RASP's evaluator defines one is right (a token the same token, a number within
ε = 1e-3), float64. A refusal is shown with its reason.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rasp_suite import FIELD, PROGRAMS
from report import write_section

import infoflow_dsl as ifl
from infoflow_dsl.errors import CompileError
from infoflow_dsl.rasp.agreement import agreement, every_input
from infoflow_dsl.rasp.library import TRACR_PROGRAMS

TRACR_DIR = Path(__file__).resolve().parent.parent / "compiled_examples" / "tracr"
TRACR_LENGTHS = (10, 40)
SUITE_LENGTH, SCALES = 6, (1, 2, 4)
SAMPLES, EPS = 300, 1e-3


@dataclass(frozen=True)
class Measured:
    parameters: int | None
    seconds: float
    exact: bool | None
    detail: str  # the refusal, or the first disagreement


def mixed_inputs(vocab: list[Any], longest: int, count: int, seed: int = 0) -> list[tuple[Any, ...]]:
    chooser = random.Random(seed)
    return [tuple(chooser.choice(vocab) for _ in range(chooser.randint(1, longest))) for _ in range(count)]


def measure(build: Any, vocab: tuple[Any, ...], length: int, dtype: str | None = "float64") -> Measured:
    program = build()
    start = time.perf_counter()
    try:
        checked = ifl.from_rasp(program, vocab, length)
        model = ifl.compile(checked, eps=EPS, dtype=dtype, samples=0)
    except CompileError as refusal:
        return Measured(None, time.perf_counter() - start, None, str(refusal).splitlines()[0][:120])
    seconds = time.perf_counter() - start
    chosen = str(model.config["dtype"]) if dtype is None else ""  # the default: the dtype compile chose
    words = list(vocab)
    inputs = [*every_input(words, min(3, length)), *mixed_inputs(words, length, SAMPLES)]
    found = agreement(program, model, checked, inputs)
    detail = chosen if found.exact(EPS) else f"first wrong: {found.first_wrong}"
    return Measured(model.nonzero_parameter_count(), seconds, found.exact(EPS), detail)


def hand_parameters(name: str, length: int) -> int:
    program = ifl.load_program(TRACR_DIR / f"{name}.iflow", length=length)
    return ifl.compile(program, eps=EPS, dtype="float64", samples=0).nonzero_parameter_count()


def _exact(row: Measured) -> str:
    return "refused: " + row.detail.replace("|", "\\|") if row.exact is None else ("yes" if row.exact else "NO")


def tracr_table(lengths: tuple[int, ...]) -> str:
    lines = ["| program | T | parameters, RASP | parameters, hand | ratio | exact vs RASP's evaluator |",
             "|---|---|---|---|---|---|"]
    for entry in TRACR_PROGRAMS:
        for length in lengths:
            row = measure(lambda e=entry, n=length: e.build(n), entry.vocab, length)
            hand = hand_parameters(entry.name, length)
            ratio = f"{row.parameters / hand:.2f}" if row.parameters else "–"
            lines.append(f"| {entry.name} | {length} | {row.parameters or '–':,} | {hand:,} | {ratio} | "
                         f"{_exact(row)} |" if row.parameters else
                         f"| {entry.name} | {length} | – | {hand:,} | – | {_exact(row)} |")
    return "\n".join(lines)


def suite_table(scales: tuple[int, ...], programs: list[Any]) -> tuple[str, int, int]:
    header = " | ".join(f"T = {SUITE_LENGTH * s}: exact, parameters, seconds" for s in scales)
    lines = [f"| program | family | {header} |", "|---|---|" + "---|" * len(scales)]
    exact = total = 0
    for entry in programs:
        cells = []
        for scale in scales:
            row = measure(entry.build, entry.vocab, SUITE_LENGTH * scale)
            total += 1
            exact += bool(row.exact)
            cells.append(f"{_exact(row)}, {row.parameters or '–'}, {row.seconds:.2f}")
        lines.append(f"| {entry.name} | {entry.family} | {' | '.join(cells)} |")
    return "\n".join(lines), exact, total


def field_table(programs: list[Any] = FIELD) -> tuple[str, int, int]:
    """``programs`` (FIELD, or the suite) at N and 2N with the default settings: the dtype compile
    chose, exact, parameters."""
    lines = ["| program | kind | N | at N: exact, dtype, nonzero, seconds | at 2N: exact, dtype, nonzero, seconds |",
             "|---|---|---|---|---|"]
    exact = total = 0
    for entry in programs:
        cells = []
        for length in (entry.length, 2 * entry.length):
            row = measure(entry.build, entry.vocab, length, dtype=None)
            total += 1
            exact += bool(row.exact)
            dtype = row.detail if row.exact else "–"
            cells.append(f"{_exact(row)}, {dtype}, {row.parameters or '–'}, {row.seconds:.2f}")
        lines.append(f"| {entry.name} | {entry.family} | {entry.length} | {' | '.join(cells)} |")
        print(lines[-1], flush=True)
    return "\n".join(lines), exact, total


def rounding_table() -> str:
    """float32's a-priori bound beside the error it actually makes, on FIELD's numeric programs."""
    lines = ["| program | N | float32 bound | float32 measured | bound / measured | float64 measured |",
             "|---|---|---|---|---|---|"]
    for entry in FIELD:
        if entry.family not in ("float32", "numeric error"):
            continue
        program, words = entry.build(), list(entry.vocab)
        checked = ifl.from_rasp(program, entry.vocab, entry.length)
        inputs = [*every_input(words, min(3, entry.length)), *mixed_inputs(words, entry.length, SAMPLES)]
        cells = []
        for dtype in ("float32", "float64"):
            try:
                model = ifl.compile(checked, eps=1e3, dtype=dtype, samples=0)
            except CompileError as refusal:
                cells.append((None, str(refusal).splitlines()[0][:60]))
                continue
            cells.append((model.config["a_priori_bound"], agreement(program, model, checked, inputs).worst_error))
        (bound, measured), (_, measured64) = cells
        ratio = f"{bound / measured:,.0f}" if bound is not None and isinstance(measured, float) and measured else "–"
        lines.append(f"| {entry.name} | {entry.length} | {bound if bound is None else f'{bound:.3g}'} | "
                     f"{measured if isinstance(measured, str) else f'{measured:.3g}'} | {ratio} | {measured64:.3g} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    if "--rounding" in argv:
        write_section("RASP: float32's bound against its rounding (bench/bench_rasp.py --rounding)",
                      f"FIELD's numeric programs compiled in float32 at ε = 1e3 (so that the bound never refuses) "
                      f"and in float64: the a-priori bound (its rounding estimate included) beside the largest "
                      f"error measured against RASP's evaluator on every input of length ≤ 3 and {SAMPLES} random "
                      f"inputs. The bound is a worst case over every rounding of every unit; where it is above "
                      f"ε = 1e-3, compile's default is float64.\n\n{rounding_table()}")
        return
    if "--field" in argv:
        table, exact, total = field_table()
        write_section("RASP: the field's kinds (bench/bench_rasp.py --field)",
                      f"`bench/rasp_suite.py` FIELD: {len(FIELD)} programs of the kinds the field's suites once "
                      f"failed on here (Tracr's module-level names, values past float32's reach, None, tables of "
                      f"means, large tables), each this suite's own, compiled with the default settings "
                      f"(`ifl.compile(ifl.from_rasp(p, vocab, N), eps={EPS})`, the dtype compile's choice) at N and "
                      f"2N; exact = every output RASP's evaluator defines is right on every input of length ≤ 3 and "
                      f"{SAMPLES} random inputs of random lengths 1..T. {exact} of {total} (program, T) exact.\n\n"
                      f"{table}")
        return
    if "--suite" in argv:
        table, exact, total = field_table(PROGRAMS)
        write_section("RASP: the suite at N and 2N, default settings (bench/bench_rasp.py --suite)",
                      f"`bench/rasp_suite.py`'s {len(PROGRAMS)} programs compiled with the default settings "
                      f"(`ifl.compile(ifl.from_rasp(p, vocab, N), eps={EPS})`, the dtype compile's choice) at N = "
                      f"{SUITE_LENGTH} and 2N; exact as in \"RASP: the field's kinds\". {exact} of {total} "
                      f"(program, T) exact.\n\n{table}")
        return
    quick = "--quick" in argv
    tracr = tracr_table((5,) if quick else TRACR_LENGTHS)
    suite, exact, total = suite_table((1,) if quick else SCALES, PROGRAMS[:6] if quick else PROGRAMS)
    body = (f"Tracr's library written in RASP (`infoflow_dsl/rasp/library.py`) and compiled with `ifl.from_rasp`, "
            f"beside the hand translations of `compiled_examples/tracr/` (nonzero parameters, float64, ε = {EPS}); "
            f"exact = every output RASP's evaluator defines is right on every input of length ≤ 3 and {SAMPLES} "
            f"random inputs of random lengths 1..T.\n\n{tracr}\n\n"
            f"The suite of `bench/rasp_suite.py` ({len(PROGRAMS)} programs): {exact} of {total} (program, T) "
            f"exact.\n\n{suite}\n\nTracr itself, run beside infoflow on Tracr's own objects, is in the section "
            f"\"Tracr beside infoflow\" (`bench/tracr_beside.py`).")
    if quick:
        print(body)
        return
    write_section("RASP (bench/bench_rasp.py)", body)


if __name__ == "__main__":
    main(sys.argv[1:])
