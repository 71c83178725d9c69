"""One generated case of the differential fuzz campaign (``bench/fuzz.py``, ``tests/test_fuzz.py``):
a token program, a program over vectors or a RASP program, with the ε and dtype it is compiled
at; the constructs it uses (for the summary), and :func:`run_case`, the property
(:mod:`fuzz_property`) with a time limit."""

from __future__ import annotations

import re
import signal
import typing
from dataclasses import dataclass
from pathlib import Path

from fuzz_property import Outcome, check_iflow, check_rasp
from hypothesis import strategies as st
from random_programs import DYADIC, NON_DYADIC, random_programs
from rasp_random import COMPARISONS, rasp_programs
from token_programs import token_programs

#: (ε, dtype) a case is compiled at
SETTINGS = ((1e-3, "float64"), (1e-6, "float64"), (1e-2, "float32"))
SECONDS = 90  # a case that runs longer is the failure "timeout"

#: the constructs of a .iflow program, by a pattern of its text
IFLOW_CONSTRUCTS = {
    "numeric tokens": r"token \{[-0-9]", "categorical tokens": r'token \{"', "vectors": r"R\^",
    "sum": r"sum_<", "mean": r"mean_<", "min": r"(?<![a-z])min_<", "max": r"(?<![a-z])max_<", "top": r"top\(",
    "argmin": r"argmin_<", "argmax": r"argmax_<", "let": r"^let ", "table": r"^table ", "len": r"\blen\b",
    "offset": r"[a-z] - 1\)", "condition": r"_<[^>]*:", "bracket": r"\[[^\]]*(==|!=|<|>)", "and/or/not":
    r"\b(and|or|not)\b", "per-token": r"^target\(t", "non-dyadic constant": "|".join(
        re.escape(c) for c in NON_DYADIC), "stable-sort key": r"^let key", "token table output": r"= flip\(",
}
#: the constructs of a RASP program, by a pattern of its text
RASP_CONSTRUCTS = {
    "Map": r"rasp\.Map\(", "SequenceMap": r"SequenceMap\(", "Aggregate (categorical)": r"= rasp\.Aggregate\(",
    "Aggregate (numerical)": r"numerical\(rasp\.Aggregate", "SelectorWidth": r"SelectorWidth\(",
    "numerical Map": r"numerical\(rasp\.Map", "shift": r"shift_by\(", "selector logic": r"(~|\) [&|] )rasp\.Select|~",
    **{f"Select {c}": rf"Comparison\.{c}\b" for c in COMPARISONS},
}


@dataclass(frozen=True)
class Case:
    """A generated program: ``language`` is ``iflow`` or ``rasp``; ``source`` its text."""

    language: str
    source: str
    eps: float
    dtype: str

    @property
    def suffix(self) -> str:
        return ".py" if self.language == "rasp" else ".iflow"

    def constructs(self) -> list[str]:
        """The constructs the program uses (:data:`IFLOW_CONSTRUCTS`, :data:`RASP_CONSTRUCTS`)."""
        table = RASP_CONSTRUCTS if self.language == "rasp" else IFLOW_CONSTRUCTS
        return [name for name, pattern in table.items() if re.search(pattern, self.source, re.MULTILINE)]


def _vector_programs() -> st.SearchStrategy[str]:
    """The evaluator's random programs over vectors, with non-dyadic constants, at T in 3..5."""
    return random_programs(constants=DYADIC[:-1] + NON_DYADIC, lengths=(3, 5)).map(lambda case: case[0])


def fuzz_cases() -> st.SearchStrategy[Case]:
    """Token programs (half), programs over vectors and RASP programs, each at an (ε, dtype)."""
    tokens = token_programs().map(lambda case: ("iflow", case[0]))
    programs = st.one_of(tokens, tokens,
                         _vector_programs().map(lambda source: ("iflow", source)),
                         rasp_programs().map(lambda source: ("rasp", source)))
    return st.builds(lambda program, setting: Case(program[0], program[1], *setting), programs,
                     st.sampled_from(SETTINGS))


class _Late(BaseException):
    """Raised by the alarm when a case runs past :data:`SECONDS` (a BaseException: the property's
    ``except Exception`` must not take it for a crash)."""


def _alarm(signum: int, frame: typing.Any) -> None:
    raise _Late


def run_case(case: Case, seconds: int = SECONDS) -> Outcome:
    """The property on ``case``, or the failure ``timeout`` after ``seconds`` (SIGALRM)."""
    check = check_rasp if case.language == "rasp" else check_iflow
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        return check(case.source, case.eps, case.dtype)
    except _Late:
        return Outcome("timeout", f"ran past {seconds} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def case_from_file(path: Path) -> Case:
    """A failure file ``bench/fuzz.py`` wrote (or a regression kept in tests/fuzz_regressions/):
    its program, at the ε and dtype its header names."""
    text = path.read_text()
    setting = re.search(r"eps = (\S+), dtype = (\w+)", text)
    eps, dtype = (float(setting.group(1)), setting.group(2)) if setting else (1e-3, "float64")
    source = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# "))
    return Case("rasp" if path.suffix == ".py" else "iflow", source, eps, dtype)
