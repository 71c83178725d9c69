"""The differential fuzz campaign's seeded CI sample (``bench/fuzz.py`` runs it at scale): a few
generated programs, each refused with a located message or compiled within its a-priori bound
(``fuzz_property``); the generators reach every construct they name; and the oracle's own parts
(what "located" means, the measurement) on programs whose answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_cases import IFLOW_CONSTRUCTS, RASP_CONSTRUCTS, Case, case_from_file, fuzz_cases, run_case
from fuzz_property import check_iflow, located, quotes_source
from hypothesis import HealthCheck, Phase, example, find, given, seed, settings
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl.errors import CompileError

#: the held-out program that a certificate once lied about (325 of 340 inputs wrong): a key
#: mixing a token and its position with a non-dyadic constant
STABLE_SORT = """input x : token {0, 1, 2, 3}
length T = 4
let key(t) = (x(t) + 0.3 * (t - 1))
target(t) = sum_<s> [key(s) < key(t)]
"""


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@seed(65)
@example(Case("iflow", STABLE_SORT, 1e-3, "float64"))
@given(fuzz_cases())
def test_a_generated_program_is_refused_where_it_says_or_compiled_within_its_bound(case: Case) -> None:
    outcome = run_case(case)
    assert not outcome.failed, f"{outcome.kind}: {outcome.detail}\n{case.source}"


REGRESSIONS = sorted((Path(__file__).parent / "fuzz_regressions").glob("*.*"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[path.name for path in REGRESSIONS])
def test_every_bug_the_campaign_found_stays_fixed(path: Path) -> None:
    """Each minimal failing program bench/fuzz.py wrote (its header says what failed then)."""
    outcome = run_case(case_from_file(path))
    assert not outcome.failed, f"{outcome.kind}: {outcome.detail}"


@pytest.mark.parametrize(("language", "construct"), [("iflow", name) for name in IFLOW_CONSTRUCTS]
                         + [("rasp", name) for name in RASP_CONSTRUCTS])
def test_the_generator_reaches_every_construct_it_names(language: str, construct: str) -> None:
    found = find(fuzz_cases(), lambda case: case.language == language and construct in case.constructs(),
                 settings=settings(max_examples=2000, database=None, derandomize=True, phases=[Phase.generate],
                                   suppress_health_check=list(HealthCheck)))
    assert construct in found.constructs()


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzz_cases().filter(lambda case: case.language == "iflow" and "vectors" not in case.constructs()))
def test_most_generated_token_programs_check(case: Case) -> None:
    """A program the front end refuses says where; the generator's programs parse or are refused."""
    try:
        ifl.parse_program(case.source, "fuzz.iflow")
    except ifl.ProgramError as error:
        assert located(error, case.source)


def test_located_means_a_line_and_column_a_quoted_construct_or_the_whole_target() -> None:
    source = "input x : R^2 in [-1, 1]\nlength T = 4\ntarget x(argmin_<s> x(s)[1])\n"
    assert quotes_source("argmin_<s> x(s)[1] retrieves a token", source)
    assert located(CompileError("argmin_<s> x(s)[1] retrieves a token"), source)
    assert located(CompileError("line 3, column 8, in `let key`: cannot compile"), source)
    assert located(CompileError("the a-priori bound 1e-3 is above ε"), source)
    assert not located(CompileError("internal: no route"), source)
    with pytest.raises(ifl.ProgramError) as raised:
        ifl.parse_program(source.replace("x(s)[1]", "x(s)[3]"), "bad.iflow")
    assert located(raised.value, source)


@given(st.sampled_from(["0.5", "0.25", "2"]))
@settings(max_examples=3, deadline=None, database=None)
def test_a_dyadic_stable_sort_compiles_and_measures_within_its_bound(constant: str) -> None:
    outcome = check_iflow(STABLE_SORT.replace("0.3", constant))
    assert outcome.kind == "compiled", outcome.detail
