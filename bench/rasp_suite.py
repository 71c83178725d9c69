"""The benchmark's own RASP suite: 50 programs beyond Tracr's library, in the families RASP
programs in public use come in (string maps to numbers and to new tokens, numerical
aggregates, selector combinations, SelectorWidth, LinearSequenceMap, retrievals, causal
programs, patterns), each
written in ``infoflow_dsl.rasp`` as a Tracr user would, with its vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infoflow_dsl import rasp
from infoflow_dsl.rasp import library

WORDS = ("a", "an", "the", "cat", "apple", "eel")
LETTERS = ("a", "b", "c")
DIGITS = (1, 2, 3, 4)
LEQ, LT, EQ, GT, GEQ, TRUE = (rasp.Comparison.LEQ, rasp.Comparison.LT, rasp.Comparison.EQ, rasp.Comparison.GT,
                              rasp.Comparison.GEQ, rasp.Comparison.TRUE)


@dataclass(frozen=True)
class SuiteProgram:
    name: str
    family: str
    build: Callable[[], Any]
    vocab: tuple[Any, ...]


def _width(keys: Any, queries: Any, predicate: Any) -> Any:
    return rasp.SelectorWidth(rasp.Select(keys, queries, predicate))


def _mean(keys: Any, queries: Any, predicate: Any, values: Any, default: Any = 0) -> Any:
    return rasp.numerical(rasp.Aggregate(rasp.Select(keys, queries, predicate), rasp.numerical(values),
                                         default=default))


def _word_length() -> Any:
    return rasp.Map(len, rasp.tokens)


def _vowels() -> Any:
    return rasp.Map(lambda w: sum(ch in "aeiou" for ch in w), rasp.tokens)


def _first_flag() -> Any:
    seen_before = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, EQ)
                                     & rasp.Select(rasp.indices, rasp.indices, LT))
    return rasp.Map(lambda n: n == 0, seen_before)


def _distinct_so_far() -> Any:
    first = _first_flag()
    return rasp.SelectorWidth(rasp.Select(rasp.indices, rasp.indices, LEQ) & rasp.Select(first, first,
                                                                                          lambda k, q: bool(k)))


def _after_first_a() -> Any:
    is_a = rasp.Map(lambda t: t == "a", rasp.tokens)
    first_a = rasp.numerical(rasp.Aggregate(rasp.Select(is_a, is_a, lambda k, q: k) & rasp.Select(
        rasp.indices, rasp.indices, TRUE), rasp.numerical(rasp.Map(lambda b: 1 if b else 0, is_a)), default=0))
    return rasp.Map(lambda f: f > 0.3, first_a)


PROGRAMS: list[SuiteProgram] = [
    # string maps to numbers
    SuiteProgram("word_length", "string map", _word_length, WORDS),
    SuiteProgram("vowel_count", "string map", _vowels, WORDS),
    SuiteProgram("starts_with_vowel", "string map", lambda: rasp.Map(lambda w: w[0] in "aeiou", rasp.tokens), WORDS),
    SuiteProgram("length_parity", "string map", lambda: rasp.Map(lambda w: len(w) % 2 == 0, rasp.tokens), WORDS),
    SuiteProgram("prefix_mean_length", "string map", lambda: _mean(rasp.indices, rasp.indices, LEQ, _word_length()),
                 WORDS),
    SuiteProgram("same_length_count", "string map", lambda: _width(_word_length(), _word_length(), EQ), WORDS),
    SuiteProgram("longer_words", "string map", lambda: _width(_word_length(), _word_length(), GT), WORDS),
    SuiteProgram("vowels_minus_length", "string map",
                 lambda: rasp.LinearSequenceMap(_vowels(), _word_length(), 2, -1), WORDS),
    # string maps to new tokens (the model answers with tokens the input never had)
    SuiteProgram("reverse_words", "new tokens", lambda: rasp.Map(lambda w: w[::-1], rasp.tokens), WORDS),
    SuiteProgram("upper_reversed", "new tokens", lambda: rasp.Map(str.upper, library.make_reverse(rasp.tokens)),
                 LETTERS),
    SuiteProgram("with_first", "new tokens",
                 lambda: rasp.SequenceMap(lambda a, b: a + b, rasp.tokens,
                                          rasp.Aggregate(rasp.Select(rasp.indices, rasp.Full(0), EQ), rasp.tokens)),
                 LETTERS),
    SuiteProgram("word_class", "new tokens",
                 lambda: rasp.Map(lambda n: "long" if n > 3 else "short", _word_length()), WORDS),
    # numerical aggregates
    SuiteProgram("frac_prevs_a", "numerical aggregate", lambda: library.make_frac_prevs(rasp.tokens == "a"), LETTERS),
    SuiteProgram("prefix_mean_digits", "numerical aggregate",
                 lambda: _mean(rasp.indices, rasp.indices, LEQ, rasp.tokens), DIGITS),
    SuiteProgram("mean_digits", "numerical aggregate", lambda: _mean(rasp.indices, rasp.indices, TRUE, rasp.tokens),
                 DIGITS),
    SuiteProgram("mean_of_larger", "numerical aggregate", lambda: _mean(rasp.tokens, rasp.tokens, GT, rasp.tokens),
                 DIGITS),
    SuiteProgram("mean_index_of_same", "numerical aggregate",
                 lambda: _mean(rasp.tokens, rasp.tokens, EQ, rasp.indices), LETTERS),
    SuiteProgram("prefix_frac_large", "numerical aggregate",
                 lambda: _mean(rasp.indices, rasp.indices, LEQ, rasp.Map(lambda d: d > 2, rasp.tokens)), DIGITS),
    SuiteProgram("suffix_frac_b", "numerical aggregate",
                 lambda: _mean(rasp.indices, rasp.indices, GEQ, rasp.tokens == "b"), LETTERS),
    SuiteProgram("mean_with_default", "numerical aggregate",
                 lambda: _mean(rasp.tokens, rasp.tokens, LT, rasp.tokens, default=-1), DIGITS),
    # selector combinations
    SuiteProgram("earlier_different", "selector logic",
                 lambda: rasp.SelectorWidth(rasp.Select(rasp.indices, rasp.indices, LT)
                                            & ~rasp.Select(rasp.tokens, rasp.tokens, EQ)), LETTERS),
    SuiteProgram("same_or_later", "selector logic",
                 lambda: rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, EQ)
                                            | rasp.Select(rasp.indices, rasp.indices, GT)), LETTERS),
    SuiteProgram("neighbours", "selector logic",
                 lambda: _width(rasp.indices, rasp.indices, lambda k, q: abs(k - q) <= 1), LETTERS),
    SuiteProgram("smaller_and_earlier", "selector logic",
                 lambda: rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, LT)
                                            & rasp.Select(rasp.indices, rasp.indices, LT)), DIGITS),
    SuiteProgram("not_same", "selector logic", lambda: rasp.SelectorWidth(~rasp.Select(rasp.tokens, rasp.tokens, EQ)),
                 LETTERS),
    SuiteProgram("query_is_a", "selector logic", lambda: _width(rasp.tokens, rasp.tokens, lambda k, q: q == "a"),
                 LETTERS),
    # SelectorWidth
    SuiteProgram("hist", "selector width", library.make_hist, LETTERS),
    SuiteProgram("length", "selector width", library.make_length, LETTERS),
    SuiteProgram("count_less_freq_2", "selector width", lambda: library.make_count_less_freq(2), LETTERS),
    SuiteProgram("smaller_count", "selector width", lambda: _width(rasp.tokens, rasp.tokens, LT), DIGITS),
    SuiteProgram("count_b", "selector width", lambda: library.make_count(rasp.tokens, "b"), LETTERS),
    # LinearSequenceMap
    SuiteProgram("twice_minus_index", "linear map", lambda: rasp.LinearSequenceMap(rasp.tokens, rasp.indices, 2, -1),
                 DIGITS),
    SuiteProgram("hist_minus_length", "linear map", lambda: library.make_hist() - rasp.length, LETTERS),
    SuiteProgram("balance_ab", "linear map", lambda: library.make_pair_balance(rasp.tokens, "a", "b"), LETTERS),
    SuiteProgram("index_plus_length", "linear map", lambda: rasp.indices + rasp.length, LETTERS),
    SuiteProgram("count_a_minus_b", "linear map",
                 lambda: library.make_count(rasp.tokens, "a") - library.make_count(rasp.tokens, "b"), LETTERS),
    # retrievals
    SuiteProgram("reverse_digits", "retrieval", lambda: library.make_reverse(rasp.tokens), DIGITS),
    SuiteProgram("first_token", "retrieval",
                 lambda: rasp.Aggregate(rasp.Select(rasp.indices, rasp.Full(0), EQ), rasp.tokens), LETTERS),
    SuiteProgram("last_token", "retrieval",
                 lambda: rasp.Aggregate(rasp.Select(rasp.indices, rasp.length - 1, EQ), rasp.tokens), LETTERS),
    SuiteProgram("shift_by_1", "retrieval", lambda: library.shift_by(1, rasp.tokens), LETTERS),
    SuiteProgram("sort_unique_digits", "retrieval", lambda: library.make_sort_unique(rasp.tokens, rasp.tokens),
                 DIGITS),
    SuiteProgram("reversed_is_a", "retrieval",
                 lambda: rasp.numerical(rasp.Map(lambda t: 1 if t == "a" else 0, library.make_reverse(rasp.tokens))),
                 LETTERS),
    # causal programs
    SuiteProgram("running_count_a", "causal",
                 lambda: rasp.SelectorWidth(rasp.Select(rasp.indices, rasp.indices, LEQ)
                                            & rasp.Select(rasp.tokens, rasp.tokens, lambda k, q: k == "a")), LETTERS),
    SuiteProgram("seen_before", "causal", lambda: rasp.Map(lambda b: not b, _first_flag()), LETTERS),
    SuiteProgram("distinct_so_far", "causal", _distinct_so_far, LETTERS),
    SuiteProgram("after_first_a", "causal", _after_first_a, LETTERS),
    # patterns
    SuiteProgram("detect_ab", "pattern", lambda: library.detect_pattern(rasp.tokens, "ab"), LETTERS),
    SuiteProgram("detect_aba", "pattern", lambda: library.detect_pattern(rasp.tokens, "aba"), LETTERS),
    SuiteProgram("shuffle_dyck1", "pattern", lambda: library.make_shuffle_dyck(["()"]), ("(", ")", "x")),
    SuiteProgram("nary_three", "pattern",
                 lambda: library.make_nary_sequencemap(lambda a, b, c: a - b + 2 * c, rasp.tokens, rasp.indices,
                                                       rasp.length), DIGITS),
]
