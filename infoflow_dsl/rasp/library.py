"""Tracr's library of RASP programs (``tracr/compiler/lib.py``), written from its documentation
in :mod:`infoflow_dsl.rasp`, with the same names and arguments, so that each compiles through
``from_rasp`` as Tracr's authors wrote it.

:data:`TRACR_PROGRAMS` pairs each with the vocabulary of its hand translation in
``compiled_examples/tracr/`` (the 14 programs Tracr's own tests compile), which the tests
compare it with on every short input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import rasp


def make_length() -> rasp.SOp:
    """The length of the input at every position: SelectorWidth of the all-true selector."""
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE).named("all_true_selector")
    return rasp.SelectorWidth(everything).named("length")


#: Tracr's library computes the length once, with :func:`make_length` (a SelectorWidth), and its
#: programs read this SOp where ``rasp.length`` would do: ``from_rasp`` must see it as the length.
length = make_length()


def make_reverse(sop: rasp.SOp) -> rasp.SOp:
    """``sop`` reversed: position i reads position length − i − 1."""
    opposite = (length - rasp.indices).named("opp_idx")
    opposite = (opposite - 1).named("opp_idx-1")
    flip = rasp.Select(rasp.indices, opposite, rasp.Comparison.EQ).named("reverse_selector")
    return rasp.Aggregate(flip, sop).named("reverse")


def make_hist() -> rasp.SOp:
    """How many tokens equal the token at each position."""
    same = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ).named("hist_selector")
    return rasp.SelectorWidth(same).named("hist")


def make_sort_unique(vals: rasp.SOp, keys: rasp.SOp) -> rasp.SOp:
    """``vals`` ordered by ``keys`` (assumed distinct): position i reads the value whose key
    has i smaller keys."""
    smaller = rasp.Select(keys, keys, rasp.Comparison.LT).named("smaller")
    target_pos = rasp.SelectorWidth(smaller).named("target_pos")
    moved = rasp.Select(target_pos, rasp.indices, rasp.Comparison.EQ)
    return rasp.Aggregate(moved, vals).named("sort")


def make_sort(vals: rasp.SOp, keys: rasp.SOp, *, max_seq_len: int, min_key: float) -> rasp.SOp:
    """A stable sort by keys that may repeat: each key made unique as key + min_key·i/max_seq_len."""
    unique = rasp.SequenceMap(lambda x, i: x + min_key * i / max_seq_len, keys, rasp.indices).named("keys")
    return make_sort_unique(vals, unique)


def make_sort_freq(max_seq_len: int) -> rasp.SOp:
    """The tokens ordered by decreasing frequency."""
    hist = (-1 * make_hist()).named("hist")
    return make_sort(rasp.tokens, hist, max_seq_len=max_seq_len, min_key=1).named("sort_freq")


def make_frac_prevs(bools: rasp.SOp) -> rasp.SOp:
    """The fraction of positions up to each one where ``bools`` holds."""
    bools = rasp.numerical(bools)
    prevs = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    return rasp.numerical(rasp.Aggregate(prevs, bools, default=0)).named("frac_prevs")


def make_pair_balance(sop: rasp.SOp, open_token: str, close_token: str) -> rasp.SOp:
    """The fraction of open tokens minus that of close tokens up to each position."""
    bools_open = rasp.numerical(sop == open_token).named("bools_open")
    opens = rasp.numerical(make_frac_prevs(bools_open)).named("opens")
    bools_close = rasp.numerical(sop == close_token).named("bools_close")
    closes = rasp.numerical(make_frac_prevs(bools_close)).named("closes")
    balance = rasp.numerical(rasp.LinearSequenceMap(opens, closes, 1, -1))
    return balance.named("pair_balance")


def make_shuffle_dyck(pairs: Sequence[str]) -> rasp.SOp:
    """1 where the whole input is a shuffle of balanced pairs (no prefix closes more than it opened)."""
    balances = [make_pair_balance(rasp.tokens, pair[0], pair[1]) for pair in pairs]
    any_negative = balances[0] < 0
    for balance in balances[1:]:
        any_negative = any_negative | (balance < 0)
    any_negative = rasp.numerical(rasp.Map(lambda x: x, any_negative)).named("any_negative")
    select_all = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.TRUE).named("select_all")
    has_neg = rasp.numerical(rasp.Aggregate(select_all, any_negative, default=0)).named("has_neg")
    all_zero = balances[0] == 0
    for balance in balances[1:]:
        all_zero = all_zero & (balance == 0)
    select_last = rasp.Select(rasp.indices, length - 1, rasp.Comparison.EQ).named("select_last")
    last_zero = rasp.Aggregate(select_last, all_zero).named("last_zero")
    not_has_neg = (~has_neg).named("not_has_neg")
    return (last_zero & not_has_neg).named("shuffle_dyck")


def make_shuffle_dyck2() -> rasp.SOp:
    return make_shuffle_dyck(pairs=["()", "{}"]).named("shuffle_dyck2")


def make_shuffle_dyck3() -> rasp.SOp:
    return make_shuffle_dyck(pairs=["()", "[]", "{}"]).named("shuffle_dyck3")


def shift_by(offset: int, sop: rasp.SOp) -> rasp.SOp:
    """``sop`` shifted right by ``offset`` (None in the first ``offset`` positions)."""
    shifted = rasp.Select(rasp.indices, rasp.indices, lambda k, q: q == k + offset).named(f"select_off_by_{offset}")
    return rasp.Aggregate(shifted, sop, default=None).named(f"shift_by({offset})")


def detect_pattern(sop: rasp.SOp, pattern: Sequence[Any]) -> rasp.SOp:
    """True at the positions where ``pattern`` ends."""
    detectors = []
    for i, element in enumerate(reversed(pattern)):
        detector = sop == element
        if i != 0:
            detector = shift_by(i, detector)
        detectors.append(detector)
    detected = detectors.pop()
    while detectors:
        detected = detected & detectors.pop()
    return detected.named(f"detect_pattern({pattern})")


def make_count_less_freq(n: int) -> rasp.SOp:
    """How many tokens occur at most n times."""
    hist = make_hist().named("hist")
    select_less = rasp.Select(hist, hist, lambda x, y: x <= n).named("select_less")
    return rasp.SelectorWidth(select_less).named("count_less_freq")


def make_count(sop: rasp.SOp, token: Any) -> rasp.SOp:
    """How many positions hold ``token``."""
    return rasp.SelectorWidth(rasp.Select(sop, sop, lambda k, q: k == token)).named(f"count_{token}")


def make_nary_sequencemap(f: Callable[..., Any], *sops: rasp.SOp) -> rasp.SOp:
    """f of several SOps at each position, through SequenceMaps of tuples."""
    values = rasp.SequenceMap(lambda x, y: (x, y), sops[0], sops[1])
    for sop in sops[2:]:
        values = rasp.SequenceMap(lambda x, y: (*x, y), values, sop)
    return rasp.Map(lambda x: f(*x), values)


@dataclass(frozen=True)
class LibraryProgram:
    """One of Tracr's programs as its tests compile it: its builder, and the vocabulary and the
    file of its hand translation in ``compiled_examples/tracr/``."""

    name: str
    build: Callable[[int], rasp.SOp]  # max_seq_len → the program
    vocab: tuple[Any, ...]


TRACR_PROGRAMS: tuple[LibraryProgram, ...] = (
    LibraryProgram("count_a", lambda n: make_count(rasp.tokens, "a"), ("a", "b", "c")),
    LibraryProgram("detect_pattern_abc", lambda n: detect_pattern(rasp.tokens, "abc"), ("a", "b", "c")),
    LibraryProgram("frac_prevs", lambda n: make_frac_prevs(rasp.tokens == "l"), ("h", "e", "l", "o")),
    LibraryProgram("hist", lambda n: make_hist(), ("a", "b", "c", "d")),
    LibraryProgram("length", lambda n: make_length(), ("a", "b", "c", "d")),
    LibraryProgram("nary_add", lambda n: make_nary_sequencemap(lambda x, y, z: x + y - z, rasp.tokens, rasp.tokens,
                                                              rasp.indices).named("nary_add"), (1, 2, 3)),
    LibraryProgram("pair_balance", lambda n: make_pair_balance(rasp.tokens, "(", ")"), ("(", ")", "a", "b", "c")),
    LibraryProgram("reverse", lambda n: make_reverse(rasp.tokens), ("a", "b", "c", "d")),
    LibraryProgram("shift_by_2", lambda n: shift_by(2, rasp.tokens), ("a", "b", "c", "d")),
    LibraryProgram("shuffle_dyck2", lambda n: make_shuffle_dyck2(), ("(", ")", "{", "}")),
    LibraryProgram("shuffle_dyck3", lambda n: make_shuffle_dyck3(), ("(", ")", "[", "]", "{", "}")),
    LibraryProgram("sort", lambda n: make_sort(rasp.tokens, rasp.tokens, max_seq_len=n, min_key=1), (1, 2, 3, 4)),
    LibraryProgram("sort_freq", make_sort_freq, (1, 2, 3, 4)),
    LibraryProgram("sort_unique", lambda n: make_sort_unique(rasp.tokens, rasp.tokens), tuple(range(1, 11))),
)
