"""rasp/conditions.py: 0/1 SOps written as conditions a bracket joins, and the mean over every
position of thresholds tested against 0 written as minima and maxima, each compiled and
brute-forced against RASP's evaluator on every input of lengths 1..4."""

from __future__ import annotations

import pytest

import infoflow_dsl as ifl
from infoflow_dsl import rasp
from infoflow_dsl.rasp.agreement import agreement, every_input
from infoflow_dsl.rasp.conditions import band
from infoflow_dsl.rasp.translate import from_rasp, rasp_source

VOCAB, LENGTH = ["a", "b", "c"], 5


def test_a_map_with_one_or_two_changes_is_a_threshold_or_a_band() -> None:
    def number(p: str) -> str:
        return f"n({p})"

    condition, atoms = band((1.0, [("0.5", -1.0)]), number) or (None, None)
    assert condition is not None and condition("t") == "n(t) < 0.5" and atoms == ((number, "<", "0.5"),)
    condition, atoms = band((0.0, [("-0.5", 1.0), ("0.5", -1.0)]), number) or (None, None)
    assert condition is not None and condition("t") == "n(t) >= (-0.5) and n(t) < 0.5" and atoms is None
    assert band((0.0, [("1.5", 2.0)]), number) is None  # not 0/1


def _balance() -> object:
    prefix = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LEQ)
    signed = rasp.numerical(rasp.Map(lambda t: {"a": 1, "b": -1, "c": 0}[t], rasp.tokens))
    return rasp.numerical(rasp.Aggregate(prefix, signed, default=0)).named("balance")


def _mean_everywhere(flag: object) -> object:
    every = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.TRUE)
    return rasp.numerical(rasp.Aggregate(every, rasp.numerical(rasp.Map(lambda x: x, flag)), default=0))


def _never_negative() -> object:
    """1 where no prefix's balance is below 0 or at least 0.5: a minimum and a maximum over positions."""
    low = (_balance() < 0).named("low")
    high = rasp.Map(lambda v: v >= 0.5, _balance()).named("high")
    either = rasp.SequenceMap(lambda u, v: u or v, low, high).named("either")
    return rasp.Map(lambda m: m == 0, _mean_everywhere(either).named("share")).named("never")


def _somewhere_negative() -> object:
    low = (_balance() < 0).named("low")
    return rasp.Map(lambda m: m > 0, _mean_everywhere(low).named("share")).named("somewhere")


@pytest.mark.parametrize(("build", "extremes"), [(_never_negative, (" >= (-0.1) and max_<", " < 0.45]")),
                                                 (_somewhere_negative, ("[min_<", " < (-0.1)]"))])
def test_no_position_and_some_position_are_extremes_and_exact(build, extremes: tuple[str, str]) -> None:
    program = build()
    source = rasp_source(program, VOCAB, LENGTH)
    assert all(text in source for text in extremes) and "share" not in source  # no mean over positions is left
    checked = from_rasp(program, VOCAB, LENGTH)
    model = ifl.compile(checked, eps=1e-3, dtype="float64", samples=0)
    found = agreement(program, model, checked, list(every_input(VOCAB, 4)))
    assert found.positions > 0 and found.exact(1e-3), found
