"""compile --residual against what ``disguise --compress`` reaches, on varied token programs.

    python bench/superposition_below_compress.py [--set tracr|rasp|all] [--only NAME ...] [--benchmarks]

For each token program (Tracr's library as shipped in compiled_examples/tracr, programs of the
RASP suite in bench/rasp_suite.py, reverse and hist over 8 tokens): F, the features alive at once
that ``disguise --compress`` reaches on the plain model (tight lifetimes, compiler/compress.py:
all that sharing over the depth reaches); F once the directions the lowering names twice are
folded (compiler/superposition/duplicates.py); F once numbers of known values are packed in
shared directions read by step tables (compiler/superposition/packed.py); the smallest D that
``compile --residual`` certifies in float64 and in the default dtype (``--residual 1``'s refusal
names it), F/D, what shares a dimension at one depth (folded duplicates, packed numbers,
superposition), the categorical features on their storage, the packed numbers and the units
their tables add; and both models measured against the float64 reference on every input up to
length 4 and 1,000 random ones at T (token outputs: answers wrong; numbers: the largest error
against the program's ε). With ``--benchmarks`` the table goes into BENCHMARKS.md, section
"Superposition".
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
    "running max": "input x : token {1, 2, 3, 4}\nlength T = 6\ntarget(t) = max_<s : s <= t> x(s)\n",
    "range": "input x : token {1, 2, 3, 4}\nlength T = 6\ntarget max_<s> x(s) - min_<s> x(s)\n",
    "count of the max": "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = sum_<s> [x(s) == max_<r> x(r)]\n",
    "x times the max": "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = max_<s> x(s) * x(t)\n",
    "x times t": "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = x(t) * t\n",
    "prefix sum times x": "input x : token {1, 2, 3}\nlength T = 5\ntarget(t) = sum_<s : s <= t> x(s) * x(t)\n",
    "histogram of the histogram": ('input x : token {"a", "b", "c"}\nlength T = 5\n'
                                   "let h(s) = sum_<r> [x(r) == x(s)]\ntarget(t) = sum_<s> [h(s) == h(t)]\n"),
}
RASP = ("count_less_freq_2", "smaller_count", "running_count_a", "distinct_so_far", "detect_aba", "shuffle_dyck1",
        "reverse_digits", "earlier_different", "mean_of_larger", "count_a_minus_b", "sort_unique_digits",
        "mean_index_of_same", "word_class")
INTRO = ("F: the features alive at once that `disguise --compress` reaches on the plain model (tight lifetimes: "
         "all that sharing over the depth reaches); F folded: F once the exact folds are made (directions named "
         "twice, embedding columns others span, numbers every later reader reads in one form summed, sharp "
         "heads' constant queries moved off `one`: compiler/superposition/duplicates.py, spans.py, sums.py, "
         "queries.py); "
         "F packed: F once numbers of known values share a direction read "
         "by step tables "
         "(compiler/superposition/packed.py); smallest D: what `compile --residual --dtype float64` certifies "
         "(`--residual 1` names it); F/D = F / smallest D; at one depth: what D below F comes from (exact "
         "folds: F − F folded, and which; packed numbers: F folded − F packed; superposed: F packed − D); "
         "packed numbers: "
         "the numbers packed, in how many directions, and the step-table units added against the plain units they "
         "replace; smallest D, default dtype: the same with no dtype given (float32 where its bound and its "
         "tables' rounding certify, else float64, which compile says in its `dtype_rule`); both models measured "
         "against the float64 reference on every input up to length 4 and 1,000 random ones at T.")


def note(results: list[tuple[str, int, int, int]]) -> str:
    """The summary under the table: on how many programs D < F (float64, default dtype), F/D there,
    and where the default dtype stops above float64's D."""
    below = [(name, alive / width) for name, alive, width, _ in results if width < alive]
    default = sum(1 for _, alive, _, width in results if width < alive)
    ratios = sorted(r for _, r in below)
    spread = f"F/D {ratios[0]:.2f} to {ratios[-1]:.2f} there" if ratios else "nowhere"
    higher = ", ".join(f"{name.split('/')[-1]} {width} against {wide}" for name, _, wide, width in results
                       if width > wide) or "none"
    equal = [name.split("/")[-1] for name, alive, width, _ in results if width >= alive]
    why = "; ".join(f"{name}: {REASONS.get(name, 'not yet examined')}" for name in equal)
    return (f"D is below F on {len(below)} of the {len(results)} programs in float64 ({spread}) and on {default} "
            "in the default dtype, each time by sharing at one depth, which the column \"at one depth\" names: "
            "exact folds (directions named twice; embedding columns other embedding columns span, such as a token's "
            "thresholds beside its indicators, or one positional step too many; numbers every later reader reads "
            "in one form (the output; a head's values; an `and`), held as that sum; "
            "sharp heads' constant queries moved onto a positive number, so that "
            "`one` is read by nothing), categorical features superposed on fewer storage dimensions (the fetched "
            "tokens and token indicators carried past their reads), and numbers packed: "
            "a count's mean and 1/count, 1/len, the token indicators a head averages or a gate reads, the steps, "
            "gates and tables FFNs compute (by the values their blocks record, or the block evaluated on its inputs' "
            "values: a product of a token and a head's output), every input of one `and` at once, "
            "in one direction v = Σ K_i·n_i whose FFN readers are rebuilt as step tables of v (exact while v is "
            "within a quarter of its gap; the tables cost the units in their column). "
            f"D = F on {', '.join(equal) or 'none'}{': ' + why if equal else ''}. A table over v "
            "of dynamic range R rounds by about ϱ·R per active unit, which a numeric output's slack (ε − bound) "
            f"admits in float32 for the smaller tables only; with no dtype given, compile builds the others in "
            f"float64 and says why (`dtype_rule`), so the default dtype's D is above float64's on {higher}. Every "
            "model is exact on the inputs checked (token answers; numbers within ε).")


HEADER = ("| program | plain d_model | F (`--compress`) | F folded | F packed | smallest D | F/D | at one depth "
          "| superposed on storage | packed numbers: in packs, units added / replaced | smallest D, default dtype "
          "| inputs checked | wrong / max error (ε): float64; default | seconds |\n"
          "|---|---:|---:|---:|---:|---:|---:|---|---|---|---|---:|---|---:|")
#: why D = F, for the programs where it is (read off their peaks)
REASONS = {"word_class": "a single feature is alive at its peak (F = 1)"}


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


def smallest(program: Any, dtype: str | None = None) -> int:
    import infoflow_dsl as ifl
    from infoflow_dsl.errors import CompileError

    try:
        ifl.compile(program, samples=0, residual=1, dtype=dtype)
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


def _result(model: Any, program: Any) -> tuple[int, str]:
    count, wrong, worst = measured(model, program)
    return count, f"{wrong} wrong" if model.token_output else f"{worst:.2g} ({model.config['eps']:g})"


def row(name: str, program: Any) -> tuple[str, int, int, int]:
    import infoflow_dsl as ifl
    from infoflow_dsl.compiler.superposition import features_alive

    start = time.perf_counter()
    plain = ifl.compile(program, samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in plain.state_dict().items()}
    alive = features_alive(tensors, plain.card)
    model = ifl.compile(program, samples=0, dtype="float64", residual=smallest(program, "float64"))
    default = ifl.compile(program, samples=0, residual=smallest(program))
    record = model.config["superposition"]
    folded = record["features_alive_folded"]
    packed = record.get("packed")
    after = folded if packed is None else packed["features_alive_packed"]
    count, result = _result(model, program)
    _, default_result = _result(default, program)
    numbers = "—" if packed is None else (f"{sum(len(p['members']) for p in packed['packs'])} in "
                                          f"{len(packed['packs'])}: +{packed['units_added']} / "
                                          f"−{packed['units_replaced']} units")
    line = (f"| {name} | {plain.d_model} | {alive} | {folded} | {after} | {model.d_model} | "
            f"{alive / model.d_model:.2f} | {one_depth(alive, folded, after, model.d_model, record)} | "
            f"{record['superposed']} on {record['storage']} | {numbers} | {default.d_model} "
            f"({default.config['dtype']}) | {count} | {result}; {default_result} | {time.perf_counter() - start:.0f} |")
    return line, alive, model.d_model, default.d_model


def one_depth(alive: int, folded: int, packed: int, width: int, record: dict[str, Any]) -> str:
    """What shares a dimension at one depth: the dimensions the exact folds (and which),
    packed numbers and superposition save."""
    folds = [f"{len(record.get(key) or [])} {what}" for key, what in
             (("duplicates", "duplicates"), ("spanned", "spanned columns"), ("summed", "sums"),
              ("queries", "constant queries moved")) if record.get(key)]
    found = [f"{n} {what}" for n, what in ((alive - folded, f"folded ({', '.join(folds)})"),
                                           (folded - packed, "packed"), (packed - width, "superposed")) if n > 0]
    return ", ".join(found) or "—"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=("tracr", "rasp", "all"), default="all")
    parser.add_argument("--only", action="append", default=[], help="only this program (repeatable)")
    parser.add_argument("--benchmarks", action="store_true", help="write the table into BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    lines = [HEADER]
    print(HEADER, flush=True)
    results = []
    for name, program in programs(args.set):
        if args.only and name not in args.only:
            continue
        line, alive, width, default = row(name, program)
        lines.append(line)
        results.append((name, alive, width, default))
        print(line, flush=True)
    print(note(results))
    if args.benchmarks:
        from report import measured_on, write_section

        write_section("Superposition", f"`python bench/superposition_below_compress.py --set {args.set} --benchmarks`"
                      f" ({measured_on()}): {INTRO}\n\n" + "\n".join(lines) + f"\n\n{note(results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
