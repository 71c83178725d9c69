"""Benchmark: the field's own code on the ACDC paper's two Tracr tasks, beside ours.

auto-circuit 1.0.1 (Miller et al. 2024, on PyPI) ships Tracr's reverse and proportion models as
TransformerLens ``HookedTransformer``s built from Tracr's own compiler, both edge lists the field
scores them with (the ACDC paper's, meant for zero ablation; Miller et al.'s, for resample
ablation), and its own ACDC and edge attribution patching. Its task datasets are not in the
wheel; this script writes them (every input of length 5, as its task definitions count: 3^5 = 243
for reverse, 4^5 = 1,024 for proportion; each input's corrupted partner a seeded derangement) and
runs, on Tracr's models with the field's code only:

- ACDC (``acdc_prune_scores``, τ = 10^-6 .. 10^-3 as its ``ACDC`` algorithm): KL on reverse, MSE
  on proportion (the paper's choice: proportion's output is one number);
- EAP (``mask_gradient_prune_scores`` at α = 0, the logit gradient: auto-circuit's own equal of
  Syed et al.'s EAP): the answers' logit difference on reverse, the output on proportion;

each with zero ablation (the ablated source outputs replaced by zeros) and resample ablation (the
corrupted partner's outputs), scored by auto-circuit's ``measure_task_roc`` over every edge count
and its trapezoid area, against the list the field pairs with that ablation and against the ACDC
paper's list for both (how the paper scored its resampling rows).

auto-circuit needs TransformerLens < 3 and Tracr; it is never a dependency of infoflow or its
tests, so this runs in an environment of its own (no infoflow in it)::

    python -m venv /tmp/acenv
    /tmp/acenv/bin/pip install torch==2.13.0 auto-circuit==1.0.1 tracr-pypi
    cd /work/main && /tmp/acenv/bin/python bench/acdc_beside.py   # writes its BENCHMARKS.md section

Our numbers on the same tasks (our compiled models, our methods, our truths) are in BENCHMARKS.md
"Circuit discovery", "The ACDC paper's two Tracr tasks".
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
TAUS = [10.0**e for e in range(-6, -2)]
LENGTH = 5


def datasets_folder() -> Path:
    """Where auto-circuit reads its datasets (``repo_path_to_abs_path("datasets/...")``)."""
    from auto_circuit.utils.misc import repo_path_to_abs_path

    return repo_path_to_abs_path("datasets")


def write_dataset(key: str, assembled: Any, path: Path) -> int:
    """Every input of length 5 with its corrupted partner, answers and wrong answers (token ids,
    BOS first); the number of prompts."""
    vocabulary = sorted(assembled.input_encoder.encoding_map.keys() - {"BOS", "compiler_pad"}, key=str)
    inputs = [list(x) for x in itertools.product(vocabulary, repeat=LENGTH)]
    order = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(0)).tolist()
    partner = {order[i]: order[(i + 1) % len(order)] for i in range(len(order))}  # no input is its own
    prompts = []
    for i, x in enumerate(inputs):
        clean = assembled.input_encoder.encode(["BOS", *x])
        corrupt = assembled.input_encoder.encode(["BOS", *inputs[partner[i]]])
        if key == "reverse":
            answers = [[a] for a in assembled.output_encoder.encode(x[::-1])]
            wrong = [[(a + 1) % len(vocabulary)] for a, in answers]
        else:  # one numeric output, read at index 0
            answers = wrong = [[0]] * LENGTH
        prompts.append({"clean": clean, "corrupt": corrupt, "answers": answers, "wrong_answers": wrong})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"prompts": prompts}), encoding="utf-8")
    return len(prompts)


def patchable(key: str) -> tuple[Any, Any, Any]:
    """Tracr's model for ``key`` as auto-circuit builds it, made patchable edge by edge; its
    data loader (every prompt in one batch, as ACDC reads only the first)."""
    from auto_circuit.data import load_datasets_from_json
    from auto_circuit.model_utils.tracr_model_utils import get_tracr_model
    from auto_circuit.utils.graph_utils import patchable_model

    model, assembled = get_tracr_model(key, "cpu")
    model.cfg.use_attn_result = model.cfg.use_split_qkv_input = model.cfg.use_hook_mlp_in = True
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad = False
    path = datasets_folder() / "tracr" / f"infoflow_{key}_len_{LENGTH}_prompts.json"
    count = write_dataset(key, assembled, path)
    loader, _ = load_datasets_from_json(None, path, torch.device("cpu"), prepend_bos=False,
                                        batch_size=(count - 1, 1), train_test_size=(count - 1, 1), pad=False)
    wrapped = patchable_model(model, factorized=True, slice_output="not_first_seq", seq_len=None,
                              separate_qkv=True, device=torch.device("cpu"))
    return wrapped, loader, assembled


def acdc_scores(model: Any, loader: Any, key: str, ablation: str) -> Any:
    """auto-circuit's ACDC; under zero ablation its patch outputs (the corrupted run's) are zeros."""
    from auto_circuit.prune_algos import ACDC

    original = ACDC.src_ablations
    calls = itertools.count()

    def ablations(model: Any, sample: Any, *rest: Any, **named: Any) -> Any:
        out = original(model, sample, *rest, **named)
        patch = next(calls) % 2 == 0  # ACDC asks for the patch outputs, then the clean ones, at each τ
        return torch.zeros_like(out) if ablation == "zero" and patch else out

    ACDC.src_ablations = ablations
    try:
        exponents = list(range(-6, -2))
        target = "kl_div" if key == "reverse" else "mse"
        return ACDC.acdc_prune_scores(model, loader, None, tao_exps=exponents, tao_bases=[1],
                                      faithfulness_target=target)
    finally:
        ACDC.src_ablations = original


def eap_scores(model: Any, loader: Any, key: str, ablation: str) -> Any:
    from auto_circuit.prune_algos.mask_gradient import mask_gradient_prune_scores
    from auto_circuit.types import AblationType

    kind = AblationType.ZERO if ablation == "zero" else AblationType.RESAMPLE
    return mask_gradient_prune_scores(model, loader, None, grad_function="logit",
                                      answer_function="avg_diff" if key == "reverse" else "avg_val",
                                      mask_val=0.0, ablation_type=kind,
                                      clean_corrupt=None if ablation == "zero" else "corrupt")


def auroc(model: Any, edges: Any, scores: Any) -> float:
    from auto_circuit.metrics.area_under_curve import measurements_auc
    from auto_circuit.metrics.official_circuits.measure_roc import measure_task_roc

    return measurements_auc(measure_task_roc(model, edges, scores, all_edges=True), False, False, None, eps=0.0)


def field_lists(key: str, model: Any) -> dict[str, Any]:
    """ablation -> the edge list the field pairs with it (zero: the ACDC paper's; resample: Miller et al.'s)."""
    from auto_circuit.metrics.official_circuits.circuits.tracr import reverse_official, xproportion_official

    if key == "reverse":
        return {"zero": reverse_official.tracr_reverse_acdc_edges(model),
                "resample": reverse_official.tracr_reverse_true_edges(model)}
    return {"zero": xproportion_official.tracr_xproportion_acdc_edges(model),
            "resample": xproportion_official.tracr_xproportion_official_edges(model)}


def unneeded(listed: Any, scores: Any, method: str) -> list[str]:
    """The listed edges the method calls unneeded: ACDC pruned them at some τ (a finite score),
    EAP's gradient on them is exactly 0."""
    return sorted(e.name for e in listed if (float(e.prune_score(scores)) < float("inf") if method == "acdc"
                                               else float(e.prune_score(scores)) == 0.0))


EXPLAINED = """Beside ours ("Circuit discovery", "The ACDC paper's two Tracr tasks": our compiled models, our
methods, each ablation's certified truth) and the ACDC paper's, as the issue quotes it (edge AUROC
1.0 with zero ablation, 0.2–0.6 with resampling, on these two models):

- **Resample ablation.** The field's code scores against the list meant for resampling (Miller et
  al.'s) as the first AUROC column shows, and drops only when scored against the paper's
  zero-ablation list (the last column), as the paper scored its resampling rows; ours does the same
  against our truth and against zero's edges (that section's two columns). The low resampling
  numbers are the scoring, not the methods: resampling within inputs of one length never needs the
  length path, which the zero list holds.
- **Zero ablation.** The field's code does not reach 1.0 on reverse against the paper's list: the
  listed edges it calls unneeded under zero ablation on Tracr's own model, on every input of
  length 5 — {missed}. The list was written down, not measured: ACDC pruned those edges (each, on top of the
  ones pruned before it, moved the KL by less than τ = 1e-6) and EAP's gradient on them is exactly
  0. Ours is scored against a truth measured edge by edge, so a method that finds what zero
  ablation needs scores 1.0 there (our ACDC does on reverse; our EAP misses edges whose effect is
  flat at the clean run, as the field's EAP misses the ones above).
- The models differ too (Tracr's computes the length through three MLPs and attends to BOS; ours
  through one MLP and no BOS), so the edge counts differ (77 and 23 candidate edges there)."""


def main() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from report import write_section

    torch.manual_seed(0)
    missed: list[str] = []
    rows = ["| task | method | ablation | edges | AUROC (the list for its ablation) | AUROC (the ACDC paper's list) |",
            "|---|---|---|---:|---:|---:|"]
    for key, task in (("reverse", "tracr_reverse"), ("xproportion", "tracr_frac_prevs")):
        model, loader, _ = patchable(key)
        lists = field_lists(key, model)
        for (method, run), ablation in itertools.product((("acdc", acdc_scores), ("eap", eap_scores)),
                                                         ("zero", "resample")):
            scores = run(model, loader, key, ablation)
            if ablation == "zero":
                missed.append(f"{method} on {task}: " + (", ".join(unneeded(lists["zero"], scores, method)) or "none"))
            rows.append(f"| {task} | {method} | {ablation} | {model.n_edges} | "
                        f"{auroc(model, lists[ablation], scores):.3f} | {auroc(model, lists['zero'], scores):.3f} |")
            print(rows[-1], flush=True)
    write_section("The field's code on the ACDC paper's two Tracr tasks (bench/acdc_beside.py)",
                  "auto-circuit 1.0.1's own ACDC and EAP on Tracr's own models (its TransformerLens ports), "
                  "scored by its own ROC code against the field's edge lists, every input of length 5 "
                  "(see the script's docstring).\n\n" + "\n".join(rows) + "\n\n" + EXPLAINED.format(
                      missed="; ".join(missed)))


if __name__ == "__main__":
    main()
