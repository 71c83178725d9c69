"""rasp/translate.py and rasp/rules.py: every construct of the shared RASP table compiled and
brute-forced against RASP's evaluator on every input of lengths 1..4, the text written for a
few programs, and the programs refused with the node named."""

from __future__ import annotations

from functools import cache

import pytest
import torch
from rasp_programs import CONSTRUCTS, RASP_PROGRAMS, RaspExample

import infoflow_dsl as ifl
from infoflow_dsl import rasp
from infoflow_dsl.errors import CompileError
from infoflow_dsl.rasp import library
from infoflow_dsl.rasp.agreement import agreement, every_input, random_inputs
from infoflow_dsl.rasp.library import make_hist, make_reverse
from infoflow_dsl.rasp.literals import TranslationError
from infoflow_dsl.rasp.translate import from_rasp, rasp_source
from infoflow_dsl.transformer.io import model_to_bytes

LENGTH, EPS = 5, 1e-3
BY_NAME = {example.name: example for example in RASP_PROGRAMS}


@cache
def compiled(name: str) -> tuple[object, ifl.Program, ifl.CompiledTransformer]:
    example = BY_NAME[name]
    program = example.build(LENGTH)
    checked = from_rasp(program, example.vocab, LENGTH)
    return program, checked, ifl.compile(checked, eps=EPS, dtype="float64", samples=0)


@pytest.mark.parametrize("example", CONSTRUCTS, ids=lambda e: e.name)
def test_every_construct_is_exact_on_every_short_input(example: RaspExample) -> None:
    program, checked, model = compiled(example.name)
    vocab = list(example.vocab)
    found = agreement(program, model, checked, [*every_input(vocab, 4), *random_inputs(vocab, LENGTH, 100)])
    assert found.positions > 0
    assert found.exact(EPS), found


def test_the_written_programs_read_as_the_rasp_does() -> None:
    source = rasp_source(make_reverse(rasp.tokens), ["b", "a"], 4)
    assert source.splitlines()[1:3] == ['input x : token {"a", "b"}', "length T = 4"]  # sorted
    assert source.endswith("target(t) = x(len + 1 - t)\n")  # Select(indices, length - indices - 1, EQ)
    hist = rasp_source(make_hist(), ["a", "b"], 4)
    assert "let hist(t) = sum_<s1> [x(s1) == x(t)]" in hist and hist.endswith("target(t) = hist(t)\n")
    frac = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                         rasp.numerical(rasp.tokens == "x"), default=0)).named("frac")
    assert "let frac(t) = mean_<s1 : s1 <= t> " in rasp_source(frac, ["x", "y"], 4)


def test_boolean_maps_of_conditions_are_one_bracket() -> None:
    """A 0/1 Map of a number with one or two changes is a condition (``a < c``, a band
    ``a >= c1 and a < c2``), a 0/1 function of conditions false at one tuple is their
    disjunction, and the mean over every position of a disjunction of thresholds tested against
    0 is minima over positions: shuffle_dyck's any_negative and its answer are each one bracket."""
    source = rasp_source(library.make_shuffle_dyck2(), ["(", ")", "{", "}"], 10)
    assert "any_negative" not in source and "has_neg" not in source  # no 0/1 value per position is left
    assert ("let shuffle_dyck2(t) = [((pair_balance(len) >= (-0.05) and pair_balance(len) < 0.05) and "
            "(pair_balance_2(len) >= (-0.05) and pair_balance_2(len) < 0.05)) and (min_<s8> pair_balance(s8) >= "
            "(-0.05) and min_<s9> pair_balance_2(s9) >= (-0.05))]") in source  # has_neg is 0: no balance below 0
    assert "table" not in source.split("let pair_balance_2")[1]  # no table of 0/1 values is left


def test_from_rasp_is_the_program_of_the_text_it_writes_byte_for_byte() -> None:
    program, checked, model = compiled("count_table")
    again = ifl.parse_program(rasp_source(program, BY_NAME["count_table"].vocab, LENGTH), checked.path)
    assert model_to_bytes(ifl.compile(again, eps=EPS, dtype="float64", samples=0)) == model_to_bytes(model)


@pytest.mark.parametrize(("build", "vocab"), [
    (lambda: rasp.Map(lambda w: w[::-1], rasp.tokens).named("flip"), ["apple", "pear", "fig"]),
    (lambda: rasp.Map(str.upper, make_reverse(rasp.tokens)).named("upper_reversed"), ["a", "b", "c"]),
    (lambda: rasp.SequenceMap(lambda a, b: a + b, rasp.tokens, rasp.Aggregate(
        rasp.Select(rasp.indices, rasp.Full(0), rasp.Comparison.EQ), rasp.tokens)).named("with_first"), ["a", "b"]),
])
def test_new_tokens_are_a_table_of_tokens_and_the_model_answers_with_them(build, vocab) -> None:
    program = build()
    checked = from_rasp(program, vocab, LENGTH)
    assert checked.token_output and checked.token_table is not None
    model = ifl.compile(checked, eps=EPS, dtype="float64", samples=0)
    found = agreement(program, model, checked, list(every_input(vocab, 4)))
    assert found.positions > 0 and found.exact(EPS), found


def test_a_token_output_answers_with_the_tokens_and_none_where_rasp_has_none() -> None:
    program, checked, model = compiled("shift_by_2")
    assert checked.token_output
    ids = ifl.encode(checked, list("abcd"))
    assert ifl.decode(checked, model(ids))[0][2:] == program(list("abcd"))[2:] == ["a", "b"]


def _compared_triples() -> object:
    pair = rasp.SequenceMap(lambda a, b: a + b, rasp.tokens, rasp.Map(str.upper, rasp.tokens)).named("pair")
    triple = rasp.SequenceMap(lambda a, b: a + b, pair, make_reverse(rasp.tokens)).named("triple")
    return rasp.SelectorWidth(rasp.Select(triple, triple, rasp.Comparison.EQ)).named("same_triples")


def _function_of_a_shifted_sop() -> object:
    shifted = library.shift_by(1, rasp.tokens)
    return rasp.SelectorWidth(rasp.Select(shifted, shifted, lambda k, q: k == q).named("same_before"))


def _raising_map() -> object:
    return rasp.Map(lambda t: {"a": 1}[t], rasp.tokens).named("lookup")


def _raising_predicate() -> object:
    width = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, lambda k, q: {"a": True}[k])).named("w")
    return width


def _numerical_mean_of_strings() -> object:
    select = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    return rasp.numerical(rasp.Aggregate(select, rasp.tokens, default=0)).named("frac")


def _three_way_table() -> object:
    tokens = rasp.numerical(rasp.Map(lambda t: t, rasp.tokens))
    pair = rasp.SequenceMap(lambda a, b: (a, b), tokens, rasp.indices)
    return rasp.Map(lambda ab: ab[0] * ab[1], rasp.SequenceMap(lambda p, n: (*p, n), pair, rasp.length)).named("prod")


@pytest.mark.parametrize(("build", "vocab", "named"), [
    (_compared_triples, ["a", "b"], "SequenceMap 'triple': its values ('aAa', ...) come from 3 SOps"),
    (_function_of_a_shifted_sop, ["a", "b"], "Select 'same_before': its keys are None at the first positions"),
    (_raising_map, ["a", "b"], "Map 'lookup': its function raises KeyError on 'b'"),
    (_raising_predicate, ["a", "b"], "Select 'select_"),
    (_numerical_mean_of_strings, ["a", "b"], "Aggregate 'frac': a numerical Aggregate of values that do not average"),
    (lambda: rasp.ConstantSOp([1, 2, 3]).named("consts"), ["a"], "ConstantSOp 'consts': a constant sequence"),
    (lambda: rasp.Aggregate(rasp.ConstantSelector([[True]]).named("cs"), rasp.tokens), ["a"],
     "ConstantSelector 'cs': a ConstantSelector is not compiled yet"),
    (lambda: rasp.Full("z").named("zed"), ["a"], "Full 'zed': a constant token 'z'"),
    (lambda: rasp.tokens, ["a", 1], "the vocabulary mixes strings and numbers"),
    (lambda: rasp.tokens, [True, False], "the vocabulary holds booleans"),
    (lambda: rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), ["a"], "from_rasp compiles an SOp"),
    (_three_way_table, [1, 2], "a function of 3 SOps that is not affine"),
])
def test_what_cannot_be_compiled_is_refused_naming_the_node(build, vocab, named: str) -> None:
    with pytest.raises(CompileError) as refusal:
        from_rasp(build(), vocab, 3)
    assert isinstance(refusal.value, TranslationError)
    assert named in str(refusal.value)


def test_a_threshold_on_a_mean_of_squared_nested_means_is_exact() -> None:
    """Once refused ("no exact step" on the mean's lattice of values): the sums and means of a
    few-valued body take their sumsets (analysis/finite.py), and the threshold is exact."""
    def prefix_mean(values: object, name: str) -> object:
        prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
        return rasp.numerical(rasp.Aggregate(prefix, values, default=0)).named(name)

    nested = prefix_mean(prefix_mean(rasp.numerical(rasp.tokens == "a"), "m"), "n")
    squared = prefix_mean(rasp.numerical(rasp.Map(lambda v: v * v, nested)).named("square"), "k")
    flag = rasp.Map(lambda v: v >= 0.3, squared).named("flag")
    checked = from_rasp(flag, ["a", "b"], 3)
    model = ifl.compile(checked, eps=EPS, samples=0)
    found = agreement(flag, model, checked, list(every_input(["a", "b"], 3)))
    assert model.config["dtype"] == "float32" and found.positions > 0 and found.exact(EPS), found


def test_causal_refuses_a_program_that_reads_later_tokens_and_keeps_one_that_does_not() -> None:
    with pytest.raises(TranslationError, match="Aggregate 'reverse' is not causal"):
        from_rasp(make_reverse(rasp.tokens), ["a", "b"], 4, causal=True)
    prefix = rasp.SelectorWidth(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)).named("position")
    assert from_rasp(prefix, ["a"], 4, causal=True).per_token


def test_a_bad_max_seq_len_is_refused() -> None:
    for bad in (0, -1, 2.5, True):
        with pytest.raises(TranslationError, match="max_seq_len"):
            from_rasp(rasp.tokens, ["a"], bad)  # type: ignore[arg-type]


def test_agreement_reports_a_wrong_token_with_its_input() -> None:
    """The comparison can fail: a model of another program disagrees, and says where."""
    _, checked, model = compiled("reverse")
    other = make_hist()
    found = agreement(other, model, checked, [("a", "b")])
    assert not found.exact(EPS) and found.first_wrong is not None
    assert torch.is_tensor(model(ifl.encode(checked, ["a", "b"])))
