"""The shared table of RASP programs: Tracr's library (``infoflow_dsl.rasp.library``) and one
program per construct of the translation (``rasp/translate.py``, ``rasp/rules.py``), each with
its vocabulary. Tests of the translation, the compile and the CLI read it; the benchmark's
larger suite is ``bench/rasp_suite.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infoflow_dsl import rasp
from infoflow_dsl.rasp import library
from infoflow_dsl.rasp.library import TRACR_PROGRAMS


@dataclass(frozen=True)
class RaspExample:
    name: str
    build: Callable[[int], Any]  # max_seq_len → the program (a fresh graph each call)
    vocab: tuple[Any, ...]


def _frac_of_smaller(n: int) -> Any:
    """A numerical mean over a selector of values: Σ_s [sel]·v(s) times inverse(Σ_s [sel])."""
    doubled = rasp.numerical(rasp.Map(lambda x: 2 * x, rasp.tokens))
    smaller = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LT)
    return rasp.numerical(rasp.Aggregate(smaller, doubled, default=-1)).named("mean_of_smaller")


def _word_score(n: int) -> Any:
    """A Map to numbers of a token (a table keyed by the vocabulary), summed over a window."""
    score = rasp.numerical(rasp.Map(lambda w: len(w) % 3, rasp.tokens)).named("score")
    window = rasp.Select(rasp.indices, rasp.indices, lambda k, q: q - 1 <= k <= q)
    return rasp.numerical(rasp.Aggregate(window, score, default=0)).named("window_score")


def _count_table(n: int) -> Any:
    """A Map of a count by a table (not affine, more than MAX_STEPS changes) and a SequenceMap table."""
    hist = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)).named("hist")
    squared = rasp.Map(lambda c: (c * c) % 5, hist).named("squared")
    return rasp.SequenceMap(lambda a, i: a * (i % 2) + (a > 2), squared, rasp.indices).named("mixed")


def _steps(n: int) -> Any:
    """A Map of a mean with one change (a bracket [a >= c]) and a linear combination."""
    frac = rasp.numerical(rasp.Aggregate(rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ),
                                         rasp.numerical(rasp.tokens == "b"), default=0)).named("frac_b")
    majority = rasp.Map(lambda f: f > 0.5, frac).named("majority")
    return rasp.LinearSequenceMap(majority, rasp.indices, 3, -1).named("combined")


def _selector_logic(n: int) -> Any:
    """&, |, ~ of selectors, one side only (query), and a width."""
    earlier = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT)
    same = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ)
    query_a = rasp.Select(rasp.tokens, rasp.tokens, lambda k, q: q == "a")
    return rasp.SelectorWidth((earlier & ~same) | query_a).named("logic_width")


def _numeric_vocab(n: int) -> Any:
    """A numeric vocabulary: comparisons of numbers, a retrieval by argmin, an affine Map."""
    larger = rasp.SelectorWidth(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.GT)).named("larger")
    first_larger = rasp.Aggregate(rasp.Select(rasp.indices, rasp.Full(0), rasp.Comparison.EQ), larger)
    return (2 * first_larger.named("first") - rasp.tokens).named("numeric_mix")


def _last_token_flag(n: int) -> Any:
    """A categorical Aggregate at the last position of a Map of tokens to booleans."""
    is_c = rasp.Map(lambda t: t == "c", rasp.tokens).named("is_c")
    last = rasp.Aggregate(rasp.Select(rasp.indices, rasp.length - 1, rasp.Comparison.EQ), is_c)
    return rasp.numerical(rasp.Map(lambda b: 1 if b else 0, last.named("last_is_c"))).named("last_flag")


def _joined_pairs_compared(n: int) -> Any:
    """New values inside a program: a SequenceMap joining two tokens into strings the input
    never had, compared by a selector (its index in its sorted values, by a table of the two)."""
    pair = rasp.SequenceMap(lambda a, b: a + b, rasp.tokens, library.make_reverse(rasp.tokens)).named("pair")
    return rasp.SelectorWidth(rasp.Select(pair, pair, rasp.Comparison.LT)).named("smaller_pairs")


def _joined_pair_fetched(n: int) -> Any:
    """New values fetched by an Aggregate and answered: the first position's joined pair."""
    pair = rasp.SequenceMap(lambda a, b: a + b, rasp.tokens, library.make_reverse(rasp.tokens)).named("pair")
    return rasp.Aggregate(rasp.Select(rasp.indices, rasp.Full(0), rasp.Comparison.EQ), pair).named("first_pair")


def _reversed_words_counted(n: int) -> Any:
    """A Map to new tokens, reversed, then counted by equality (a table of two fetched tokens)."""
    upper = library.make_reverse(rasp.Map(str.upper, rasp.tokens)).named("upper_reversed")
    return rasp.SelectorWidth(rasp.Select(upper, upper, rasp.Comparison.EQ)).named("same_upper")


def _categorical_mean_of_numbers(n: int) -> Any:
    """A categorical Aggregate of a Map of tokens to numbers, selecting several positions: the
    mean, as RASP's evaluator gives it (a retrieval would answer one of them)."""
    weight = rasp.Map(lambda t: {"a": 1, "b": 2, "c": 4}[t], rasp.tokens).named("weight")
    return rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.LEQ), weight).named("mean_weight")


CONSTRUCTS: list[RaspExample] = [
    RaspExample("mean_of_smaller", _frac_of_smaller, (1, 2, 3)),
    RaspExample("window_score", _word_score, ("ab", "abc", "a", "abcd")),
    RaspExample("count_table", _count_table, ("a", "b", "c")),
    RaspExample("steps", _steps, ("a", "b")),
    RaspExample("selector_logic", _selector_logic, ("a", "b", "c")),
    RaspExample("numeric_vocab", _numeric_vocab, (1, 2, 4)),
    RaspExample("last_token_flag", _last_token_flag, ("a", "b", "c")),
    RaspExample("joined_pairs_compared", _joined_pairs_compared, ("a", "b", "c")),
    RaspExample("joined_pair_fetched", _joined_pair_fetched, ("a", "b", "c")),
    RaspExample("reversed_words_counted", _reversed_words_counted, ("a", "b", "c")),
    RaspExample("categorical_mean_of_numbers", _categorical_mean_of_numbers, ("a", "b", "c")),
]

TRACR: list[RaspExample] = [RaspExample(p.name, p.build, p.vocab) for p in TRACR_PROGRAMS]

RASP_PROGRAMS: list[RaspExample] = TRACR + CONSTRUCTS
