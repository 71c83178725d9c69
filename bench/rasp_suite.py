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
    length: int = 6  # max_seq_len N (FIELD's programs are also compiled at 2N)


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


# ----------------------------------------------------------------------------- the field's classes
# FIELD: programs of the seven kinds that programs written for Tracr once failed on here (issue 50),
# each written for this suite (none copied from any benchmark): Tracr's module-level names, values
# past float32's reach, None, numeric errors through tables of means, large tables, twice the
# length, SelectorWidth. Each compiles with the default settings, ifl.compile(ifl.from_rasp(p,
# vocab, N), eps=1e-3), at N and 2N (bench/bench_rasp_field.py).

TEN = tuple(range(10))
FIVE = tuple(range(5))


def count_token(token: rasp.Value, sop: rasp.SOp = rasp.tokens) -> rasp.SOp:
    """Annotated as a Tracr user writes it (rasp.Value, rasp.SOp)."""
    return rasp.SelectorWidth(rasp.Select(sop, sop, lambda k, q: k == token))


def prefix_share(flags: rasp.SOpT, default: rasp.NumericValue = 0) -> rasp.SOpT:
    """The share of positions up to each where ``flags`` holds, its selector an ``or`` of two."""
    prefix = rasp.selector_or(rasp.Select(rasp.indices, rasp.indices, LT), rasp.Select(rasp.indices, rasp.indices, EQ))
    return rasp.numerical(rasp.Aggregate(prefix, rasp.numerical(flags), default=default))


def _is(token: Any) -> Any:
    return rasp.annotate(rasp.Map(lambda t: 1 if t == token else 0, rasp.tokens), encoding=rasp.Encoding.NUMERICAL)


def _everywhere_mean(values: Any) -> Any:
    return _mean(rasp.indices, rasp.indices, TRUE, values)


def _drop(token: Any) -> Any:
    return rasp.Map(lambda t: None if t == token else t, rasp.tokens)


def _mean_of_smaller(values: Any) -> Any:
    return _mean(rasp.tokens, rasp.tokens, LT, values)


def _largest_share() -> Any:
    """max_element-like: the share of positions holding the largest token, through a table of the
    mean of smaller tokens and the token."""
    largest = rasp.numerical(rasp.Map(lambda w: 1 if w == 0 else 0, _width(rasp.tokens, rasp.tokens, GT)))
    return rasp.SequenceMap(lambda m, t: int(m * 4) + t, _everywhere_mean(largest), rasp.tokens)


def _fractions(build: Callable[[Any, Any], Any]) -> Callable[[], Any]:
    """A function of the prefix fractions of "a" and of "b": 181 values each at N = 24 (a table
    of 32,761 pairs), 701 at 2N."""
    return lambda: build(library.make_frac_prevs(rasp.tokens == "a"), library.make_frac_prevs(rasp.tokens == "b"))


FIELD: list[SuiteProgram] = [
    # 1. Tracr's module-level names (annotate, selector_and/or/not, sop_not, default_name, rasp.Value, ...)
    SuiteProgram("annotated_share", "tracr names", lambda: prefix_share(_is("a")), LETTERS),
    SuiteProgram("count_with_values", "tracr names", lambda: count_token("b") + count_token("c"), LETTERS),
    SuiteProgram("not_same_width", "tracr names",
                 lambda: rasp.SelectorWidth(rasp.selector_not(rasp.Select(rasp.tokens, rasp.tokens, EQ))), LETTERS),
    SuiteProgram("not_b", "tracr names", lambda: rasp.sop_not(rasp.tokens == "b"), LETTERS),
    SuiteProgram("earlier_than_first", "tracr names",
                 lambda: rasp.SelectorWidth(rasp.selector_and(rasp.Select(rasp.Full(1), rasp.indices, LEQ),
                                                              rasp.Select(rasp.indices, rasp.indices, LT))), LETTERS),
    SuiteProgram("renamed_length", "tracr names",
                 lambda: rasp.categorical(rasp.Map(lambda n: n, rasp.length)).named(
                     rasp.default_name(rasp.length) + "_copy"), LETTERS),
    # 2. values float32 cannot certify at ε = 1e-3 (float64 chosen), and products of numbers
    SuiteProgram("mean_times_length", "float32",
                 lambda: rasp.numerical(rasp.SequenceMap(lambda m, n: m * n, _everywhere_mean(rasp.tokens),
                                                         rasp.length)), TEN, 9),
    SuiteProgram("token_times_index", "float32",
                 lambda: rasp.numerical(rasp.SequenceMap(lambda x, i: x * i, rasp.tokens, rasp.indices)), TEN, 9),
    SuiteProgram("mean_of_smaller_thousands", "float32",
                 lambda: _mean_of_smaller(rasp.Map(lambda x: 1000 * x, rasp.tokens)), TEN, 9),
    SuiteProgram("prefix_mean_squares", "float32",
                 lambda: _mean(rasp.indices, rasp.indices, LEQ, rasp.Map(lambda x: x * x, rasp.tokens)), TEN, 9),
    SuiteProgram("running_sum", "float32",
                 lambda: rasp.numerical(rasp.SequenceMap(lambda m, i: m * (i + 1),
                                                         _mean(rasp.indices, rasp.indices, LEQ, rasp.tokens),
                                                         rasp.indices)), TEN, 9),
    SuiteProgram("affine_thousands_mean", "float32",
                 lambda: _mean(rasp.tokens, rasp.tokens, LEQ, rasp.Map(lambda x: 997 * x + 13, rasp.tokens)), TEN, 9),
    # 3. None: Maps and SequenceMaps undefined on some arguments
    SuiteProgram("drop_a", "none", lambda: _drop("a"), LETTERS),
    SuiteProgram("twelve_over", "none",
                 lambda: rasp.numerical(rasp.Map(lambda d: None if d == 0 else 12 / d, rasp.tokens)), FIVE),
    SuiteProgram("upper_unless_a", "none", lambda: rasp.Map(str.upper, _drop("a"), simplify=False), LETTERS),
    SuiteProgram("none_times_index", "none",
                 lambda: rasp.SequenceMap(lambda d, i: d * i, rasp.Map(lambda d: None if d == 2 else d, rasp.tokens),
                                          rasp.indices), FIVE),
    SuiteProgram("reverse_undefined", "none", lambda: library.make_reverse(_drop("a")), LETTERS),
    SuiteProgram("same_defined_count", "none",
                 lambda: rasp.SelectorWidth(rasp.Select(_drop("a"), _drop("a"), lambda k, q: k is not None and k == q)),
                 LETTERS),
    # 4. tables of means (a sum times a written 1/n: exact values one float apart)
    SuiteProgram("share_and_token", "numeric error",
                 lambda: rasp.SequenceMap(lambda m, t: round(m, 2) if t == "a" else -m, prefix_share(_is("b")),
                                          rasp.tokens), LETTERS),
    SuiteProgram("largest_share", "numeric error", _largest_share, FIVE),
    SuiteProgram("smaller_mean_rounded", "numeric error",
                 lambda: rasp.Map(lambda m: round(m), _mean_of_smaller(rasp.tokens)), FIVE),
    SuiteProgram("smaller_mean_vs_token", "numeric error",
                 lambda: rasp.SequenceMap(lambda m, t: m >= t / 2, _mean_of_smaller(rasp.tokens), rasp.tokens), FIVE),
    SuiteProgram("same_mean_index", "numeric error",
                 lambda: rasp.Map(lambda m: int(2 * m) % 3, _mean(rasp.tokens, rasp.tokens, EQ, rasp.indices)),
                 LETTERS),
    # 5. large tables: functions of two 181-valued fractions, by their structure
    SuiteProgram("fractions_greater", "large table",
                 _fractions(lambda a, b: rasp.SequenceMap(lambda u, v: u > v, a, b)), LETTERS, 24),
    SuiteProgram("fractions_max", "large table",
                 _fractions(lambda a, b: rasp.numerical(rasp.SequenceMap(max, a, b))), LETTERS, 24),
    SuiteProgram("fractions_both_high", "large table",
                 _fractions(lambda a, b: rasp.SequenceMap(lambda u, v: (u > 0.5) + 2 * (v > 0.5), a, b)), LETTERS, 24),
    SuiteProgram("fractions_sum_halves", "large table",
                 _fractions(lambda a, b: rasp.SequenceMap(lambda u, v: int(2 * (u + v)), a, b)), LETTERS, 24),
    SuiteProgram("fractions_sign", "large table",
                 _fractions(lambda a, b: rasp.SequenceMap(lambda u, v: (u > v) - (u < v), a, b)), LETTERS, 24),
]
