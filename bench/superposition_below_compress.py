"""compile --residual against what ``disguise --compress`` reaches, on varied token programs.

    python bench/superposition_below_compress.py [--set tracr|rasp|all] [--benchmarks]

For each token program (Tracr's library as shipped in compiled_examples/tracr, programs of the
RASP suite in bench/rasp_suite.py, reverse and hist over 8 tokens): F, the features alive at once
that ``disguise --compress`` reaches on the plain model (tight lifetimes, compiler/compress.py:
all that sharing over the depth reaches); F once the directions the lowering names twice are
folded (compiler/superposition/duplicates.py); the smallest D that ``compile --residual``
certifies (``--residual 1``'s refusal names it), F/D, what shares a dimension at one depth
(folded duplicates: F minus the folded count; superposition: the folded count minus D) and the
categorical features on their storage; and the model at that D measured against the
float64 reference on every input up to length 4 and 1,000 random ones at T (token outputs:
answers wrong; numbers: the largest error against the program's ε). With ``--benchmarks`` the
table goes into BENCHMARKS.md, section "Superposition".
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
TOKENS8 = ", ".join(f'"{chr(97 + i)}"' for i in range(8))
SYNTHETIC = {
    "reverse, 8 tokens": f"input x : token {{{TOKENS8}}}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n",
    "hist, 8 tokens": f"input x : token {{{TOKENS8}}}\nlength T = 4\ntarget(t) = sum_<s> [x(s) == x(t)]\n",
}
RASP = ("count_less_freq_2", "smaller_count", "running_count_a", "distinct_so_far", "detect_aba", "shuffle_dyck1",
        "reverse_digits", "earlier_different", "mean_of_larger", "count_a_minus_b", "sort_unique_digits",
        "word_class")
INTRO = ("F: the features alive at once that `disguise --compress` reaches on the plain model (tight lifetimes: "
         "all that sharing over the depth reaches); F folded: F once the directions the lowering names twice are "
         "folded into one; smallest D: what `compile --residual` certifies (`--residual 1` names it); F/D = F / "
         "smallest D; at one depth: what D below F comes from (folded duplicates: F − F folded dimensions; "
         "superposed: F folded − D); the model at that D measured against the float64 reference on every input up "
         "to length 4 and 1,000 random ones at T.")
NOTE = ("D is below F on 12 of the 28 programs, each time by sharing at one depth, and the column \"at one depth\" "
        "says which: categorical features superposed on fewer storage dimensions (n on d with n > d: reverse, "
        "shift_by_2, sort, sort_unique, reverse over 8 tokens, reverse_digits, sort_unique_digits; the fetched "
        "tokens and token indicators carried past their reads) and directions the lowering names twice folded into "
        "one (detect_pattern_abc, detect_aba, smaller_count, distinct_so_far, mean_of_larger, and 3 of "
        "sort_unique's 9). F/D is 1.04 to 1.54 on those 12. On the other 16, D = F: at their peak the features "
        "that can all be active at once are numbers or groups read where a clean slot costs what superposing "
        "saves (hist, the counts, dyck, frac_prevs, length, sort_freq; word_class superposes 2 on 2 and saves "
        "nothing), and features that can all be active at once each need a dimension under the per-read margin "
        "(docs/superposition.md: the Gram matrix of their directions is diagonally dominant, so of full rank). "
        "Every model is exact on the inputs checked (token answers; numbers within ε).")
HEADER = ("| program | plain d_model | F (`--compress`) | F folded | smallest D | F/D | at one depth "
          "| superposed on storage | inputs checked | wrong / max error (ε) | seconds |\n"
          "|---|---:|---:|---:|---:|---:|---|---|---:|---|---:|")


def programs(which: str) -> list[tuple[str, Any]]:
    import infoflow_dsl as ifl

    found: list[tuple[str, Any]] = []
    if which in ("tracr", "all"):
        found += [(f"tracr/{p.stem}", ifl.load_program(p)) for p in sorted((ROOT / "compiled_examples" / "tracr")
                                                                            .glob("*.iflow"))]
        found += [(name, ifl.parse_program(text, "p.iflow")) for name, text in SYNTHETIC.items()]
    if which in ("rasp", "all"):
        from rasp_suite import PROGRAMS

        by_name = {p.name: p for p in PROGRAMS}
        found += [(f"rasp/{n}", ifl.from_rasp(by_name[n].build(), by_name[n].vocab, by_name[n].length, name=n))
                  for n in RASP]
    return found


def smallest(program: Any) -> int:
    import infoflow_dsl as ifl
    from infoflow_dsl.errors import CompileError

    try:
        ifl.compile(program, samples=0, residual=1)
    except CompileError as error:
        found = re.search(r"is (\d+) \(", str(error))
        assert found is not None, error
        return int(found.group(1))
    return 1


def measured(model: Any, program: Any) -> tuple[int, int, float]:
    """(inputs, wrong answers, largest numeric error) on every input up to length 4 and 1,000
    random ones at T, against the float64 reference (positions where the target is undefined
    left out)."""
    import infoflow_dsl as ifl

    tokens = len(program.token_vocabulary.names)
    batches = [torch.tensor(list(itertools.product(range(tokens), repeat=n)), dtype=torch.int64)
               for n in range(1, min(4, program.length) + 1)]
    batches.append(ifl.sample_inputs(program, 1000, seed=11))
    count = wrong = 0
    worst = 0.0
    for x in batches:
        truth = ifl.evaluate(program, x)
        with torch.no_grad():
            y = model(x).double()
        count += len(x)
        if model.token_output:  # -1: no answer asked there (a target defined on some positions)
            off = (y.argmax(-1).double() != truth) & (truth >= 0)
            wrong += int(off.reshape(len(x), -1).any(-1).sum())
        else:
            defined = ~truth.isnan()
            worst = max([worst, *(y - truth)[defined].abs().tolist()])
    return count, wrong, worst


def row(name: str, program: Any) -> str:
    import infoflow_dsl as ifl
    from infoflow_dsl.compiler.superposition import features_alive

    start = time.perf_counter()
    plain = ifl.compile(program, samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in plain.state_dict().items()}
    alive = features_alive(tensors, plain.config)
    model = ifl.compile(program, samples=0, residual=smallest(program))
    record = model.config["superposition"]
    folded = record["features_alive_folded"]
    count, wrong, worst = measured(model, program)
    result = f"{wrong} wrong" if model.token_output else f"{worst:.2g} ({model.config['eps']:g})"
    return (f"| {name} | {plain.d_model} | {alive} | {folded} | {model.d_model} | {alive / model.d_model:.2f} | "
            f"{one_depth(alive, folded, model.d_model)} | {record['superposed']} on {record['storage']} | {count} | "
            f"{result} | {time.perf_counter() - start:.0f} |")


def one_depth(alive: int, folded: int, width: int) -> str:
    """What shares a dimension at one depth: the dimensions folded duplicates and superposition save."""
    found = [f"{n} {what}" for n, what in ((alive - folded, "folded"), (folded - width, "superposed")) if n > 0]
    return ", ".join(found) or "—"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("tracr", "rasp", "all"), default="all")
    parser.add_argument("--benchmarks", action="store_true", help="write the table into BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    lines = [HEADER]
    print(HEADER, flush=True)
    for name, program in programs(args.set):
        lines.append(row(name, program))
        print(lines[-1], flush=True)
    if args.benchmarks:
        from report import measured_on, write_section

        write_section("Superposition", f"`python bench/superposition_below_compress.py --set {args.set} --benchmarks`"
                      f" ({measured_on()}): {INTRO}\n\n" + "\n".join(lines) + f"\n\n{NOTE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
