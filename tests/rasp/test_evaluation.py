"""RASP's evaluator (infoflow_dsl/rasp/evaluation.py) against outputs computed by hand for every
primitive, with Tracr's semantics: Aggregate's mean / single value / default, None through Maps,
selectors as (query, key) matrices, the operators' Maps and SequenceMaps."""

from __future__ import annotations

import pytest

from infoflow_dsl import rasp


def test_the_primitives_read_the_input() -> None:
    assert rasp.tokens(["a", "b", "c"]) == ["a", "b", "c"]
    assert rasp.indices(["a", "b", "c"]) == [0, 1, 2]
    assert rasp.length(["a", "b", "c"]) == [3, 3, 3]
    assert rasp.evaluate(rasp.tokens, []) == []


def test_maps_and_sequence_maps_apply_at_every_position() -> None:
    assert rasp.Map(lambda x: x + 1, rasp.indices)([7, 7, 7]) == [1, 2, 3]
    assert rasp.SequenceMap(lambda x, y: f"{x}{y}", rasp.tokens, rasp.indices)(["a", "b"]) == ["a0", "b1"]
    assert rasp.LinearSequenceMap(rasp.indices, rasp.length, 2, -1)([0, 0, 0]) == [-3, -1, 1]
    assert rasp.Full(5)([1, 2]) == [5, 5]
    assert rasp.ConstantSOp([4, 2])([0, 0]) == [4, 2]
    with pytest.raises(ValueError, match="a constant of length 2 on an input of length 3"):
        rasp.ConstantSOp([4, 2])([0, 0, 0])
    assert rasp.ConstantSOp([4, 2], check_length=False)([0, 0, 0]) == [4, 2]


def test_a_map_of_a_map_is_one_map_unless_told_not_to_simplify() -> None:
    inner = rasp.Map(lambda x: x * 10, rasp.indices)
    outer = rasp.Map(lambda x: x + 1, inner)
    assert outer.inner is rasp.indices and outer([0, 0, 0]) == [1, 11, 21]
    kept = rasp.Map(lambda x: x + 1, inner, simplify=False)
    assert kept.inner is inner and kept([0, 0, 0]) == [1, 11, 21]


def test_select_is_the_predicate_of_key_and_query_row_by_query() -> None:
    """Row q, column k: predicate(keys[k], queries[q]); LT reads key < query."""
    less = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    assert less([0, 0, 0]) == [[False, False, False], [True, False, False], [True, True, False]]
    assert rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)(["a", "b", "a"]) == [
        [True, False, True], [False, True, False], [True, False, True]]
    expected = {"EQ": [[1, 0], [0, 1]], "LT": [[0, 0], [1, 0]], "LEQ": [[1, 0], [1, 1]], "GT": [[0, 1], [0, 0]],
                "GEQ": [[1, 1], [0, 1]], "NEQ": [[0, 1], [1, 0]], "TRUE": [[1, 1], [1, 1]], "FALSE": [[0, 0], [0, 0]]}
    for comparison in rasp.Comparison:
        matrix = rasp.Select(rasp.indices, rasp.indices, comparison)([0, 0])
        assert [[int(v) for v in row] for row in matrix] == expected[comparison.name], comparison
    near = rasp.Select(rasp.indices, rasp.indices, lambda key, query: abs(key - query) <= 1)  # any function
    assert near([0, 0, 0]) == [[True, True, False], [True, True, True], [False, True, True]]


def test_selectors_combine_elementwise() -> None:
    before = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    same = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    xs = ["a", "b", "a"]
    assert (before & same)(xs) == [[False, False, False], [False, False, False], [True, False, False]]
    assert (before | same)(xs) == [[True, False, True], [True, True, False], [True, True, True]]
    assert (~before)(xs) == [[True, True, True], [False, True, True], [False, False, True]]
    assert rasp.ConstantSelector([[1, 0], [1, 1]])([0, 0]) == [[True, False], [True, True]]


def test_aggregate_is_the_default_the_one_value_or_the_mean() -> None:
    """Query 0 selects nothing (the default), query 1 one key (its value), query 2 two (the mean)."""
    before = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    values = rasp.numerical(rasp.Map(lambda x: x * 3, rasp.indices))  # 0, 3, 6
    assert rasp.Aggregate(before, values, default=0)([0, 0, 0]) == [0, 0, 1.5]
    assert rasp.Aggregate(before, values)([0, 0, 0]) == [None, 0, 1.5]
    assert rasp.Aggregate(before, rasp.tokens)(["x", "y"]) == [None, "x"]
    with pytest.raises(ValueError, match="averages numbers only"):  # strings do not average: as Tracr's
        rasp.Aggregate(before, rasp.tokens)(["x", "y", "z"])


def test_none_passes_through_maps_without_calling_them() -> None:
    first = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT), rasp.indices)  # None, 0, ...
    called: list[object] = []
    shifted = rasp.Map(lambda x: called.append(x) or x + 1, first)
    assert shifted([0, 0, 0]) == [None, 1, 1.5] and None not in called
    assert rasp.SequenceMap(lambda x, y: x + y, first, rasp.indices)([0, 0, 0]) == [None, 1, 2.5]


def test_selector_width_counts_the_selected_keys() -> None:
    assert rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ))(["a", "b", "a", "a"]) == [
        3, 1, 3, 3]


@pytest.mark.parametrize(("build", "expected"), [
    (lambda x: x == 1, [False, True, False]), (lambda x: x != 1, [True, False, True]),
    (lambda x: x < 1, [True, False, False]), (lambda x: x <= 1, [True, True, False]),
    (lambda x: x > 1, [False, False, True]), (lambda x: x >= 1, [False, True, True]),
    (lambda x: x + 1, [1, 2, 3]), (lambda x: 1 + x, [1, 2, 3]), (lambda x: x - 1, [-1, 0, 1]),
    (lambda x: 1 - x, [1, 0, -1]), (lambda x: x * 2, [0, 2, 4]), (lambda x: 2 * x, [0, 2, 4]),
    (lambda x: x / 2, [0, 0.5, 1]), (lambda x: 2 / (x + 1), [2, 1, 2 / 3]),
    (lambda x: ~(x == 1), [True, False, True]), (lambda x: (x > 0) & (x < 2), [False, True, False]),
    (lambda x: (x < 1) | (x > 1), [True, False, True]), (lambda x: x + x, [0, 2, 4]),
    (lambda x: x * x - x, [0, 0, 2]), (lambda x: (x == x) & True, [True, True, True]),
])
def test_the_operators_build_maps_and_sequence_maps(build, expected) -> None:
    assert build(rasp.indices)(["a", "b", "c"]) == expected


def test_labels_annotations_and_encodings() -> None:
    plain = rasp.Map(lambda x: x, rasp.tokens)
    assert plain.label.startswith("map_") and rasp.is_categorical(plain)
    number = rasp.numerical(plain)  # a copy, as Tracr's annotate: the original keeps its annotations
    assert number is not plain and rasp.is_numerical(number) and not rasp.is_categorical(number)
    assert rasp.is_categorical(plain) and number.unique_id != plain.unique_id and number.f is plain.f
    assert rasp.categorical(number).named("copy").label == "copy"
    assert rasp.get_encoding(plain) is rasp.Encoding.CATEGORICAL
    assert rasp.tokens.label == "tokens" and rasp.indices.label == "indices" and rasp.length.label == "length"
    assert len({plain, rasp.Map(lambda x: x, rasp.tokens)}) == 2  # hashable by identity, == builds a Map


def test_an_expression_read_twice_is_evaluated_once() -> None:
    calls: list[int] = []
    counted = rasp.Map(lambda x: calls.append(x) or x, rasp.indices)
    assert rasp.SequenceMap(lambda a, b: a + b, counted, counted)([0, 0, 0]) == [0, 2, 4]
    assert calls == [0, 1, 2]


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="Map reads an SOp"):
        rasp.Map(lambda x: x, [1, 2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Select's predicate"):
        rasp.Select(rasp.tokens, rasp.tokens, "EQ")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Aggregate reads a selector and an SOp"):
        rasp.Aggregate(rasp.tokens, rasp.tokens)  # type: ignore[arg-type]


def test_a_comparison_of_none_raises_as_tracrs_does_and_a_predicate_function_is_called_with_it() -> None:
    """Tracr's Comparison raises on a None key or query (its evaluator is undefined there); a
    predicate function is the user's and is called with None."""
    shifted = rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, lambda k, q: k == q - 1), rasp.tokens)
    with pytest.raises(ValueError, match="key is None"):
        rasp.SelectorWidth(rasp.Select(shifted, rasp.tokens, rasp.Comparison.EQ))(["a", "b"])
    with pytest.raises(ValueError, match="query is None"):
        rasp.SelectorWidth(rasp.Select(rasp.tokens, shifted, rasp.Comparison.LT))(["a", "b"])
    assert rasp.SelectorWidth(rasp.Select(shifted, shifted, lambda k, q: k == q))(["a", "b"]) == [1, 1]
