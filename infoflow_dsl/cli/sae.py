"""``infoflowc sae MODEL [--hook HOOK] [--dict-size K] [--architecture topk|groupmax] [--json]``: a
sparsify SAE on a token model's residual, scored against its feature dictionary (:mod:`infoflow_dsl.sae`).
Without ``--hook`` it scores the hook with the most superposition and says which; beside the
scores it lists the features sharing one direction there, on which cosine scores are an upper bound."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from typing import Any

from ..errors import UsageError
from .common import (
    Command,
    add_json_flag,
    add_model_argument,
    add_seed_flag,
    positive_int,
    with_compiled_model,
)

HOOK_HELP = ("a residual hook: blocks.L.hook_resid_pre, _mid or _post (default: the hook with the most "
             "superposition, the largest F/D of the dictionary's features alive there over d_model; ties to "
             "the one where more features share a direction, then the earliest)")
MISSING = "infoflowc sae trains with EleutherAI's sparsify: pip install 'infoflow-dsl[sae]' (eai-sparsify)"


def command_sae(arguments: argparse.Namespace) -> None:
    """Train, score, print (exit 2 for a model without a token vocabulary, a hook it lacks, or
    sparsify missing)."""
    from ..sae.train import sae_scores

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its import prints a note on Triton to stdout
            import sparsify  # noqa: F401
    except ImportError:
        raise UsageError(MISSING) from None

    def scored(model: Any) -> dict[str, Any]:
        if model.vocabulary is None:
            raise UsageError(f"{arguments.model}: infoflowc sae reads a token model's feature dictionary; this "
                             f"model reads vectors")
        try:
            return sae_scores(model, arguments.hook, arguments.dict_size, arguments.architecture, arguments.k,
                              arguments.steps, arguments.seed)
        except ValueError as error:
            raise UsageError(f"{arguments.model}: {error}") from None

    _, result = with_compiled_model(arguments.model, scored, "score an SAE against")
    if arguments.json:
        note = shared_note(result["shared_directions"], result["true_features"], result["hook"])
        print(json.dumps({"model": str(arguments.model), **result, **({"shared_note": note} if note else {})}))
        return
    sae = result["sae"]
    choice = result["hook_choice"]
    if choice is not None:
        print(f"hook {choice['hook']} (no --hook): {choice['reason']}")
    print(f"{arguments.model} at {result['hook']}: {result['true_features']} true features in d_model = "
          f"{result['d_model']}, {result['rows']} rows; SAE {sae['architecture']} k = {sae['k']}, "
          f"{sae['latents']} latents, FVU {sae['fvu']:.3g}")
    print(f"  {'dictionary':<16} {'mean max cos':>12} {'recovered':>10} {'mean F1':>8}")
    for name, row in [("sae", sae), *result["baselines"].items()]:
        print(f"  {name:<16} {row['mean_max_cosine']:>12.3f} {row['recovered']:>10.0%} {row['mean_f1']:>8.3f}")
    print_shared(result["shared_directions"], result["true_features"], result["hook"])


def shared_note(groups: list[list[str]], total: int, hook: str) -> str:
    """The note on features sharing one direction at ``hook`` ("" where none do)."""
    if not groups:
        return ""
    members = sum(len(group) for group in groups)
    return (f"{members} of the {total} true features share a direction at {hook} with another ({len(groups)} "
            f"groups); cosine cannot tell a group's members apart there, so mean max cosine and recovered are "
            f"an upper bound for them (F1 of activity still separates them)")


def print_shared(groups: list[list[str]], total: int, hook: str) -> None:
    """Print :func:`shared_note` and each group, one a line (nothing where no features share a direction)."""
    note = shared_note(groups, total, hook)
    if not note:
        return
    print(f"note: {note}:")
    for group in groups:
        print(f"  {', '.join(group)}")


def _sae_arguments(parser: argparse.ArgumentParser) -> None:
    """``sae MODEL [--hook HOOK] [--dict-size K] [--architecture topk|groupmax] [--k K] [--steps N] [--json]``."""
    add_model_argument(parser)
    parser.add_argument("--hook", default=None, help=HOOK_HELP)
    parser.add_argument("--dict-size", type=positive_int, default=None, help="latents (default 4 × d_model)")
    parser.add_argument("--architecture", choices=["topk", "groupmax"], default="topk",
                        help="sparsify's activation (default topk)")
    parser.add_argument("--k", type=positive_int, default=4, help="active latents per row (default 4)")
    parser.add_argument("--steps", type=positive_int, default=1000, help="Adam steps of 1024 rows (default 1000)")
    add_seed_flag(parser, "the seed of the inputs and the SAE (0)")
    add_json_flag(parser, "print every score as JSON")


SAE = Command("sae", "train a sparse autoencoder (sparsify) on a token model's residual and score it and the "
              "baselines against the model's feature dictionary", _sae_arguments, command_sae)
