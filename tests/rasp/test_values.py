"""Value-set inference (infoflow_dsl/rasp/values.py): each node's set from its children's, as
Tracr's basis inference does, checked against hand-computed sets and against the evaluator on
every input up to the longest length (every value the evaluator gives is in the inferred set)."""

from __future__ import annotations

import itertools

import pytest

from infoflow_dsl import rasp
from infoflow_dsl.rasp.values import MAX_VALUES, ValueSetError, value_sets

VOCAB = ["a", "b", "c"]


def test_the_primitives_and_maps() -> None:
    shifted = rasp.Map(lambda i: i + 1, rasp.indices)
    paired = rasp.SequenceMap(lambda t, i: f"{t}{i}", rasp.tokens, rasp.indices)
    sets = value_sets(paired, VOCAB, 3)
    assert sets[rasp.tokens.unique_id] == {"a", "b", "c"} and sets[rasp.indices.unique_id] == {0, 1, 2}
    assert sets[paired.unique_id] == {f"{t}{i}" for t in VOCAB for i in range(3)}
    assert value_sets(shifted, VOCAB, 3)[shifted.unique_id] == {1, 2, 3}
    assert value_sets(rasp.length, VOCAB, 4)[rasp.length.unique_id] == {1, 2, 3, 4}
    width = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ))
    assert value_sets(width, VOCAB, 4)[width.unique_id] == {0, 1, 2, 3, 4}
    full = rasp.Full(7)
    assert value_sets(full, VOCAB, 2)[full.unique_id] == {7}


def test_a_numerical_aggregate_takes_every_mean_of_up_to_n_values() -> None:
    """frac_prevs: the mean of 0/1 values over 1..N positions is k/n, 0 ≤ k ≤ n ≤ N."""
    is_a = rasp.numerical(rasp.Map(lambda t: 1 if t == "a" else 0, rasp.tokens))
    frac = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ), is_a,
                                         default=0))
    assert value_sets(frac, VOCAB, 4)[frac.unique_id] == {k / n for n in range(1, 5) for k in range(n + 1)}
    categorical = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ), rasp.tokens)
    assert value_sets(categorical, VOCAB, 4)[categorical.unique_id] == {"a", "b", "c", None}


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_every_value_the_evaluator_gives_is_in_the_inferred_set(length: int) -> None:
    before = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    count = rasp.numerical(rasp.Map(lambda t: 2 if t == "b" else 0, rasp.tokens))
    mean = rasp.numerical(rasp.Aggregate(before, count, default=0))
    program = rasp.SequenceMap(lambda m, w: m * w, mean, rasp.SelectorWidth(before))
    nodes = [program, mean, count]
    sets = value_sets(program, VOCAB, length)
    for n in range(1, length + 1):
        for xs in itertools.product(VOCAB, repeat=n):
            for node in nodes:
                assert set(node(list(xs))) <= sets[node.unique_id], (node, xs)


def test_a_function_that_raises_is_reported_with_its_node_and_value() -> None:
    inverse = rasp.Map(lambda i: 1 / i, rasp.indices).named("inverse")
    with pytest.raises(ValueSetError, match=r"Map 'inverse': its function raises ZeroDivisionError on 0"):
        value_sets(inverse, VOCAB, 3)
    words = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                          rasp.tokens)).named("mean_word")
    with pytest.raises(ValueSetError, match="Aggregate 'mean_word': a numerical Aggregate of values that do not"):
        value_sets(words, VOCAB, 3)


def test_a_set_past_the_limit_is_refused_and_a_bad_length_is_a_value_error() -> None:
    huge = rasp.SequenceMap(lambda i, j: i * 1000 + j, rasp.indices, rasp.indices).named("grid")
    assert len(value_sets(huge, VOCAB, 300)[huge.unique_id]) == 90_000
    with pytest.raises(ValueSetError, match=f"SequenceMap 'grid' takes more than {MAX_VALUES:,} values"):
        value_sets(huge, VOCAB, 400)
    with pytest.raises(ValueError, match="max_seq_len must be a whole number ≥ 1"):
        value_sets(rasp.tokens, VOCAB, 0)


def test_a_categorical_aggregate_of_numbers_holds_their_means_where_it_may_select_several() -> None:
    """RASP's evaluator averages numbers wherever several positions are selected, categorical
    or numerical; where the selector picks one position per query (indices by EQ, or shift_by's
    predicate of two indices) only the values themselves occur."""
    ones = rasp.Map(lambda t: 1 if t == "a" else 0, rasp.tokens)
    several = rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LEQ), ones)
    assert value_sets(several, VOCAB, 2)[several.unique_id] == {0, 0.5, 1, None}
    shifted = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, lambda k, q: q == k + 1), ones)
    assert value_sets(shifted, VOCAB, 3)[shifted.unique_id] == {0, 1, None}
    strings = rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LEQ), rasp.tokens)
    assert value_sets(strings, VOCAB, 3)[strings.unique_id] == {"a", "b", "c", None}  # strings do not average
