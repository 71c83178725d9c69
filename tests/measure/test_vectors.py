"""The measurement against the reference: its cost model, its budget and its batches."""

from __future__ import annotations

import pytest
import torch
from compiled import model, program

import infoflow_dsl as ifl
from infoflow_dsl.measure import vectors as measure
from infoflow_dsl.measure.vectors import (
    MEASUREMENT_BUDGET,
    MIN_SAMPLES,
    budgeted_samples,
    errors_on,
    measurement_batches,
    measurement_cost,
    model_inputs,
    reference_cost,
)


def test_reference_cost_counts_the_tuples_each_reduction_reads():
    """intrinsic_3 is three pair reductions side by side (each body reads s and t): about 3 T² tuples
    of a few numbers each, not the T⁶ of its three nested reductions' variables together."""
    target = program("intrinsic_3")
    tuples = 3 * target.length**2
    assert tuples <= reference_cost(target) <= 50 * tuples
    single = ifl.parse_program("input x : R^4 in [-1, 1]\nlength T = 64\ntarget max_<t> <x(t), x(t)>\n", "one.iflow")
    assert reference_cost(single) <= 50 * single.length


@pytest.mark.parametrize("name", ["d_retrieval", "min_pairwise"])
def test_the_default_budget_measures_more_than_its_floor_where_inputs_are_cheap(name):
    """At their own T (128, 32) a measured input costs well under a millisecond: the budget of a
    few seconds buys thousands of inputs, not the floor."""
    compiled = model(name, 1e-3, "float32")
    assert budgeted_samples(compiled, program(name)) >= 4 * MIN_SAMPLES


@pytest.mark.parametrize("name", ["intrinsic_3", "intrinsic_6"])
def test_the_cost_counts_every_weight_the_forward_multiplies(name):
    """The forward multiplies dense matrices, so a wide FFN costs its whole width at every
    token, zeros included (intrinsic_6 at ε = 1e-3: d_mlp in the thousands): counting only the
    nonzero weights bought 14× the inputs the budget meant."""
    compiled, target = model(name, 1e-3, "float32"), program(name)
    assert measurement_cost(compiled, target) >= 2.0 * (target.length + 1) * compiled.parameter_count()
    assert budgeted_samples(compiled, target) <= MEASUREMENT_BUDGET / (2.0 * (target.length + 1) *
                                                                       compiled.parameter_count()) + MIN_SAMPLES


def test_forward_and_reference_batches_of_other_sizes_give_the_same_errors(monkeypatch, device):
    from infoflow_dsl.pipeline.devices import on_device

    target = program("min_pairwise")
    compiled = on_device(model("min_pairwise", 1e-3, "float64"), device)
    x = model_inputs(target, 37, seed=4, corners=5)
    length = target.length
    monkeypatch.setattr(measure, "BATCH_ELEMENTS", 8 * length)
    monkeypatch.setattr(measure, "PAIR_ELEMENTS", 3 * length**2)
    assert measurement_batches(compiled, length) == (8, 3)
    error, kept = errors_on(compiled, target, x)
    with torch.no_grad():
        expected = (compiled(x).cpu() - ifl.evaluate(target, x)).abs()
    assert bool(kept.all()) and error.shape == (42,)
    torch.testing.assert_close(error, expected, rtol=0, atol=1e-12)


def test_token_answers_and_margins_against_a_loop() -> None:
    """wrong_answers and answer_margins on random scores (B, T', V), with ties and undefined
    sites, against a loop over the sites (the first maximum is the answer)."""
    from infoflow_dsl.measure.vectors import answer_margins, wrong_answers
    from infoflow_dsl.oracle.tokens import UNDEFINED_ID

    gen = torch.Generator().manual_seed(4)
    scores = torch.randint(0, 3, (6, 5, 4), generator=gen).to(torch.float64)  # small integers: many ties
    truth = torch.randint(-1, 4, (6, 5), generator=gen)  # -1: undefined
    wrong, defined = wrong_answers(scores, truth)
    margin = answer_margins(scores, truth)
    for b in range(6):
        for t in range(5):
            row, want = scores[b, t].tolist(), int(truth[b, t])
            assert bool(defined[b, t]) == (want != UNDEFINED_ID)
            if want == UNDEFINED_ID:
                assert not wrong[b, t] and margin[b, t] == float("inf")
                continue
            assert bool(wrong[b, t]) == (row.index(max(row)) != want)
            assert float(margin[b, t]) == row[want] - max(v for i, v in enumerate(row) if i != want)


def test_describe_and_judge_a_stored_measurement() -> None:
    """compile's line and verdict from a stored measured_error: a model over vectors as before; a
    token model's inputs and answers; a token output passes only with every answer right."""
    from handmade_models import token_model, token_program

    from infoflow_dsl.measure.measurement import describe_measurement, measure_error, measurement_passes

    vectors = {"max_error": 1e-4, "samples": 300, "corners": 256, "seed": 0, "excluded_by_margin": 2}
    assert describe_measurement(vectors) == "max over 300 random inputs and 256 corners, 2 under the margin left out"
    assert measurement_passes(vectors, 1e-3) and not measurement_passes(vectors, 1e-5)
    right = measure_error(token_model("first"), token_program("first"), 100)
    assert describe_measurement(right) == ("over 223 inputs: 100 random ids of random lengths, all 120 of lengths ≤ 4, "
                                           "3 constant sequences; 0 of 223 token answers wrong, smallest score "
                                           "margin 1.0")
    wrong = measure_error(token_model("identity", shuffle_output=True), token_program("identity"), 100)
    assert measurement_passes(right, 1e-9) and not measurement_passes(wrong, 2.0)
    numeric = measure_error(token_model("mean"), token_program("mean"), 100)
    assert describe_measurement(numeric) == ("over 223 inputs: 100 random ids of random lengths, all 120 of "
                                             "lengths ≤ 4, 3 constant sequences")
