"""The measurement of a token model (language v3) against the reference evaluator.

A token program's inputs are finite: sequences of ids of any length 1..T. The measurement runs

- every sequence of the shortest lengths, 1, 2, ..., as long as they fit EXHAUSTIVE sequences
  in all (V = 3, T ≥ 4: the 3 + 9 + 27 + 81 = 120 sequences of lengths 1..4),
- the **constant** sequences of every longer length (one token repeated: V per length), the
  token analogue of the domain's corners: every count at its extreme, every score tied, every
  retrieval's tie-break on the smallest position at work, and
- ``samples`` uniformly random sequences (:func:`~infoflow_dsl.oracle.tokens.random_ids`),
  their lengths drawn uniformly from 1..T, so that every length is tried and lengths mix;

each length in batches of its own (a batch has one length). The error at an output site (a
position where a per-token target is defined, or the sequence's one output):

- a numeric output: |model − reference| (the largest over its K components);
- a token output: the answer is the argmax of the V scores (the smallest id on a tie), right
  where it is the reference's token: error 0 where right, 1 where wrong
  (:func:`~infoflow_dsl.measure.vectors.wrong_answers`), and the **margin**, the right token's
  score minus the best other token's (:func:`~infoflow_dsl.measure.vectors.answer_margins`).
  A token model passes only if every answer is right (accuracy 1).

No margin excludes any input: on a finite vocabulary the guarantee is exact on every input
(docs/language.md, "Tokens (v3)"), so no input is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..language import typed as ir
from ..oracle.tokens import random_ids
from ..transformer.model import CompiledTransformer
from .vectors import answer_margins, model_and_reference, wrong_answers

EXHAUSTIVE = 256  # the most sequences of the exhaustive short lengths
CHUNK_TOKENS = 1 << 20  # ids (sequences × length) per measured chunk


INPUT_KINDS = ("exhaustive", "constant", "random")


@dataclass(frozen=True)
class TokenInputs:
    """The sequences of one length measured together: ids (N, length) int64, and their ``kind``
    (:data:`INPUT_KINDS`): all the sequences of that length, its V constant ones, or random ones."""

    ids: torch.Tensor
    kind: str


def exhaustive_lengths(program: ir.Program, limit: int = EXHAUSTIVE) -> int:
    """The longest L such that every sequence of lengths 1..L, V + V² + ... + V^L of them, fits
    ``limit`` (0 when even the V sequences of length 1 do not)."""
    size, total, length = program.token_vocabulary.size, 0, 0
    while length < program.length and total + size ** (length + 1) <= limit:
        length += 1
        total += size**length
    return length


def every_sequence(size: int, length: int) -> torch.Tensor:
    """All V^length sequences of ids, in lexicographic order: (V^length, length) int64."""
    digits = torch.arange(size**length, dtype=torch.int64).unsqueeze(1)  # (V^L, 1)
    powers = size ** torch.arange(length - 1, -1, -1, dtype=torch.int64)  # (L,) most significant first
    return (digits // powers) % size


def constant_sequences(size: int, length: int) -> torch.Tensor:
    """The V sequences that repeat one token: (V, length) int64, row v all v."""
    return torch.arange(size, dtype=torch.int64).unsqueeze(1).expand(size, length).contiguous()


def random_lengths(program: ir.Program, samples: int, seed: int) -> list[int]:
    """How many of ``samples`` random sequences have each length 1..T (index L−1): lengths drawn
    uniformly and independently, seeded."""
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.randint(1, program.length + 1, (samples,), generator=generator)
    return torch.bincount(drawn, minlength=program.length + 1)[1:].tolist()


def token_inputs(program: ir.Program, samples: int, seed: int, limit: int = EXHAUSTIVE) -> Iterator[TokenInputs]:
    """What :func:`measure_tokens` runs (see the module docstring), in chunks of at most
    CHUNK_TOKENS ids (or one sequence), made one at a time: the exhaustive short lengths first,
    the constant sequences of the longer lengths, then the random sequences by length (each
    length's chunks from seeds derived from ``seed`` and the length)."""
    size, short = program.token_vocabulary.size, exhaustive_lengths(program, limit)
    for length in range(1, short + 1):
        yield TokenInputs(every_sequence(size, length), "exhaustive")
    for length in range(short + 1, program.length + 1):
        yield TokenInputs(constant_sequences(size, length), "constant")
    for length, count in enumerate(random_lengths(program, samples, seed), start=1):
        step = max(1, CHUNK_TOKENS // length)
        for index, start in enumerate(range(0, count, step)):
            chunk_seed = seed + 1_000_003 * length + 7_919 * index
            yield TokenInputs(random_ids(program, min(step, count - start), chunk_seed, length), "random")


def largest_part(program: ir.Program, limit: int = EXHAUSTIVE) -> int:
    """The most ids one part of :func:`token_inputs` holds: the longest exhaustive length's
    V^L·L, a constant part's V·T, or a random chunk's CHUNK_TOKENS (one sequence of T at least)."""
    size, short = program.token_vocabulary.size, exhaustive_lengths(program, limit)
    return max(size**short * short, size * program.length, CHUNK_TOKENS, program.length)


@dataclass(frozen=True)
class TokenMeasurement:
    """A token model measured on :func:`token_inputs`.

    ``inputs`` sequences (``exhaustive`` of them every sequence of lengths 1..``exhaustive_length``,
    ``constant`` the constant sequences of the longer lengths, ``samples`` random ones),
    ``sites`` output sites where the target is defined. ``max_error``: the worst error over the
    sites (a token output: 1 if any answer is wrong, else 0); for a token output, ``wrong``
    sites answered wrong (on ``wrong_inputs`` sequences) and ``min_margin``, the smallest margin
    (None for a numeric output, or with no defined site). ``worst_ids`` is the sequence of the
    worst site (the first wrong answer, else the smallest margin; numeric: the largest error)
    and ``worst_position`` its 1-based position (None for a sequence target); ``worst_answer``
    and ``worst_reference`` the model's and the reference's value there (ids for a token output)."""

    token_output: bool
    inputs: int
    exhaustive: int
    exhaustive_length: int
    constant: int
    samples: int
    seed: int
    sites: int
    max_error: float
    wrong: int
    wrong_inputs: int
    min_margin: float | None
    worst_ids: torch.Tensor
    worst_position: int | None
    worst_answer: float
    worst_reference: float

    @property
    def accuracy(self) -> float:
        """The fraction of defined sites answered right (1.0 with none)."""
        return 1.0 - self.wrong / self.sites if self.sites else 1.0

    def passes(self, eps: float) -> bool:
        """A token output passes when every answer is right; a numeric one when max_error ≤ ε."""
        return self.wrong == 0 if self.token_output else self.max_error <= eps

    def to_json(self) -> dict[str, Any]:
        """What a model's config stores as its ``measured_error``: the keys of a model over
        vectors (``max_error``, ``samples``, ``seed``, ``excluded_by_margin``; ``corners`` the
        constant sequences, the corners' analogue) and the token measurement's."""
        record: dict[str, Any] = {
            "max_error": float(f"{self.max_error:.3g}"), "samples": self.samples, "corners": self.constant,
            "seed": self.seed,
            "excluded_by_margin": 0, "inputs": self.inputs, "exhaustive": self.exhaustive,
            "exhaustive_length": self.exhaustive_length, "sites": self.sites,
        }
        if self.token_output:
            margin = None if self.min_margin is None or not math.isfinite(self.min_margin) else float(
                f"{self.min_margin:.3g}")
            record |= {"wrong": self.wrong, "accuracy": self.accuracy, "min_margin": margin}
        return record


@dataclass
class _Worst:
    """The running worst site: its key (larger is worse), sequence, position and values."""

    key: float = -math.inf
    ids: torch.Tensor | None = None
    position: int | None = None
    answer: float = math.nan
    reference: float = math.nan


def site_keys(program: ir.Program, predicted: torch.Tensor, truth: torch.Tensor,
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(error, defined, margin, badness, answer) per site, each (N,) or (N, T'): the error of
    :func:`~.measure.position_errors`; ``margin`` (+inf for numeric outputs); ``badness`` ranks
    the sites for the worst one (a wrong answer first, then the smallest margin; numeric: the
    error; −inf at undefined sites); ``answer`` the model's value (an id for a token output, the
    first component for a vector output)."""
    if program.token_output:
        wrong, defined = wrong_answers(predicted, truth)
        margin = answer_margins(predicted, truth)
        badness = torch.where(defined, wrong.to(torch.float64) * 2.0 ** 60 - margin.clamp(-2.0 ** 59, 2.0 ** 59),
                              -torch.inf)
        return wrong.to(torch.float64), defined, margin, badness, predicted.argmax(dim=-1).to(torch.float64)
    defined = ~truth.isnan()
    error = torch.where(defined, (predicted - truth).abs(), 0.0)
    answer = predicted
    if program.output_shape:  # (..., K): the worst component, and the site defined where all are
        error, defined, answer = error.amax(dim=-1), defined.all(dim=-1), predicted[..., 0]
    margin = torch.full_like(error, torch.inf)
    return error, defined, margin, torch.where(defined, error, -torch.inf), answer


def measure_tokens(model: CompiledTransformer, program: ir.Program, samples: int, seed: int = 0,
                   limit: int = EXHAUSTIVE) -> TokenMeasurement:
    """Measure a token model on :func:`token_inputs` (see the module docstring)."""
    if not program.over_tokens or not model.token_input:
        raise ValueError("measure_tokens measures a token model of a token program")
    inputs = sites = wrong = wrong_inputs = 0
    counts = dict.fromkeys(INPUT_KINDS, 0)
    max_error, min_margin, worst = 0.0, math.inf, _Worst()
    for part in token_inputs(program, samples, seed, limit):
        predicted, truth = model_and_reference(model, program, part.ids)
        error, defined, margin, badness, answer = site_keys(program, predicted, truth)
        inputs += part.ids.shape[0]
        counts[part.kind] += part.ids.shape[0]
        sites += int(defined.sum())
        if bool(defined.any()):
            max_error = max(max_error, float(error[defined].max()))
            min_margin = min(min_margin, float(margin[defined].min()))
        wrong_at = (error > 0) & defined if program.token_output else torch.zeros_like(defined)
        wrong += int(wrong_at.sum())
        wrong_inputs += int(wrong_at.reshape(wrong_at.shape[0], -1).any(dim=1).sum())
        flat = int(badness.reshape(-1).argmax()) if badness.numel() else 0
        if badness.numel() and float(badness.reshape(-1)[flat]) > worst.key:
            row, position = divmod(flat, badness.shape[1]) if badness.dim() == 2 else (flat, None)
            site = (row,) if position is None else (row, position)
            reference = truth[site] if truth.dim() == badness.dim() else truth[site][0]
            worst = _Worst(float(badness.reshape(-1)[flat]), part.ids[row].clone(),
                           None if position is None else position + 1, float(answer[site]), float(reference))
    has_margin = program.token_output and sites > 0
    return TokenMeasurement(
        token_output=program.token_output, inputs=inputs, exhaustive=counts["exhaustive"],
        exhaustive_length=exhaustive_lengths(program, limit), constant=counts["constant"], samples=samples,
        seed=seed, sites=sites,
        max_error=max_error, wrong=wrong, wrong_inputs=wrong_inputs, min_margin=min_margin if has_margin else None,
        worst_ids=worst.ids if worst.ids is not None else torch.zeros(0, dtype=torch.int64),
        worst_position=worst.position, worst_answer=worst.answer, worst_reference=worst.reference)
