"""The measurement of a compiled model's error against the reference evaluator: the inputs it
runs (random draws from the domain, then its corners), how many fit a fixed budget of work (so
that a compile's bytes do not depend on the clock), the batches that bound its memory, and the
worst error over the inputs the guarantee covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from .. import progress
from ..language import typed as ir
from ..oracle.evaluate import evaluate, retrieval_margin
from ..oracle.sampling import domain_corners, sample_inputs
from ..oracle.tokens import UNDEFINED_ID
from ..transformer.model import CompiledTransformer

DEFAULT_SAMPLES = 10_000  # the most random inputs a budgeted measurement takes (and check's default)
MIN_SAMPLES = 256  # the fewest random inputs a budgeted measurement takes
MEASUREMENT_BUDGET = 4e10  # operations of measurement_cost: about two seconds on a 2-core x86 machine (BENCHMARKS.md)
CORNERS = 256
BATCH_ELEMENTS = 1 << 16  # inputs per forward batch × T
PAIR_ELEMENTS = 1 << 24  # inputs per reference call × T²: bounds its general path's (B, T, T) pair grids
#: inputs per batch × (T+1) × d_model: bounds the residual stream, so that a wide model (the gather
#: route's triangle_center at T = 8 has d_model 2,372) is not measured on 1.4 GB residual tensors
#: (its check spent 7 of its 7.4 minutes in the kernel, mapping and unmapping them)
STREAM_ELEMENTS = 1 << 21
#: inputs per batch × (T+1) × the widest FFN's hidden units: bounds the hidden activations, so that
#: a model of millions of units (a norm reaching 0 at ε = 10⁻³) is measured a few inputs at a time
#: rather than refused for the 33 GB a batch of 21,845 would hold
HIDDEN_ELEMENTS = 1 << 24


def reference_cost(program: ir.Program) -> float:
    """Operations the reference spends on one input, roughly: the evaluator gives every node a
    tensor over the positions it reads (the others broadcast as size-1 axes), so a node that
    reads k position variables and holds n numbers per tuple costs T^k · n, and an expression is
    the sum over its nodes. ``max_<s,t> P + max_<s′,t′> Q`` is 2 T² tuples, not T⁴ (the second
    reduction reads no variable of the first); a per-token target reads its own t too."""
    length = float(program.length)

    def cost(node: object) -> float:
        value_type = getattr(node, "type", None)  # position nodes have none
        numbers = max(1, math.prod(value_type.shape)) if value_type is not None else 1
        return length ** len(ir.free_variables(node)) * numbers + sum(cost(child) for child in ir.children(node))

    return 2.0 * cost(program.target) * (length if program.per_token else 1.0)


@dataclass(frozen=True, kw_only=True)
class ModelSize:
    """What a forward costs, read off a model: its weights (``parameters``), the attention's work
    per (query, key) pair summed over layers and heads (``pair_width``: H·(d_qk + d_v + 8) a layer,
    the 8 for the score's softmax), the residual width and the widest FFN's hidden units, and the
    bytes of one of its numbers."""

    parameters: int
    pair_width: int
    d_model: int
    widest_hidden: int
    itemsize: int


def model_size(model: Any) -> ModelSize:
    """A compiled model's :class:`ModelSize`, or the one an export read back states
    (``ExportedModel.model_size``: measured models are of either kind)."""
    if not isinstance(model, CompiledTransformer):
        return model.model_size()
    pair_width = 0
    for block in model.blocks:
        heads, _, width = block.attn.W_Q.shape  # (H, D, E)
        pair_width += heads * (width + block.attn.W_V.shape[-1] + 8)
    return ModelSize(parameters=model.parameter_count(), pair_width=pair_width, d_model=model.d_model,
                     widest_hidden=max([*model.d_mlp, model.d_mlp_embedding, 1]),
                     itemsize=torch.empty(0, dtype=model.dtype).element_size())


def measurement_cost(model: Any, program: ir.Program) -> float:
    """Floating-point operations to measure one input, roughly: the model's forward (2 per
    weight per token: the forward multiplies dense matrices, zeros included, so a wide FFN costs
    its full width; plus each head's (T+1) × T scores, softmax and values: :class:`ModelSize`)
    and the reference (:func:`reference_cost`)."""
    length, size = program.length, model_size(model)
    forward = 2.0 * (length + 1) * size.parameters + 2.0 * (length + 1) * length * size.pair_width
    return forward + reference_cost(program)


def budgeted_samples(model: CompiledTransformer, program: ir.Program, budget: float = MEASUREMENT_BUDGET) -> int:
    """How many random inputs fit ``budget`` operations: between MIN_SAMPLES and DEFAULT_SAMPLES.

    A count of work, not a clock, so that the same compile always measures the same inputs and
    writes the same bytes."""
    return int(min(DEFAULT_SAMPLES, max(MIN_SAMPLES, budget // measurement_cost(model, program))))


def model_inputs(program: ir.Program, samples: int, seed: int, corners: int = CORNERS) -> torch.Tensor:
    """``samples`` random inputs from the domain, then ``corners`` extreme ones: (N, T, d), float64."""
    parts = [sample_inputs(program, samples, seed=seed)]
    if corners:
        parts.append(domain_corners(program, corners, seed=seed + 1))
    return torch.cat(parts)


def _widest_hidden(model: Any) -> int:
    """The widest FFN's hidden units of a compiled or an exported model (1 for any other module
    measured as a model, which states no FFN)."""
    if isinstance(model, CompiledTransformer) or callable(getattr(model, "model_size", None)):
        return model_size(model).widest_hidden
    return 1


def measurement_batches(model: CompiledTransformer, length: int) -> tuple[int, int]:
    """(inputs per forward, inputs per reference call) when measuring at length T: the forward's
    batch bounds B·T (BATCH_ELEMENTS), the residual stream B·(T+1)·d_model (STREAM_ELEMENTS) and
    the widest FFN's activations B·(T+1)·M (HIDDEN_ELEMENTS);
    its attention is fused, so no (B, H, T+1, T) scores are stored. The reference's batch also
    bounds B·T² (PAIR_ELEMENTS), the size of its general path's pair grids; the forward's batch
    holds several of them (at T = 4096: 16 inputs a forward, one a reference call: 8% faster than
    one input a forward, the per-call overhead of its ~60 operations shared)."""
    hidden = (length + 1) * _widest_hidden(model)
    forward = max(1, min(BATCH_ELEMENTS // length, STREAM_ELEMENTS // ((length + 1) * model.d_model),
                         HIDDEN_ELEMENTS // hidden))
    return forward, max(1, min(forward, PAIR_ELEMENTS // length**2))


def errors_on(model: CompiledTransformer, program: ir.Program, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(|model − reference| per input (max over output components), kept) where ``kept`` marks
    the inputs the guarantee covers (best score ahead by the margin, for token retrievals).
    For a per-token target the error of an input is its largest over the positions where the
    target is defined and, with a margin, where that position's retrieval clears it. A NaN or
    infinite output where the reference is defined has error +inf: the worst there is."""
    error, kept = position_errors(model, program, x)
    if error.dim() == 1:
        return error, kept
    return torch.where(kept, error, 0.0).amax(dim=1), kept.any(dim=1)


def model_and_reference(model: CompiledTransformer, program: ir.Program,
                        x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the model's outputs in float64 on the CPU, the reference's) on inputs x: vectors
    (N, T, d), or a token program's ids (N, T'), which the model reads as they are (int64).

    Both in batches (:func:`measurement_batches`), written in place into one (N, ...) tensor
    each: kept in lists, the small results interleaved with the batches' large temporaries
    fragmented the heap (+3 MB an input at T = 4096)."""
    length = max(x.shape[1], 1)
    forward_batch, reference_batch = measurement_batches(model, length)
    predicted = truth = torch.empty(0)
    with torch.no_grad():
        for start in range(0, x.shape[0], forward_batch):
            chunk = x[start:start + forward_batch]
            inputs = chunk.to(model.device) if program.over_tokens else chunk.to(model.device, model.dtype)
            y = model(inputs).to("cpu", torch.float64)
            if start == 0:
                predicted = y.new_empty(x.shape[0], *y.shape[1:])
            predicted[start:start + forward_batch] = y
            progress.advance(chunk.shape[0])
            for part in range(start, start + chunk.shape[0], reference_batch):
                r = evaluate(program, x[part:min(part + reference_batch, start + chunk.shape[0])])
                if part == 0:
                    truth = r.new_empty(x.shape[0], *r.shape[1:])
                truth[part:part + r.shape[0]] = r
    return predicted, truth


def wrong_answers(scores: torch.Tensor, truth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A token output's (wrong, defined), bool, each shaped as ``truth``: the model's answer is
    the argmax of its V scores (``scores`` (..., V); the smallest id on a tie, as ``argmax``
    returns the first maximum), wrong where it differs from the reference's id ``truth`` (...)
    at a defined site (``truth`` ≠ UNDEFINED_ID); a site with a NaN or infinite score is wrong."""
    defined = truth != UNDEFINED_ID
    broken = ~scores.isfinite().all(dim=-1)  # a NaN or infinite score answers nothing
    return defined & ((scores.argmax(dim=-1) != truth) | broken), defined


def answer_margins(scores: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """A token output's margin at every site: the reference token's score minus the best other
    token's, float64 shaped as ``truth`` (+inf where undefined, or with V = 1; −inf where a
    score is NaN). Positive everywhere iff every answer is right with no tie."""
    defined = truth != UNDEFINED_ID
    index = truth.clamp_min(0).unsqueeze(-1)  # (..., 1)
    right = scores.gather(-1, index)  # (..., 1)
    others = scores.scatter(-1, index, -torch.inf).amax(dim=-1)  # (...,)
    margin = (right.squeeze(-1) - others).nan_to_num(nan=-torch.inf, posinf=torch.inf)
    return torch.where(defined, margin, torch.inf)


def position_errors(model: CompiledTransformer, program: ir.Program,
                    x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Like :func:`errors_on`, but a per-token target's errors and coverage per position:
    (N, T) each (an undefined position has error 0 and is not kept); (N,) for sequence targets.

    A token output's error at a site is 0 where the answer (argmax of the scores) is the
    reference's token and 1 where it is not (:func:`wrong_answers`): the distance between two
    tokens of a categorical vocabulary, so the error is at most any ε < 1 exactly when every
    answer is right."""
    predicted, truth = model_and_reference(model, program, x)
    if program.token_output:
        wrong, defined = wrong_answers(predicted, truth)
        return wrong.to(torch.float64), defined
    error = (predicted - truth).abs()
    error = torch.where(predicted.isfinite() | truth.isnan(), error, torch.inf)  # a NaN or ±inf output: the worst
    if program.per_token:
        defined = ~truth.isnan()
        error = torch.where(defined, error, 0.0)
        if error.dim() > 2:
            error, defined = error.amax(dim=-1), defined.all(dim=-1)  # (N, T)
    elif error.dim() > 1:
        error = error.amax(dim=-1)
    kept = defined if program.per_token else torch.ones(x.shape[0], dtype=torch.bool)
    if program.margin is not None:
        kept = kept & (retrieval_margin(program, x) >= program.margin)
    return error, kept


def measure_vectors(model: CompiledTransformer, program: ir.Program, samples: int = DEFAULT_SAMPLES,
                    seed: int = 0) -> dict[str, Any]:
    """The worst error of a model over vectors on ``samples`` random inputs and the domain's
    corners (inputs under the declared margin left out), as stored in its config."""
    return vector_measurement(model, program, samples, seed)[0]


def vector_measurement(model: CompiledTransformer, program: ir.Program, samples: int = DEFAULT_SAMPLES,
                       seed: int = 0) -> tuple[dict[str, Any], float, torch.Tensor]:
    """(the stored record, the worst error unrounded, the worst input (T, d)) of
    :func:`measure_vectors`."""
    x = model_inputs(program, samples, seed)
    progress.stage("measuring the error", total=x.shape[0], unit="input")
    error, kept = errors_on(model, program, x)
    masked = torch.where(kept, error, -torch.inf)
    index = int(masked.argmax()) if bool(kept.any()) else 0
    worst = float(error[index]) if bool(kept.any()) else 0.0
    record = {"max_error": float(f"{worst:.3g}"), "samples": samples, "corners": CORNERS, "seed": seed,
              "excluded_by_margin": int((~kept).sum())}
    return record, worst, x[index]
