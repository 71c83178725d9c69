"""SAEs scored against the features the compiler built, compiled at R = ⌊F/r⌋ for r = 1, 1.5 and 2.

    python bench/sae_ground_truth.py [--steps N] [--only 'NAME;..'] [--rows FILE] [--benchmarks]

For each token program (Tracr's library as shipped but sort_freq, 25 programs of the RASP
suite, reverse over 8 and 16 tokens, a running max, a count of the max and x times the max): F, the features
alive at once that ``disguise --compress`` reaches on the plain model, and the model compiled
with ``--residual R`` for R = ⌊F/r⌋, r = 1, 1.5, 2, where R is at least the smallest certified D
(``--residual 1``'s answer), and for R that smallest D: its d_model D ≤ R and its F/D
(residuals building the same width: one row). For each, a sparsify SAE of each architecture
(topk, groupmax; 4 × D latents, k = 4) trained at the last layer's ``hook_resid_mid``: mean max
cosine, share recovered at cos ≥ 0.9 and mean F1 against the dictionary, beside the residual
basis, PCA and a random dictionary. ``--rows FILE`` appends the rows to FILE (runs split by
``--only`` add up there); ``--benchmarks`` writes
FILE's rows (or this run's) to BENCHMARKS.md "SAE ground truth".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
TOKENS8 = ", ".join(f'"{chr(97 + i)}"' for i in range(8))
TOKENS16 = ", ".join(f'"{chr(97 + i)}"' for i in range(16))
NOTE = ("Read the F/D ≥ 2 rows with care: packed numbers share one direction and differ in magnitude (a numeral "
        "v = Σ K_i·n_i read by step tables), so every member's dictionary direction is that one direction, and a "
        "latent along it, or a basis vector, has cosine 1 with all of them. Cosine cannot tell them apart there; the "
        "F1 of activity is what does. Categorical superposition, where directions differ (the reverses), is where "
        "the cosine metrics are hard.")
BUCKETS = (("1", 1.0, 1.0), ("1.01–1.49", 1.01, 1.49), ("1.5–1.99", 1.5, 1.99), ("≥ 2", 2.0, float("inf")))
#: the RASP suite's programs: seven of every kind, and eighteen whose smallest certified D is at most F/1.5
#: (a scan of the suite, F and ``--residual 1``'s answer per program, chose them): counts, means and
#: steps that pack, and words fetched by position
RASP = ("smaller_count", "distinct_so_far", "detect_aba", "reverse_digits", "sort_unique_digits", "running_count_a",
        "count_less_freq_2", "after_first_a", "count_a_minus_b", "hist_minus_length", "same_length_count",
        "reverse_words", "not_same", "longer_words", "neighbours", "earlier_different", "count_b", "suffix_frac_b",
        "prefix_frac_large", "shuffle_dyck1", "first_token", "shift_by_1", "hist", "query_is_a", "index_plus_length")
RATIOS = (1.0, 1.5, 2.0)
HEADER = ("| program | F | D | F/D | true features at the hook | SAE | SAE: max cos / recovered / F1 | "
          "residual basis | PCA | random |\n|---|---:|---:|---:|---:|---|---|---|---|---|")
SYNTHETIC = {
    "reverse, 8 tokens": f"input x : token {{{TOKENS8}}}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n",
    "reverse, 16 tokens": f"input x : token {{{TOKENS16}}}\nlength T = 6\ntarget(t) = x(len + 1 - t)\n",
    "running max": "input x : token {1, 2, 3, 4}\nlength T = 6\ntarget(t) = max_<s : s <= t> x(s)\n",
    "count of the max": "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = sum_<s> [x(s) == max_<r> x(r)]\n",
    "x times the max": "input x : token {1, 2, 3}\nlength T = 6\ntarget(t) = max_<s> x(s) * x(t)\n",
}


def programs() -> dict[str, Any]:
    """name -> program: Tracr's shipped library but sort_freq, RASP's 25, the synthetic five."""
    from rasp_suite import PROGRAMS

    import infoflow_dsl as ifl

    found: dict[str, Any] = {f"tracr/{p.stem}": ifl.load_program(p) for p in sorted(
        (ROOT / "compiled_examples" / "tracr").glob("*.iflow")) if p.stem != "sort_freq"}
    by_name = {p.name: p for p in PROGRAMS}
    found |= {f"rasp/{n}": ifl.from_rasp(by_name[n].build(), by_name[n].vocab, by_name[n].length, name=n)
              for n in RASP}
    found |= {name: ifl.parse_program(text, "p.iflow") for name, text in SYNTHETIC.items()}
    return found


def residuals(program: Any) -> tuple[int, list[int]]:
    """(F, the residuals ⌊F/r⌋ for r in RATIOS that are at least the smallest certified D, and that D)."""
    import infoflow_dsl as ifl
    from infoflow_dsl.compiler.superposition import features_alive

    plain = ifl.compile(program, samples=0, dtype="float64")
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in plain.state_dict().items()}
    from superposition_below_compress import smallest

    alive, least = features_alive(tensors, plain.card), smallest(program)
    return alive, sorted({least} | {int(alive // r) for r in RATIOS if int(alive // r) >= least}, reverse=True)


def rows(name: str, program: Any, steps: int) -> list[str]:
    import infoflow_dsl as ifl
    from infoflow_dsl.sae.train import sae_scores

    alive, chosen = residuals(program)
    out: list[str] = []
    seen: set[int] = set()
    for residual in chosen:
        model = ifl.compile(program, samples=0, residual=residual)
        if model.d_model in seen:  # two residuals that build the same width: one row
            continue
        seen.add(model.d_model)
        hook = f"blocks.{model.n_layers - 1}.hook_resid_mid"
        for architecture in ("topk", "groupmax"):
            result = sae_scores(model, hook, architecture=architecture, steps=steps)
            sae, base = result["sae"], result["baselines"]
            cells = [f"{sae['mean_max_cosine']:.2f} / {sae['recovered']:.0%} / {sae['mean_f1']:.2f}"]
            cells += [f"{base[b]['mean_max_cosine']:.2f} / {base[b]['recovered']:.0%} / {base[b]['mean_f1']:.2f}"
                      for b in ("residual_basis", "pca", "random")]
            out.append(f"| {name} | {alive} | {model.d_model} | {alive / model.d_model:.2f} | "
                       f"{result['true_features']} | {architecture} (FVU {sae['fvu']:.3f}) | "
                       + " | ".join(cells) + " |")
            print(out[-1], flush=True)
    return out


def _cells(cell: str) -> tuple[float, float, float]:
    """'0.78 / 25% / 0.55' -> (0.78, 0.25, 0.55)."""
    cosine, recovered, f1 = (part.strip() for part in cell.split("/"))
    return float(cosine), float(recovered.rstrip("%")) / 100, float(f1)


def summary(found: list[str]) -> str:
    """Per F/D bucket: the programs in it, and the mean max cosine / recovered / F1 of each SAE
    architecture and of each baseline over its rows (computed from the rows themselves)."""
    parsed = [[c.strip() for c in line.strip().strip("|").split("|")] for line in found if line.startswith("| ")]
    lines = ["| F/D | programs | rows | " + " | ".join(f"{a}: cos / rec / F1" for a in ("topk", "groupmax"))
             + " | residual basis | PCA | random |", "|---|---:|---:|---|---|---|---|---|"]
    for label, low, high in BUCKETS:
        rows = [r for r in parsed if low <= round(float(r[3]), 2) <= high]
        if not rows:
            continue
        def mean(cells: list[tuple[float, float, float]]) -> str:
            if not cells:
                return "–"
            c, r, f = (sum(x[i] for x in cells) / len(cells) for i in range(3))
            return f"{c:.2f} / {r:.0%} / {f:.2f}"
        saes = [mean([_cells(r[6]) for r in rows if r[5].startswith(a)]) for a in ("topk", "groupmax")]
        bases = [mean([_cells(r[k]) for r in rows]) for k in (7, 8, 9)]
        lines.append(f"| {label} | {len({r[0] for r in rows})} | {len(rows) // 2} | " + " | ".join(saes + bases) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--only", default="", help="program names separated by ';' (default: all)")
    parser.add_argument("--rows", type=Path, help="append the rows to this file")
    parser.add_argument("--benchmarks", action="store_true")
    arguments = parser.parse_args(argv)
    torch.set_num_threads(1)
    with contextlib.redirect_stdout(io.StringIO()):
        import sparsify  # noqa: F401  (its import prints a note on Triton)
    wanted = [n for n in arguments.only.split(";") if n]
    found = [] if arguments.benchmarks and arguments.rows and not wanted else [
        line for name, program in programs().items() if not wanted or name in wanted
        for line in rows(name, program, arguments.steps)]
    if arguments.rows:
        with arguments.rows.open("a", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in found)
        found = arguments.rows.read_text(encoding="utf-8").splitlines()
    if arguments.benchmarks:
        from report import write_section

        table = "\n".join([HEADER, *found])
        write_section("SAE ground truth", f"`python bench/sae_ground_truth.py --steps {arguments.steps} --benchmarks`: "
                      "each program compiled with --residual ⌊F/r⌋ for r = 1, 1.5, 2 where its smallest certified "
                      "D allows, and at that D (F/D as reached), a sparsify SAE of each architecture (4 × D "
                      "latents, k = 4, Adam) at the last layer's hook_resid_mid, scored against the feature "
                      "dictionary: mean max cosine / share recovered at cos ≥ 0.9 / mean F1 of the best latent's "
                      "activity; the baselines scored the same way.\n\n"
                      + table + f"\n\nBy F/D as reached (programs, and (program, D) pairs):\n\n{summary(found)}\n\n"
                      + NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
