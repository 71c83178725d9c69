"""``check``: verify a compiled model against its target, adversarially, and explain divergences.

A model file carries its program's source; :func:`~infoflow_dsl.pipeline.reading.program_of` rebuilds
the reference from it, so a file can be checked by someone who only has the file.
:func:`check_model` evaluates random inputs from the declared domain, the domain's corners, and
near-tie inputs (one token copied onto another with a tiny perturbation, so two scores nearly
tie), then optionally runs a hypothesis search that maximises the error (``hypothesis.target``)
starting from the worst inputs found. Inputs under a declared margin (token retrieval) are
outside the guarantee and are left out.

:func:`trace` explains where a model departs from its circuit: the program is lowered again
(:func:`~infoflow_dsl.pipeline.reading.relower`: the same ε, dtype and routes give the same circuit) and
assembled in float64; then, layer by layer, the model's layer and the circuit's layer are
applied to the *model's own* residual stream (so differences do not compound) and compared
direction by direction. Everything the circuit does by design
(interpolation, Gibbs means) is in both, so a gap beyond the dtype's rounding means the weights
are not the circuit's: the first such gap names the direction, the layer, the token and the
head or FFN block that writes that direction.
"""

from __future__ import annotations

import contextlib
import math
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..compiler.assemble import assemble
from ..language import typed as ir
from ..measure.vectors import CORNERS, errors_on, model_inputs, position_errors
from ..measure.workload import Workload, continuous_workload, unless_fixed
from ..oracle.sampling import domain_corners, sample_inputs
from ..pipeline.reading import relower
from ..progress import advance, stage
from ..progress import shown as show_progress
from ..transformer.card import ModelCard
from ..transformer.model import (
    CompiledTransformer,
    attention_pattern,
    embedded,
    head_masks,
    masked_scores,
    merge_heads,
    mlp_block,
    project_heads,
)

INPUT_CHUNK = 1 << 22  # numbers (inputs × T × d) per chunk of check's inputs: 32 MiB in float64
ROUNDING = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}
TRACE_SLACK = 64.0  # rounding units a layer may differ by, relative to the direction's scale


# ----------------------------------------------------------------------------- inputs


def near_ties(program: ir.Program, count: int, seed: int) -> torch.Tensor:
    """Random inputs where one token is a copy of another up to 1e-6 of the domain's width."""
    x = model_inputs(program, count, seed, corners=0)
    if program.length < 2 or count == 0:
        return x
    generator = torch.Generator().manual_seed(seed + 17)
    source = torch.randint(0, program.length, (count,), generator=generator)
    shift = torch.randint(1, program.length, (count,), generator=generator)
    target = (source + shift) % program.length
    rows = torch.arange(count)
    width = _domain_width(program)
    noise = (torch.rand((count, program.dimension), generator=generator, dtype=torch.float64) - 0.5) * 2e-6 * width
    x[rows, target] = x[rows, source] + noise
    return clip_to_domain(program, x)


def _domain_width(program: ir.Program) -> float:
    domain = program.domain
    return domain.high - domain.low if isinstance(domain, ir.Box) else 2 * domain.radius


def clip_to_domain(program: ir.Program, x: torch.Tensor) -> torch.Tensor:
    domain = program.domain
    if isinstance(domain, ir.Box):
        return x.clamp(domain.low, domain.high)
    norms = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x * torch.clamp(domain.radius / norms.clamp_min(1e-300), max=1.0)


# ----------------------------------------------------------------------------- checking


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """What ``infoflowc check`` reports."""

    eps: float
    worst_error: float
    worst_input: torch.Tensor  # (T, d)
    random_worst: float  # over random inputs, corners and near ties alone
    evaluated: int
    excluded_by_margin: int
    adversarial_examples: int
    adversarial_worst: float | None
    worst_position: int | None = None  # per-token targets: the 1-based position of the worst error

    @property
    def within(self) -> bool:
        return self.worst_error <= self.eps


def check_inputs(program: ir.Program, samples: int, seed: int) -> Iterator[torch.Tensor]:
    """The inputs ``check`` evaluates, in chunks of at most INPUT_CHUNK numbers each (so that a
    T = 4096 check never holds all its inputs at once): ``samples`` random inputs, the CORNERS
    corners, then max(samples/10, 16) near ties. The first chunk of each kind uses the seed as
    given (a check that fits one chunk draws what ``model_inputs`` draws); later chunks use
    seeds derived from it."""
    step = max(1, INPUT_CHUNK // (program.length * program.dimension))
    for index, start in enumerate(range(0, samples, step)):
        yield sample_inputs(program, min(step, samples - start), seed=_chunk_seed(seed, index))
    yield domain_corners(program, CORNERS, seed=seed + 1)
    ties = max(samples // 10, 16)
    for index, start in enumerate(range(0, ties, step)):
        yield near_ties(program, min(step, ties - start), _chunk_seed(seed + 3, index))


def check_workload(model: CompiledTransformer, program: ir.Program, samples: int, adversarial: int) -> Workload:
    """What :func:`check_model` will cost (:mod:`~infoflow_dsl.measure.workload`): its random
    inputs, corners, near ties and adversarial examples (one input each), a chunk of inputs and
    the corners held at once. What to change: fewer inputs, or (when even one random input is
    too much: the corners and near ties are always checked) a model of a smaller T."""

    def workload(count: int, examples: int, change: str) -> Workload:
        chunk = max(1, INPUT_CHUNK // (program.length * program.dimension))
        inputs = count + CORNERS + max(count // 10, 16) + examples
        what = f"checking {count:,} random input{'s' if count != 1 else ''}, {CORNERS} corners and the near ties"
        return continuous_workload(model, program, inputs, max(min(chunk, count), CORNERS), what, change)

    return unless_fixed(workload(samples, adversarial, "lower --samples or --adversarial"), workload(1, 0, ""),
                        f"even one random input is too much (the {CORNERS} corners and the near ties are always "
                        f"checked): check a model compiled for a smaller T")


def _chunk_seed(seed: int, index: int) -> int:
    return seed if index == 0 else seed + 1_000_003 * index


def check_model(model: CompiledTransformer, program: ir.Program, samples: int = 10_000, eps: float | None = None,
                seed: int = 0, adversarial: int = 0, progress: bool = True) -> CheckResult:
    """Measure ``model`` against ``program``'s reference (see the module docstring). A token
    program's inputs are finite (no corners, near ties or continuous search): its models are
    measured by :func:`~infoflow_dsl.measure.tokens.measure_tokens` (ValueError here)."""
    if program.over_tokens:
        raise ValueError("check_model draws continuous inputs; a token model is checked by "
                         "infoflow_dsl.measure.tokens.measure_tokens")
    check_workload(model, program, samples, adversarial).refuse_if_unaffordable()
    with show_progress("check") if progress else contextlib.nullcontext():
        return _check(model, program, samples, float((model.card.eps or 0.0) if eps is None else eps), seed,
                      adversarial)


def _check(model: CompiledTransformer, program: ir.Program, samples: int, eps: float, seed: int,
           adversarial: int) -> CheckResult:
    total = samples + CORNERS + max(samples // 10, 16)
    stage("checking random inputs, corners and near ties", total=total, unit="input")
    worst, worst_input, excluded, done = -1.0, torch.empty(0), 0, 0
    starts = torch.empty(0, program.length, program.dimension, dtype=torch.float64)  # the 16 worst so far
    start_errors = torch.empty(0, dtype=torch.float64)
    for x in check_inputs(program, samples, seed):
        error, kept = errors_on(model, program, x)
        masked = torch.where(kept, error, torch.zeros_like(error))  # (n,)
        index = int(masked.argmax())
        if float(masked[index]) > worst:
            worst, worst_input = float(masked[index]), x[index]
        excluded += int((~kept).sum())
        start_errors, order = torch.cat([start_errors, masked]).sort(descending=True, stable=True)
        starts, start_errors = torch.cat([starts, x])[order[:16]], start_errors[:16]
        done += x.shape[0]  # the display counts the inputs as the model runs them (measure.model_and_reference)
    random_worst, adversarial_worst = worst, None
    if adversarial > 0:
        found, found_input = adversarial_search(model, program, starts, adversarial, seed)
        adversarial_worst = found
        if found > worst:
            worst, worst_input = found, found_input
    return CheckResult(eps=eps, worst_error=worst, worst_input=worst_input, random_worst=random_worst,
                       evaluated=done, excluded_by_margin=excluded,
                       adversarial_examples=adversarial if adversarial > 0 else 0,
                       adversarial_worst=adversarial_worst, worst_position=worst_position(model, program, worst_input))


def worst_position(model: CompiledTransformer, program: ir.Program, x: torch.Tensor) -> int | None:
    """For a per-token target, the 1-based position of the largest covered error on the one
    input ``x`` (T, d); None for a sequence target."""
    if not program.per_token:
        return None
    error, kept = position_errors(model, program, x[None])
    return int(torch.where(kept, error, -1.0)[0].argmax()) + 1


def adversarial_search(model: CompiledTransformer, program: ir.Program, starts: torch.Tensor, budget: int,
                       seed: int = 0) -> tuple[float, torch.Tensor]:
    """A hypothesis search for a large error near ``starts`` (the worst inputs so far).

    Each example perturbs one start by δ·10^(−k)·(domain width) per coordinate, k drawn from
    1..7; ``hypothesis.target`` steers the search toward larger errors. Deterministic for a seed.
    """
    from hypothesis import HealthCheck, Phase, given, settings, target
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    size = program.length * program.dimension
    width = _domain_width(program)
    best: list[Any] = [0.0, starts[0]]
    stage("searching for larger errors (hypothesis)", total=budget, unit="example")

    @hypothesis_seed(seed)
    @settings(max_examples=budget, deadline=None, database=None, phases=[Phase.generate, Phase.target],
              suppress_health_check=list(HealthCheck))
    @given(start=st.integers(0, starts.shape[0] - 1), exponent=st.integers(1, 7),
           direction=st.lists(st.floats(-1.0, 1.0), min_size=size, max_size=size))
    def search(start: int, exponent: int, direction: list[float]) -> None:
        delta = torch.tensor(direction, dtype=torch.float64).reshape(program.length, program.dimension)
        candidate = clip_to_domain(program, starts[start] + delta * width * 10.0 ** (-exponent))[None]
        error, kept = errors_on(model, program, candidate)
        value = float(error[0]) if bool(kept[0]) else 0.0
        target(value if math.isfinite(value) else sys.float_info.max, label="error")  # NaN/inf output: the worst
        advance()
        if value > best[0]:
            best[0], best[1] = value, candidate[0]

    with _scratch_hypothesis_home():
        search()
    return best[0], best[1]


@contextlib.contextmanager
def _scratch_hypothesis_home() -> Iterator[None]:
    """Hypothesis caches what it learns (``constants/``) under ``.hypothesis/`` in the current
    folder; the search keeps nothing, so that folder is a temporary one for its duration (the
    caller's setting restored after)."""
    from hypothesis import configuration

    previous = vars(configuration).get("__hypothesis_home_directory")
    with tempfile.TemporaryDirectory(prefix="infoflow-hypothesis-") as scratch:
        configuration.set_hypothesis_home_dir(scratch)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(previous)


# ----------------------------------------------------------------------------- tracing


@dataclass(frozen=True)
class Divergence:
    """Where a model first departs from its circuit."""

    layer: int  # 0: the embedding; l: after block l (1-based); L+1: the unembedding
    direction: str
    token: int  # 1-based position; T'+1 is the readout token
    model_value: float
    circuit_value: float
    tolerance: float
    writer: str

    def describe(self) -> str:
        where = "the embedding" if self.layer == 0 else f"layer {self.layer}"
        return (f"first divergence at {where}, direction {self.direction}, token {self.token}: the model holds "
                f"{self.model_value:.6g}, the circuit {self.circuit_value:.6g} (tolerance {self.tolerance:.2g}); "
                f"written by {self.writer}")


def circuit_model(model: CompiledTransformer, program: ir.Program) -> CompiledTransformer:
    """The model's circuit (``program`` lowered again as the model was: :func:`relower`),
    assembled in float64."""
    card, tensors = assemble(relower(model, program).circuit, torch.float64)
    return CompiledTransformer(card, tensors, device="cpu", dtype=torch.float64)


def writers(card: ModelCard) -> dict[tuple[int, str], str]:
    """(layer, direction) -> the head or FFN block that writes it, from the model's card."""
    out: dict[tuple[int, str], str] = {}
    for block in card.embedding_blocks:
        out[(0, block.output)] = f"the embedding's FFN block {block.name} ({block.computes})"
    for index, layer in enumerate(card.layers):
        for head in layer.heads:
            for direction in head.outputs or ():
                out[(index + 1, direction)] = f"head {head.name} of layer {index + 1} ({head.computes or ''})"
        for block in layer.blocks:
            out[(index + 1, block.output)] = f"FFN block {block.name} of layer {index + 1} ({block.computes})"
    return out


def _attention_parts(m: CompiledTransformer, layer: int, h: torch.Tensor, attn: torch.Tensor | None = None,
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits β·q·k, attention, output Σ_h z W_O, the scale |q|·|k|) of one layer of ``m`` on
    h (B, T'+1, D) in ``m``'s dtype; with ``attn`` given, that pattern replaces ``m``'s own."""
    a = m.blocks[layer].attn
    h = h.to(m.dtype)
    length = h.shape[1] - 1
    tokens = h[:, :length]
    q = project_heads(h, a.W_Q)  # (B, H, T'+1, E)
    k = project_heads(tokens, a.W_K)  # (B, H, T', E)
    v = project_heads(tokens, a.W_V)  # (B, H, T', V)
    magnitude = q.abs() @ k.abs().transpose(-1, -2)  # (B, H, T'+1, T')
    logits = (q * a.beta[:, None, None]) @ k.transpose(-1, -2)  # (B, H, T'+1, T')  (β q)·k, as the model
    if attn is None:
        attn = attention_pattern(*masked_scores(logits, head_masks(m, layer, length)))  # (B, H, T'+1, T')
    out = merge_heads(attn.to(m.dtype) @ v, a.W_O)  # (B, T'+1, D)
    return logits.to(torch.float64), attn, out.to(torch.float64), magnitude.to(torch.float64)


def _head_gap(model: CompiledTransformer, layer: int, mine: torch.Tensor, theirs: torch.Tensor,
              magnitude: torch.Tensor, slack: float) -> Divergence | None:
    """Scores β·q·k that differ beyond rounding: the head's W_Q, W_K or β are not the circuit's."""
    allowed = head_masks(model, layer, mine.shape[-1])[None].expand_as(mine)
    beta = model.blocks[layer].attn.beta.to(torch.float64).abs()[None, :, None, None]
    # a head with β = 0 (uniform, or a masked fetch) scores 0 whatever its W_Q, W_K: nothing to compare
    tolerance = (slack * beta * (magnitude + 1.0)).clamp_min(torch.finfo(torch.float64).tiny)
    excess = torch.where(allowed, (mine - theirs).abs() / tolerance, torch.zeros_like(mine))
    if float(excess.max()) <= 1.0:
        return None
    batch, head, query, key = (int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
    name = model.spec.head_names[layer][head]
    return Divergence(layer + 1, f"score of head {name} (key {key + 1})", query + 1,
                      float(mine[batch, head, query, key]), float(theirs[batch, head, query, key]),
                      float(tolerance[batch, head, query, key]),
                      f"head {name} of layer {layer + 1} (its W_Q, W_K or β)")


def trace(model: CompiledTransformer, program: ir.Program, x: torch.Tensor,
          reference: CompiledTransformer | None = None) -> Divergence | None:
    """The first place where ``model`` departs from its circuit on inputs x (B, T', d), or None."""
    reference = circuit_model(model, program) if reference is None else reference
    labels = list(model.card.labels)
    if list(reference.card.labels) != labels:
        return Divergence(0, "(layout)", 0, 0.0, 0.0, 0.0, "the file: its residual directions are not the ones its "
                                                             "program compiles to")
    slack = TRACE_SLACK * ROUNDING[model.dtype]
    who = writers(model.card)
    explicit = model.explicit_attention
    model.explicit_attention = True  # the explicit scores and z = pattern·v, as _attention_parts computes them
    try:
        with torch.no_grad():
            return _trace_layers(model, reference, x, slack, labels, who)
    finally:
        model.explicit_attention = explicit


def _trace_layers(model: CompiledTransformer, reference: CompiledTransformer, x: torch.Tensor, slack: float,
                  labels: list[str], who: dict[tuple[int, str], str]) -> Divergence | None:
    """The body of :func:`trace`, with the model's attention computed explicitly."""
    raw = model.residual_stream(x)  # L+1 streams (B, T'+1, D) in the model's dtype
    actual = [h.to(torch.float64) for h in raw]
    embedded_input = embedded(reference, x if model.token_input else x.to(torch.float64))
    found = _first_gap(actual[0], embedded_input, slack, labels, 0, who)
    if found is not None:
        return found
    for layer in range(model.n_layers):
        found = _layer_gap(model, reference, layer, raw[layer], raw[layer + 1], slack, labels, who)
        if found is not None:
            return found
    y_model = model(x).to(torch.float64).reshape(x.shape[0], -1)
    y_circuit = reference.readout(actual[-1]).reshape(x.shape[0], -1)
    gap = (y_model - y_circuit).abs()
    tolerance = slack * (1.0 + float(y_circuit.abs().max()))
    if float(gap.max()) > tolerance:
        flat = int(gap.argmax())
        row, column = divmod(flat, gap.shape[1])
        return Divergence(model.n_layers + 1, f"output[{column + 1}]", x.shape[1] + 1,
                          float(y_model[row, column]), float(y_circuit[row, column]), tolerance,
                          "the unembedding W_U, b_U")
    return None


def _first_gap(mine: torch.Tensor, theirs: torch.Tensor, slack: float, labels: list[str], layer: int,
               who: dict[tuple[int, str], str]) -> Divergence | None:
    scale = theirs.abs().amax(dim=(0, 1)).clamp_min(1.0)  # (D,) each direction's scale
    excess = (mine - theirs).abs() / (slack * scale)  # (B, T'+1, D)
    if float(excess.max()) <= 1.0:
        return None
    _, tokens, size = excess.shape
    flat = int(excess.reshape(-1).argmax())
    row, rest = divmod(flat, tokens * size)
    token, direction = divmod(rest, size)
    label = labels[direction]
    writer = who.get((layer, label), "the embedding" if layer == 0 else f"no head or FFN block of layer {layer} "
                                                                          f"(a weight that should be zero)")
    return Divergence(layer, label, token + 1, float(mine[row, token, direction]),
                      float(theirs[row, token, direction]), float(slack * scale[direction]), writer)


def format_input(x: torch.Tensor, limit: int = 8) -> str:
    """A readable rendering of one input (T, d), eliding the middle of long sequences."""
    rows = [f"  x({t + 1}) = [{', '.join(f'{v:.6g}' for v in x[t].tolist())}]" for t in range(x.shape[0])]
    if len(rows) > limit:
        rows = [*rows[: limit // 2], f"  ... ({len(rows) - limit} more)", *rows[-limit // 2:]]
    return "\n".join(rows)



def _layer_gap(model: CompiledTransformer, reference: CompiledTransformer, layer: int, before: torch.Tensor,
               after: torch.Tensor, slack: float, labels: list[str],
               who: dict[tuple[int, str], str]) -> Divergence | None:
    """Layer ``layer`` of the model against the circuit's, both applied to the model's own stream
    ``before``: first the scores, then the attention output computed with the model's pattern
    (so exact ties, which rounding may split either way, stay the same), then the FFN."""
    middle = before
    if model._masks[layer]:
        mine, pattern, out_mine, _ = _attention_parts(model, layer, before)
        theirs, _, out_theirs, magnitude = _attention_parts(reference, layer, before.to(torch.float64), pattern)
        found = _head_gap(model, layer, mine, theirs, magnitude, slack)
        if found is not None:
            return found
        middle = before + out_mine.to(model.dtype)
        found = _first_gap(middle.to(torch.float64), before.to(torch.float64) + out_theirs, slack, labels,
                           layer + 1, who)
        if found is not None:
            return found
    stream = middle.to(torch.float64)
    expected = stream + mlp_block(reference.blocks[layer].mlp, stream)
    return _first_gap(after.to(torch.float64), expected, slack, labels, layer + 1, who)
