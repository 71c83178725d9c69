"""from_rasp on random RASP programs (hypothesis): each is either refused (by from_rasp naming
the RASP node, or by compile naming the .iflow expression it cannot build), or compiled into a
model that agrees with RASP's evaluator on every input of lengths 1..3: never a traceback,
never a wrong answer."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl import rasp
from infoflow_dsl.errors import CompileError
from infoflow_dsl.rasp.agreement import agreement, every_input
from infoflow_dsl.rasp.literals import TranslationError

VOCAB = ("a", "b", "c")
LENGTH = 4
COMPARISONS = list(rasp.Comparison)
def _text(value: Any) -> str:
    """A value as text by its value, not its Python type: a value set holds 1 and 1.0 as one
    number (a mean that is whole is RASP's float), so a function telling them apart has no table."""
    return value if isinstance(value, str) else f"{value:g}"


FUNCTIONS = [lambda v: v == "a", lambda v: 1 if v in ("a", "b") else 3, lambda v: v * 2 if isinstance(v, int | float)
             else 0, lambda v: v if isinstance(v, int | float) else -1,
             lambda v: f"{_text(v)}!"]  # new tokens: strings the input never had
PAIRS = [lambda u, v: u == v, lambda u, v: (u if isinstance(u, int | float) else 1) + (v if isinstance(v, int | float)
                                                                                          else 2),
         lambda u, v: f"{_text(u)}{_text(v)}"]  # new values of two SOps: compared and fetched by their index


def _programs() -> st.SearchStrategy[Any]:
    leaves = st.sampled_from([rasp.tokens, rasp.indices, rasp.length])

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        selectors = st.builds(rasp.Select, children, children, st.sampled_from(COMPARISONS))
        return st.one_of(
            st.builds(rasp.Map, st.sampled_from(FUNCTIONS), children),
            st.builds(rasp.SequenceMap, st.sampled_from(PAIRS), children, children),
            st.builds(rasp.SelectorWidth, selectors),
            st.builds(lambda s, v: rasp.numerical(rasp.Aggregate(s, rasp.numerical(rasp.Map(
                lambda x: x if isinstance(x, int | float) else 1, v)), default=0)), selectors, children),
            st.builds(rasp.Aggregate, selectors, children),
        )

    return st.recursive(leaves, extend, max_leaves=5)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_programs())
def test_random_programs_compile_exact_or_are_refused_naming_a_node(program: Any) -> None:
    try:
        checked = ifl.from_rasp(program, VOCAB, LENGTH)
        model = ifl.compile(checked, eps=1e-3, dtype="float64", samples=0)
    except TranslationError as refusal:  # from_rasp: the RASP node, by its label
        assert "'" in str(refusal) or "from_rasp" in str(refusal)
        return
    except CompileError as refusal:  # compile: the .iflow expression it cannot build, and why
        assert ": " in str(refusal)
        return
    found = agreement(program, model, checked, list(every_input(list(VOCAB), 3)))
    assert found.exact(1e-3), (found, ifl.rasp.translate.rasp_source(program, VOCAB, LENGTH))
