"""SAEs scored against the features the compiler built, plain and superposed.

    python bench/sae_ground_truth.py [--steps N] [--benchmarks]

For each token program (corpus models whose superposition saves dimensions, and reverse over 8
and 16 tokens): the model at D = F (``--residual F``: every feature its own coordinate where
the storage allows) and at the smallest certified D (``--residual 1``'s answer), and for each
a sparsify SAE of each architecture (topk, groupmax; 4 × D latents, k = 4) trained at the last
layer's ``hook_resid_mid`` (where the fetched tokens and the tokens they were fetched from are
alive together): mean max cosine, share recovered at cos ≥ 0.9 and mean F1 against the
dictionary, beside the residual basis, PCA and a random dictionary. With BENCHMARKS.md "SAE
ground truth" written with ``--benchmarks``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
TOKENS8 = ", ".join(f'"{chr(97 + i)}"' for i in range(8))
TOKENS16 = ", ".join(f'"{chr(97 + i)}"' for i in range(16))
NOTE = ("\n\nScope: four programs at D = F and at their smallest certified D, not the issue's 20 programs × F/D "
        "1, 1.5 and 2: the construction reaches F/D 1.43 on reverse over 8 tokens and 1.64 over 16, 2 on none "
        "(docs/superposition.md). At 300 steps every SAE reconstructs the residual (FVU ≤ 0.02) yet none "
        "recovers a feature at cos ≥ 0.9: its latents mix the few directions of these small residuals; the "
        "residual basis is the truth itself where D = F and falls as the features share dimensions (1.00 → 0.45 "
        "max cosine on reverse over 16 tokens, where the TopK SAE's 0.53 passes it).")
PROGRAMS = {
    "tracr/reverse": (ROOT / "compiled_examples" / "tracr" / "reverse.iflow").read_text(),
    "tracr/shift_by_2": (ROOT / "compiled_examples" / "tracr" / "shift_by_2.iflow").read_text(),
    "reverse, 8 tokens": f"input x : token {{{TOKENS8}}}\nlength T = 4\ntarget(t) = x(len + 1 - t)\n",
    "reverse, 16 tokens": f"input x : token {{{TOKENS16}}}\nlength T = 6\ntarget(t) = x(len + 1 - t)\n",
}


def smallest(program: object) -> int:
    import infoflow_dsl as ifl
    from infoflow_dsl.errors import CompileError

    try:
        ifl.compile(program, samples=0, residual=1)
    except CompileError as error:
        found = re.search(r"is (\d+) \(", str(error))
        assert found is not None, error
        return int(found.group(1))
    return 1


def rows(name: str, source: str, steps: int) -> list[str]:
    import infoflow_dsl as ifl
    from infoflow_dsl.sae.train import sae_scores

    program = ifl.parse_program(source, f"{name}.iflow")
    least = smallest(program)
    out = []
    for residual in sorted({least, 10**6}, reverse=True):
        model = ifl.compile(program, samples=0, residual=residual)
        record = model.config["superposition"]
        hook = f"blocks.{model.n_layers - 1}.hook_resid_mid"
        for architecture in ("topk", "groupmax"):
            result = sae_scores(model, hook, architecture=architecture, steps=steps)
            sae, base = result["sae"], result["baselines"]
            cells = [f"{sae['mean_max_cosine']:.2f} / {sae['recovered']:.0%} / {sae['mean_f1']:.2f}"]
            cells += [f"{base[b]['mean_max_cosine']:.2f} / {base[b]['recovered']:.0%} / {base[b]['mean_f1']:.2f}"
                      for b in ("residual_basis", "pca", "random")]
            out.append(f"| {name} | {record['features_alive']} | {model.d_model} | "
                       f"{record['features_alive'] / model.d_model:.2f} | {result['true_features']} | {architecture} "
                       f"(FVU {sae['fvu']:.3f}) | " + " | ".join(cells) + " |")
            print(out[-1], flush=True)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--benchmarks", action="store_true")
    arguments = parser.parse_args(argv)
    torch.set_num_threads(1)
    with contextlib.redirect_stdout(io.StringIO()):
        import sparsify  # noqa: F401  (its import prints a note on Triton)
    lines = ["| program | F | D | F/D | true features at the hook | SAE | SAE: max cos / recovered / F1 | "
             "residual basis | PCA | random |", "|---|---:|---:|---:|---:|---|---|---|---|---|"]
    for name, source in PROGRAMS.items():
        lines += rows(name, source, arguments.steps)
    table = "\n".join(lines)
    if arguments.benchmarks:
        from report import write_section

        write_section("SAE ground truth", f"`python bench/sae_ground_truth.py --steps {arguments.steps} --benchmarks`: "
                      "each program at D = F and at its smallest certified D (compile --residual), a sparsify SAE "
                      "of each architecture (4 × D latents, k = 4, Adam) at the last layer's hook_resid_mid, "
                      "scored against the feature dictionary: mean max cosine / share recovered at cos ≥ 0.9 / "
                      "mean F1 of the best latent's activity; the baselines scored the same way.\n\n" + table + NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
