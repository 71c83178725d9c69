"""analysis/growth.py: where an efficient target's parameters grow with T, and the claim that
the others do not, held against the compiler at T = 5 and T = 40 on every table program."""

from __future__ import annotations

import pytest
from programs import ALL, by_name

import infoflow_dsl as ifl
from infoflow_dsl.analysis.growth import t_growth
from infoflow_dsl.errors import CompileError, ProgramError

SHORT, LONG = 5, 40


def _program(source: str, length: int | None = None) -> ifl.Program:
    return ifl.parse_program("input x : R^2 in [0, 1]\nlength T = 8\n" + source, "growth.iflow", length=length)


@pytest.mark.parametrize("target, exponent", [
    ("target(t) = sum_<s> <x(s), x(t)>", 0.5),          # a product summed T times
    ("target sum_<s, t> x(s)[1] * x(t)[2]", 1.0),        # summed T² times
    ("target (sum_<s> x(s)[1])^2", 1.0),                 # a square of a range T times wider
    ("target (sum_<s> x(s)[1]) + max_<t> x(t)[1]^2", 0.0),  # the sum is exact; the square is not in it
    ("target mean_<s> x(s)[1]^2", 0.0),
    ("target x(argmax_<s> sum_<t> x(s)[1] * x(t)[2])[1]", 0.5),  # a score summed T times must stay under δ
    ("target sum_<t> x(argmax_<s> x(s)[1] * x(t)[2])[1]", 0.0),  # a retrieval: β sharpens it for free
])
def test_growth_exponents(target: str, exponent: float) -> None:
    growth = t_growth(_program(target + "\nmargin 0.01" if "argmax" in target else target).target)
    assert max((g.exponent for g in growth), default=0.0) == exponent


def test_the_report_says_where_parameters_grow() -> None:
    report = ifl.analyze(_program("target(t) = sum_<s> <x(s), x(t)>"))
    data = report.to_dict()["cost"]
    assert data["independent_of_T"] is False and data["T_exponent"] == 0.5
    assert data["T_growth"][0]["function"] == "<x(s), x(t)>"
    assert data["T_growth"][0]["span"]["line"] == 3
    text = report.to_text()
    assert "parameters grow with T as T^0.5" in text and "do not grow with T" not in text


def _nonzero(example: ifl.Program, length: int) -> int | None:
    try:
        program = ifl.parse_program(example.source, example.path, length=length)
        return ifl.compile(program, eps=1e-2, dtype="float64", device="cpu", samples=0).nonzero_parameter_count()
    except (ProgramError, CompileError):
        return None


def _verdicts(example) -> list[str | None]:
    """analyze's verdict at T = 5, then at T = 40 if it was efficient at 5 (None where the
    program does not check; analyze of an inefficient target at T = 40 compiles its gather
    route to count its parameters, tens of seconds for ineff_top4)."""
    verdicts: list[str | None] = []
    for length in (SHORT, LONG):
        try:
            verdicts.append(ifl.analyze(ifl.parse_program(example.source, example.path, length=length)).verdict)
        except ProgramError:
            verdicts.append(None)
        if verdicts[-1] != "efficient":
            break
    return verdicts


@pytest.mark.parametrize("name", [e.name for e in ALL])
def test_the_T_claim_holds_at_5_and_40(name: str) -> None:
    """Where analyze says the parameters do not grow with T, the compiled model at T = 40 has no
    more nonzero parameters than at T = 5; where it says they grow, they do. (A program that is
    not efficient at both lengths is refused by compile where analyze says inefficient; the
    verdicts are computed here, not at collection: every test process collects every module.)"""
    example = by_name(name)
    verdicts = _verdicts(example)
    if verdicts != ["efficient", "efficient"]:
        for length, verdict in zip((SHORT, LONG), verdicts, strict=False):
            if verdict == "inefficient":
                assert _nonzero(example, length) is None, f"analyze calls T = {length} inefficient, compile builds it"
        return
    independent = ifl.analyze(ifl.parse_program(example.source, example.path, length=LONG)).to_dict()[
        "cost"]["independent_of_T"]
    short, long = _nonzero(example, SHORT), _nonzero(example, LONG)
    assert short is not None and long is not None, "an efficient program compiles at both lengths"
    if independent:
        assert long <= short, f"analyze says T-independent, but {short} -> {long} nonzero parameters"
    else:
        assert long > short, f"analyze says the parameters grow with T, but {short} -> {long}"
