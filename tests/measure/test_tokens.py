"""The measurement of token models (infoflow_dsl/measure/tokens.py): the inputs it runs
(every short sequence, random ids of every length), and its verdicts on hand-built models, right
and wrong, against counts derived from the reference evaluator and the inputs themselves."""

from __future__ import annotations

import itertools

import pytest
import torch
from handmade_models import TOKEN_SOURCES, token_model, token_program

from infoflow_dsl.measure.measurement import measure_error
from infoflow_dsl.measure.tokens import (
    TokenMeasurement,
    every_sequence,
    exhaustive_lengths,
    measure_tokens,
    random_lengths,
    token_inputs,
)
from infoflow_dsl.oracle.evaluate import evaluate
from infoflow_dsl.oracle.tokens import UNDEFINED_ID


@pytest.mark.parametrize(("size", "length"), [(1, 3), (2, 1), (3, 4), (4, 2)])
def test_every_sequence_lists_all_sequences_in_lexicographic_order(size: int, length: int) -> None:
    want = torch.tensor(list(itertools.product(range(size), repeat=length)), dtype=torch.int64)
    assert torch.equal(every_sequence(size, length), want)


def test_the_exhaustive_lengths_fit_the_limit() -> None:
    program = token_program("identity")  # V = 3, T = 5
    assert exhaustive_lengths(program) == 4  # 3 + 9 + 27 + 81 = 120 <= 256 < 120 + 243
    assert exhaustive_lengths(program, limit=12) == 2 and exhaustive_lengths(program, limit=2) == 0
    assert exhaustive_lengths(program, limit=10**6) == 5  # never past T


def test_random_lengths_cover_every_length_and_are_seeded() -> None:
    program = token_program("identity")
    counts = random_lengths(program, 1000, seed=3)
    assert len(counts) == 5 and sum(counts) == 1000 and min(counts) > 0
    assert counts == random_lengths(program, 1000, seed=3) and counts != random_lengths(program, 1000, seed=4)


def test_token_inputs_are_the_short_sequences_the_constant_ones_then_random_ids_by_length() -> None:
    program = token_program("identity")  # V = 3, T = 5: every sequence of lengths 1..4, constant ones of length 5
    parts = list(token_inputs(program, 500, seed=0))
    exhaustive = [p for p in parts if p.kind == "exhaustive"]
    assert [p.ids.shape for p in exhaustive] == [(3**n, n) for n in range(1, 5)]
    constant = [p for p in parts if p.kind == "constant"]
    assert [p.ids.tolist() for p in constant] == [[[v] * 5 for v in range(3)]]
    random = [p for p in parts if p.kind == "random"]
    assert sum(p.ids.shape[0] for p in random) == 500
    assert {p.ids.shape[1] for p in random} == set(range(1, 6))
    assert all(p.ids.dtype == torch.int64 and int(p.ids.max()) < 3 for p in parts)
    again = list(token_inputs(program, 500, seed=0))
    assert all(torch.equal(a.ids, b.ids) for a, b in zip(parts, again, strict=True))


def _sites(program, seed: int = 0, samples: int = 300) -> tuple[int, int]:
    """(defined output sites, inputs) over the measured inputs, from the reference."""
    parts = list(token_inputs(program, samples, seed))
    sites = 0
    for part in parts:
        truth = evaluate(program, part.ids)
        defined = truth != UNDEFINED_ID if program.token_output else ~truth.isnan()
        sites += int(defined.sum())
    return sites, sum(p.ids.shape[0] for p in parts)


@pytest.mark.parametrize("name", list(TOKEN_SOURCES))
def test_hand_built_models_measure_exact(name: str) -> None:
    program = token_program(name)
    result = measure_tokens(token_model(name), program, 300)
    sites, inputs = _sites(program)
    constant = 3 * (program.length - 4)  # V = 3: lengths 1..4 exhaustive, the V constant sequences of each longer one
    assert (result.sites, result.inputs, result.exhaustive, result.constant) == (sites, inputs, 120, constant)
    assert result.passes(1e-12) and result.accuracy == 1.0 and result.wrong == 0
    if program.token_output:
        assert result.max_error == 0.0 and result.min_margin == 1.0  # one-hot scores: the right one ahead by 1
    else:
        assert result.max_error <= 1e-15 and result.min_margin is None


def test_a_model_that_answers_wrong_everywhere_fails_at_every_site() -> None:
    program = token_program("identity")
    result = measure_tokens(token_model("identity", shuffle_output=True), program, 300)
    sites, inputs = _sites(program)
    assert (result.wrong, result.wrong_inputs, result.sites) == (sites, inputs, sites)
    assert result.accuracy == 0.0 and result.max_error == 1.0 and result.min_margin == -1.0
    assert not result.passes(0.5)
    # the first wrong answer is shown: the model's token (the next one's direction read) and the reference's
    assert result.worst_answer != result.worst_reference


def test_a_tie_goes_to_the_smallest_id_and_counts_wrong_where_that_is_not_the_reference() -> None:
    """Token "a"'s score also reads the direction of "c": on "c" the scores of "a" and "c" tie
    (margin 0), the answer is "a" (the smallest id), wrong; "a" and "b" stay right."""
    program, model = token_program("identity"), token_model("identity")
    with torch.no_grad():
        model.unembed.W_U[2, 0] = 1.0  # direction 2 (x == "c") into the score of "a"
    result = measure_tokens(model, program, 300)
    parts = list(token_inputs(program, 300, 0))
    c_sites = sum(int((p.ids == 2).sum()) for p in parts)
    c_inputs = sum(int((p.ids == 2).any(dim=1).sum()) for p in parts)
    assert (result.wrong, result.wrong_inputs, result.min_margin) == (c_sites, c_inputs, 0.0)
    assert (result.worst_answer, result.worst_reference) == (0.0, 2.0)
    assert result.worst_ids[result.worst_position - 1] == 2


def test_a_numeric_error_is_the_largest_difference() -> None:
    program, model = token_program("fraction"), token_model("fraction")
    with torch.no_grad():
        model.unembed.b_U += 0.25
    result = measure_tokens(model, program, 200)
    assert abs(result.max_error - 0.25) < 1e-12 and not result.passes(0.1) and result.passes(0.3)
    assert result.wrong == 0 and result.min_margin is None


def test_measure_error_of_a_token_model_is_the_token_measurement() -> None:
    program = token_program("first")
    stored = measure_error(token_model("first"), program, 100, seed=2)
    assert stored == measure_tokens(token_model("first"), program, 100, seed=2).to_json()
    assert stored["max_error"] == 0.0 and stored["corners"] == 3 and stored["excluded_by_margin"] == 0
    assert (stored["samples"], stored["seed"], stored["inputs"], stored["exhaustive"]) == (100, 2, 223, 120)
    assert (stored["wrong"], stored["accuracy"], stored["min_margin"]) == (0, 1.0, 1.0)
    numeric = measure_error(token_model("mean"), token_program("mean"), 100)
    assert "wrong" not in numeric and numeric["max_error"] <= 1e-15


def test_a_vector_model_or_program_is_refused() -> None:
    from handmade_models import random_model

    with pytest.raises(ValueError, match="token model of a token program"):
        measure_tokens(random_model(), token_program("first"), 10)


def test_the_measurement_is_a_frozen_record() -> None:
    result = measure_tokens(token_model("first"), token_program("first"), 10)
    assert isinstance(result, TokenMeasurement)
    with pytest.raises(AttributeError):
        result.wrong = 3  # type: ignore[misc]
