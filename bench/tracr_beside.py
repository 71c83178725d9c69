"""Benchmark: Tracr itself beside infoflow, on Tracr's own RASP objects and against Tracr's own
evaluator.

Tracr is never a dependency of infoflow or of its tests: this script runs in an environment
where both are installed (``tracr-pypi`` is Tracr on PyPI, with JAX and Haiku)::

    python -m venv /tmp/tracrenv
    /tmp/tracrenv/bin/pip install tracr-pypi torch==2.13.0 && /tmp/tracrenv/bin/pip install -e .
    /tmp/tracrenv/bin/python bench/tracr_beside.py            # writes BENCHMARKS.md "Tracr beside infoflow"
    /tmp/tracrenv/bin/python bench/tracr_beside.py --quick    # T = 5 only, a few programs, printed
    /tmp/tracrenv/bin/python bench/tracr_beside.py --field    # the suite's FIELD at its N, default dtype

Two sets of programs, every one built with Tracr's classes (``tracr.rasp.rasp``):

1. Tracr's library as Tracr ships it (``tracr.compiler.lib``): the 14 programs of
   ``compiled_examples/tracr/``, with their vocabularies, at max_seq_len 5 (Tracr's tests) and 10.
2. The suite of ``bench/rasp_suite.py``, run with its one import changed to Tracr's
   (``from tracr.rasp import rasp``; its library calls go to ``tracr.compiler.lib``), at
   max_seq_len 6 and 12: programs the suite's author wrote for infoflow run on Tracr unchanged.

For each (program, T), two compilers of the same object:

- infoflow: ``ifl.from_rasp`` (duck-typed on Tracr's objects), compiled in float64, ε = 1e-3;
- Tracr: ``compile_rasp_to_model(program, vocab, T, compiler_bos="BOS")``, its defaults.

Both are compared with Tracr's evaluator ``rasp.evaluate`` on every input of length ≤ 3 (≤ 2
for vocabularies over 6 tokens) and SAMPLES random inputs of random lengths 1..T: exact = every
output the evaluator defines is right (a token the same token, a number within ε = 1e-3);
positions where the evaluator gives None or raises are skipped for both. Parameters: nonzero
weights, and every weight (Tracr's arrays, embeddings included; infoflow's as
``parameter_count`` plus its positional code ``pos_embed.W_pos``, which ``parameter_count``
leaves out as a fixed code but which holds compiled columns, as Tracr's ``pos_embed`` does),
each with Tracr's count over infoflow's. A
refusal (a CompileError of infoflow, any exception of Tracr's compiler) is shown with its reason.
"""

from __future__ import annotations

import re
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
import torch
from bench_rasp import EPS, SAMPLES, mixed_inputs
from report import write_section
from tracr.compiler import compiling
from tracr.compiler import lib as tracr_lib
from tracr.rasp import rasp as tracr_rasp

import infoflow_dsl as ifl
from infoflow_dsl.errors import CompileError
from infoflow_dsl.rasp.agreement import agreement, every_input
from infoflow_dsl.rasp.library import TRACR_PROGRAMS

LIBRARY_LENGTHS, SUITE_LENGTHS = (5, 10), (6, 12)
SUITE = Path(__file__).resolve().parent / "rasp_suite.py"

#: Tracr's library, built with Tracr's own functions: name → (max_seq_len → program). The
#: vocabularies are those of TRACR_PROGRAMS (the hand translations').
TRACR_LIBRARY: dict[str, Callable[[int], Any]] = {
    "count_a": lambda n: tracr_lib.make_count(tracr_rasp.tokens, "a"),
    "detect_pattern_abc": lambda n: tracr_lib.detect_pattern(tracr_rasp.tokens, "abc"),
    "frac_prevs": lambda n: tracr_lib.make_frac_prevs(tracr_rasp.tokens == "l"),
    "hist": lambda n: tracr_lib.make_hist(),
    "length": lambda n: tracr_lib.make_length(),
    "nary_add": lambda n: tracr_lib.make_nary_sequencemap(lambda x, y, z: x + y - z, tracr_rasp.tokens,
                                                          tracr_rasp.tokens, tracr_rasp.indices),
    "pair_balance": lambda n: tracr_lib.make_pair_balance(tracr_rasp.tokens, "(", ")"),
    "reverse": lambda n: tracr_lib.make_reverse(tracr_rasp.tokens),
    "shift_by_2": lambda n: tracr_lib.shift_by(2, tracr_rasp.tokens),
    "shuffle_dyck2": lambda n: tracr_lib.make_shuffle_dyck2(),
    "shuffle_dyck3": lambda n: tracr_lib.make_shuffle_dyck(["()", "[]", "{}"]),
    "sort": lambda n: tracr_lib.make_sort(tracr_rasp.tokens, tracr_rasp.tokens, max_seq_len=n, min_key=1),
    "sort_freq": lambda n: tracr_lib.make_sort_freq(n),
    "sort_unique": lambda n: tracr_lib.make_sort_unique(tracr_rasp.tokens, tracr_rasp.tokens),
}


@dataclass(frozen=True)
class Side:
    """One compiler's result on one (program, T)."""

    exact: bool | None        # None: refused
    parameters: int | None    # every weight
    nonzero: int | None
    seconds: float            # compile time
    detail: str               # the refusal, or the first disagreement


def suite_on_tracr(field: bool = False) -> list[Any]:
    """bench/rasp_suite.py's programs with its imports changed to Tracr's: the module's source,
    its two import lines replaced, executed as a module of its own."""
    source = SUITE.read_text(encoding="utf-8")
    source = source.replace("from infoflow_dsl import rasp\n", "from tracr.rasp import rasp\n")
    source = source.replace("from infoflow_dsl.rasp import library\n", "from tracr.compiler import lib as library\n")
    module = types.ModuleType("rasp_suite_on_tracr")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, "rasp_suite_on_tracr.py", "exec"), module.__dict__)  # the suite's code, Tracr's classes
    return list(module.FIELD if field else module.PROGRAMS)


def inputs_for(vocab: tuple[Any, ...], length: int) -> list[tuple[Any, ...]]:
    shortest_exhaustive = 2 if len(vocab) > 6 else 3
    return [*every_input(list(vocab), min(shortest_exhaustive, length)), *mixed_inputs(list(vocab), length, SAMPLES)]


def _first_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".splitlines()[0]
    return re.sub(r"\s+", " ", text)[:110].replace("|", "\\|")


def infoflow_side(program: Any, vocab: tuple[Any, ...], length: int, inputs: list[tuple[Any, ...]],
                  dtype: str | None = "float64") -> Side:
    start = time.perf_counter()
    try:
        checked = ifl.from_rasp(program, vocab, length)
        model = ifl.compile(checked, eps=EPS, dtype=dtype, samples=0)
    except CompileError as refusal:
        return Side(None, None, None, time.perf_counter() - start, _first_line(refusal))
    seconds = time.perf_counter() - start
    found = agreement(program, model, checked, inputs, evaluator=tracr_rasp.evaluate)
    detail = "" if found.exact(EPS) else f"first wrong: {found.first_wrong}"
    positional = model.state_dict()["pos_embed.W_pos"]  # (T+1, d_model): counted, as Tracr's pos_embed is
    return Side(found.exact(EPS), model.parameter_count() + positional.numel(),
                model.nonzero_parameter_count() + int(torch.count_nonzero(positional)), seconds, detail)


def _tracr_answers(model: Any, sequence: tuple[Any, ...]) -> list[Any]:
    return list(model.apply(["BOS", *sequence]).decoded[1:])


def _agrees(got: Any, want: Any) -> bool:
    if (isinstance(want, (int, float)) and not isinstance(want, bool)) or isinstance(got, float):
        try:
            return abs(float(got) - float(want)) <= EPS
        except (TypeError, ValueError):
            return False
    return bool(got == want)


def tracr_side(program: Any, vocab: tuple[Any, ...], length: int, inputs: list[tuple[Any, ...]]) -> Side:
    start = time.perf_counter()
    try:
        model = compiling.compile_rasp_to_model(program, vocab=set(vocab), max_seq_len=length, compiler_bos="BOS")
    except Exception as refusal:  # Tracr's compiler, whatever it raises
        return Side(None, None, None, time.perf_counter() - start, _first_line(refusal))
    seconds = time.perf_counter() - start
    model.forward = jax.jit(model.forward)  # one trace per length, then each input is one call
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(model.params)]
    first_wrong = None
    for sequence in inputs:
        try:
            want = tracr_rasp.evaluate(program, list(sequence))
        except Exception:  # the evaluator's own failure: undefined on this input
            continue
        got = _tracr_answers(model, sequence)
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            if w is not None and not _agrees(g, w):
                first_wrong = (sequence, index, g, w)
                break
        if first_wrong:
            break
    return Side(first_wrong is None, sum(leaf.size for leaf in leaves),
                sum(int(np.count_nonzero(leaf)) for leaf in leaves), seconds,
                "" if first_wrong is None else f"first wrong: {first_wrong}")


def _verdict(side: Side) -> str:
    return f"refused: {side.detail}" if side.exact is None else ("yes" if side.exact else "NO")


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _ratio(theirs: int | None, ours: int | None) -> str:
    return f"{theirs / ours:,.1f}" if ours and theirs else "–"


def row(name: str, length: int, ours: Side, theirs: Side) -> str:
    return (f"| {name} | {length} | {_verdict(ours)} | {_count(ours.nonzero)} / {_count(ours.parameters)} | "
            f"{ours.seconds:.2f} | {_verdict(theirs)} | {_count(theirs.nonzero)} / {_count(theirs.parameters)} | "
            f"{theirs.seconds:.2f} | {_ratio(theirs.nonzero, ours.nonzero)} | "
            f"{_ratio(theirs.parameters, ours.parameters)} |")


HEADER = ("| program | T | infoflow exact | infoflow nonzero / all | infoflow s | Tracr exact | Tracr nonzero / all | "
          "Tracr s | Tracr / infoflow, nonzero | Tracr / infoflow, all |\n|---|---|---|---|---|---|---|---|---|---|")


@dataclass(frozen=True)
class Tally:
    ours: int = 0
    theirs: int = 0
    theirs_refused: int = 0
    total: int = 0
    smaller: tuple[str, ...] = ()  # where Tracr's nonzero weights are fewer than infoflow's

    def add(self, name: str, length: int, ours: Side, theirs: Side) -> Tally:
        smaller = (f"{name} at T = {length} ({_count(theirs.nonzero)} against {_count(ours.nonzero)}, "
                   f"{_ratio(theirs.nonzero, ours.nonzero)})",) \
            if ours.nonzero and theirs.nonzero and theirs.nonzero < ours.nonzero else ()
        return Tally(self.ours + bool(ours.exact), self.theirs + bool(theirs.exact),
                     self.theirs_refused + (theirs.exact is None), self.total + 1, self.smaller + smaller)

    def text(self) -> str:
        fewer = "; ".join(self.smaller) if self.smaller else "none"
        return (f"infoflow exact on {self.ours} of {self.total} (program, T); Tracr exact on {self.theirs}, "
                f"refused {self.theirs_refused}. Tracr's nonzero weights fewer than infoflow's: {fewer}")


def table(programs: list[tuple[str, Callable[[int], Any], tuple[Any, ...]]], lengths: tuple[int, ...]
          ) -> tuple[str, Tally]:
    lines, tally = [HEADER], Tally()
    for name, build, vocab in programs:
        for length in lengths:
            inputs = inputs_for(vocab, length)
            ours = infoflow_side(build(length), vocab, length, inputs)
            theirs = tracr_side(build(length), vocab, length, inputs)
            tally = tally.add(name, length, ours, theirs)
            lines.append(row(name, length, ours, theirs))
            print(lines[-1], flush=True)
    return "\n".join(lines), tally


def field_table() -> tuple[str, Tally]:
    """The suite's FIELD at each program's N: infoflow with the default settings (its dtype
    chosen by compile), Tracr with its own."""
    lines, tally = [HEADER], Tally()
    for entry in suite_on_tracr(field=True):
        inputs = inputs_for(entry.vocab, entry.length)
        ours = infoflow_side(entry.build(), entry.vocab, entry.length, inputs, dtype=None)
        theirs = tracr_side(entry.build(), entry.vocab, entry.length, inputs)
        tally = tally.add(entry.name, entry.length, ours, theirs)
        lines.append(row(entry.name, entry.length, ours, theirs))
        print(lines[-1], flush=True)
    return "\n".join(lines), tally


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    if "--field" in argv:
        field, tally = field_table()
        write_section("Tracr beside infoflow: the field's kinds (bench/tracr_beside.py --field)",
                      f"`bench/rasp_suite.py` FIELD built with Tracr's classes (its import changed), at each "
                      f"program's N: infoflow with the default settings (`ifl.compile(ifl.from_rasp(p, vocab, N), "
                      f"eps={EPS})`), Tracr with its own; checked as in \"Tracr beside infoflow\". "
                      f"{tally.text()}.\n\n{field}")
        return
    quick = "--quick" in argv
    library = [(entry.name, TRACR_LIBRARY[entry.name], entry.vocab) for entry in TRACR_PROGRAMS]
    suite = [(entry.name, lambda n, e=entry: e.build(), entry.vocab) for entry in suite_on_tracr()]
    if quick:
        library, suite = library[:4], suite[:4]
    library_table, library_tally = table(library, (5,) if quick else LIBRARY_LENGTHS)
    suite_table, suite_tally = table(suite, (6,) if quick else SUITE_LENGTHS)
    body = (f"Tracr ({'tracr-pypi'} on PyPI) run beside infoflow in one process, both compiling the same objects "
            f"built with Tracr's own classes, both checked against Tracr's own evaluator (`rasp.evaluate`) on every "
            f"input of length ≤ 3 (≤ 2 for 10 tokens) and {SAMPLES} random inputs of random lengths 1..T. "
            f"infoflow: `ifl.from_rasp` + `compile` (float64, ε = {EPS}). Tracr: "
            f"`compile_rasp_to_model(..., compiler_bos=\"BOS\")` with its defaults. Parameters: nonzero / every "
            f"weight (Tracr's arrays with embeddings; infoflow's `parameter_count` plus its positional code "
            f"`pos_embed.W_pos`, counted as Tracr's `pos_embed` is). Seconds: compile time. "
            f"The script's docstring says how to set up the environment (Tracr is never a dependency of "
            f"infoflow or its tests).\n\n"
            f"### Tracr's library as Tracr ships it (`tracr.compiler.lib`)\n\n{library_tally.text()}.\n\n"
            f"{library_table}\n\n"
            f"### The suite of `bench/rasp_suite.py`, its import changed to Tracr's\n\n{suite_tally.text()}.\n\n"
            f"{suite_table}")
    if quick:
        print(body)
        return
    write_section("Tracr beside infoflow (bench/tracr_beside.py)", body)


if __name__ == "__main__":
    main(sys.argv[1:])
