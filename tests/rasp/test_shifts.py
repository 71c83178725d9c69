"""RASP's undefined positions: a shifted read (Tracr's ``shift_by``: an Aggregate selecting key
t − k at query t) selects nothing at the first k positions, where RASP's value is None (or the
numerical Aggregate's default). The program is undefined there (``target(t : t >= k + 1)``) and
exact elsewhere: on every input of length ≤ 4 the compiled model agrees with the reference
evaluator at every defined position, and both with Tracr's documented semantics, written out
by hand below (never by an evaluator)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest

import infoflow_dsl as ifl
from infoflow_dsl import rasp

LENGTH, EPS = 4, 1e-3


def shift(offset: int, sop: rasp.SOp, default: Any = None) -> rasp.SOp:
    """``sop`` read ``offset`` positions back: the key k with q == k + offset at query q."""
    earlier = rasp.Select(rasp.indices, rasp.indices, lambda key, query: query == key + offset)
    return rasp.Aggregate(earlier, sop, default=default)


def shifted_by_hand(offset: int, values: Sequence[Any], default: Any = None) -> list[Any]:
    """Tracr's Aggregate of one selected key: the value at q − offset, the default where q < offset."""
    return [values[q - offset] if q >= offset else default for q in range(len(values))]


@dataclass(frozen=True)
class ShiftCase:
    """A RASP program built from shifts, its vocabulary and its output by hand."""

    name: str
    build: Callable[[], rasp.SOp]
    vocab: tuple[Any, ...]
    by_hand: Callable[[Sequence[Any]], list[Any]]
    first_defined: int  # the target's first position (from 1)


def _tripled(xs: Sequence[Any]) -> list[Any]:
    return [3 * x for x in xs]


def _bigrams(xs: Sequence[Any]) -> list[Any]:
    return [None if before is None else before + now for before, now in zip(shifted_by_hand(1, xs), xs, strict=True)]


CASES = [
    ShiftCase("shift_by_1", lambda: shift(1, rasp.tokens).named("previous"), ("a", "b", "c"),
              lambda xs: shifted_by_hand(1, xs), 2),
    ShiftCase("shift_by_2", lambda: shift(2, rasp.tokens).named("two_back"), ("a", "b", "c"),
              lambda xs: shifted_by_hand(2, xs), 3),
    ShiftCase("shift_of_shift", lambda: shift(1, shift(1, rasp.tokens)).named("twice"), ("a", "b", "c"),
              lambda xs: shifted_by_hand(2, xs), 3),
    ShiftCase("numerical", lambda: rasp.numerical(shift(1, rasp.numerical(rasp.Map(lambda x: 3 * x, rasp.tokens))))
              .named("tripled_before"), (1, 2, 4), lambda xs: shifted_by_hand(1, _tripled(xs)), 2),
    ShiftCase("numerical_default_0",
              lambda: rasp.numerical(shift(1, rasp.numerical(rasp.Map(lambda x: 3 * x, rasp.tokens)), default=0))
              .named("tripled_or_0"), (1, 2, 4), lambda xs: shifted_by_hand(1, _tripled(xs), default=0), 1),
    ShiftCase("bigram", lambda: rasp.SequenceMap(lambda a, b: a + b, shift(1, rasp.tokens), rasp.tokens)
              .named("bigram"), ("a", "b"), _bigrams, 2),
]


@cache
def compiled(name: str) -> tuple[rasp.SOp, ifl.Program, Any]:
    case = next(c for c in CASES if c.name == name)
    program = case.build()
    checked = ifl.from_rasp(program, case.vocab, LENGTH)
    return program, checked, ifl.compile(checked, eps=EPS, samples=0)


def inputs_of_length(vocab: Sequence[Any], length: int) -> list[list[Any]]:
    return [list(xs) for xs in itertools.product(vocab, repeat=length)]


def same(got: Any, want: Any, tolerance: float) -> bool:
    if isinstance(want, str) or isinstance(got, str):
        return got == want
    return abs(float(got) - float(want)) <= tolerance


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_target_is_undefined_before_the_first_selected_key(case: ShiftCase) -> None:
    _, checked, _ = compiled(case.name)
    target = checked.source.splitlines()[-1]
    assert target.startswith(f"target(t : t >= {case.first_defined})" if case.first_defined > 1 else "target(t)")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_model_reference_and_tracrs_semantics_agree_on_every_input_up_to_length_4(case: ShiftCase) -> None:
    program, checked, model = compiled(case.name)
    compared = 0
    for length in range(1, LENGTH + 1):
        rows = inputs_of_length(case.vocab, length)
        ids = ifl.encode(checked, rows)
        reference = ifl.decode(checked, ifl.evaluate(checked, ids))
        answered = ifl.decode(checked, model(ids))
        for xs, exact, got in zip(rows, reference, answered, strict=True):
            want = case.by_hand(xs)
            assert program(xs) == want, xs  # this package's RASP evaluator, as Tracr documents it
            assert [v is None for v in exact] == [v is None for v in want], (xs, exact)
            for position, (w, e, g) in enumerate(zip(want, exact, got, strict=True)):
                if w is None:
                    continue
                assert same(e, w, 1e-12), (xs, position, e, w)
                assert same(g, e, EPS), (xs, position, g, e)
                compared += 1
    assert compared > 0


def test_a_shifted_sop_read_by_a_selector_is_noted_as_undefined() -> None:
    """A Comparison of the shifted tokens with the tokens: RASP's evaluator raises on every input
    (its keys are None at position 0); the program says so (``# undefined in RASP``)."""
    before = shift(1, rasp.tokens)
    same_as_before = rasp.SelectorWidth(rasp.Select(before, rasp.tokens, rasp.Comparison.EQ)).named("repeats")
    with pytest.raises(ValueError):
        same_as_before(["a", "b"])
    notes = ifl.from_rasp(same_as_before, ("a", "b"), LENGTH).undefined_in_rasp
    assert any("are None at the first positions" in note for note in notes)
