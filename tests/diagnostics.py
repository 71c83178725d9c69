"""Tables of bad programs, each row with the exact line, column and message of every diagnostic
(read off the program text: the column is where the offending text starts), shared by the
checker's, the declarations' and the macros' tests: a row is checked in process and through
``infoflowc parse`` (exit 2, every diagnostic on stderr)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.errors import ProgramError

HEADER = "input x : R^2\nlength T = 4\n"  # lines 1 and 2; most bad targets sit on line 3

Expected = list[tuple[int, int, str]]


def bad(name: str, body: str, *diagnostics: tuple[int, int, str], header: str = HEADER):
    """A table row: the program ``header + body`` and the diagnostics it must produce, in order."""
    return pytest.param(header + body + "\n", list(diagnostics), id=name)


def diagnostics_of(source: str, path: str = "f.iflow", **overrides) -> Expected:
    """(line, column, message) of every diagnostic that checking ``source`` raises."""
    with pytest.raises(ProgramError) as error:
        ifl.parse_program(source, path, **overrides)
    assert all(d.path == path for d in error.value.diagnostics)
    return [(d.line, d.column, d.message) for d in error.value.diagnostics]


def assert_the_cli_reports(folder: Path, source: str, expected: Expected) -> None:
    """``infoflowc parse`` on ``source`` exits 2 and prints each expected diagnostic, the first one first."""
    path = folder / "bad.iflow"
    path.write_text(source, encoding="utf-8")
    code, out, err = run_cli(["parse", str(path)])
    assert (code, out) == (2, "")
    assert "Traceback" not in err
    line, column, message = expected[0]
    assert err.startswith(f"{path}:{line}:{column}: error: {message}\n")
    for line, column, message in expected:
        assert f"{path}:{line}:{column}: error: {message}\n" in err


def assert_distinct(table: list) -> None:
    """The rows of ``table`` are distinct programs."""
    sources = [param.values[0] for param in table]
    assert len(set(sources)) == len(sources)


TOKEN_HEADER = 'input x : token {"a", "b", "c"}\nlength T = 4\n'  # a categorical token program, lines 1-2
NUMERIC_HEADER = "input x : token {1, 2, 3}\nlength T = 4\n"
VECTOR_HEADER = HEADER

#: Bad token programs (language v3), each with the exact line, column and message of every
#: diagnostic (docs/language.md, "Tokens (v3)" and "Errors").
BAD_TOKEN_PROGRAMS = [
    bad("categorical-ordered", 'target(t) = [x(t) < "a"]',
        (3, 14, '\'<\' orders numbers, but the vocabulary {"a", "b", "c"} is categorical: its tokens are compared '
                'with == and != only'), header=TOKEN_HEADER),
    bad("categorical-vs-number", "target(t) = [x(t) == 1]",
        (3, 14, 'a categorical token is compared with a number (1): compare it with a token such as "a" or x(s)'),
        header=TOKEN_HEADER),
    bad("literal-not-in-vocabulary", 'target(t) = [x(t) == "z"]',
        (3, 22, '"z" is not in the vocabulary {"a", "b", "c"}'), header=TOKEN_HEADER),
    bad("categorical-arithmetic", "target(t) = x(t) + 1",
        (3, 13, 'a categorical token (one of {"a", "b", "c"}) is not a number: compare it with == or != inside '
                '[...], e.g. [x(t) == "a"]'), header=TOKEN_HEADER),
    bad("categorical-absolute-value", "target(t) = |x(t)|",
        (3, 14, 'a categorical token (one of {"a", "b", "c"}) is not a number: compare it with == or != inside '
                '[...], e.g. [x(t) == "a"]'), header=TOKEN_HEADER),
    bad("len-over-vectors", "target(t) = x(t)[1] * len",
        (3, 23, "len is the run-time length of a token input; this program's input is a sequence of vectors (R^d), "
                "which the model reads at its full length T only (it has no way to tell a shorter input from a "
                "longer one), so write T"), header=VECTOR_HEADER),
    bad("len-in-a-condition-over-vectors", "target sum_<s : s < len> x(s)[1]",
        (3, 21, "len is the run-time length of a token input; this program's input is a sequence of vectors (R^d), "
                "which the model reads at its full length T only (it has no way to tell a shorter input from a "
                "longer one), so write T"), header=VECTOR_HEADER),
    bad("bracket-over-continuous-values", "target sum_<s> [x(s)[1] < 0]",
        (3, 16, "this bracket compares continuous values (the input is R^d), which can lie arbitrarily close: "
                "declare `margin δ` (the guarantee then holds on inputs whose compared values are equal or at "
                "least δ apart)"), header=VECTOR_HEADER),
    bad("offset-below-one", "target(t) = x(t - 1)",
        (3, 15, "position t - 1 can be 0, outside 1..len; restrict it with a condition (T = 4, t = 1, len = 1)"),
        header=TOKEN_HEADER),
    bad("reflection-past-len", "target(t) = x(len + 2 - t)",
        (3, 15, "position len + 2 - t can be 2, outside 1..len; restrict it with a condition (T = 4, t = 1, "
                "len = 1)"), header=TOKEN_HEADER),
    bad("mirror-below-one", "target(t) = x(2 - t)",
        (3, 15, "position 2 - t can be 0, outside 1..len; restrict it with a condition (T = 4, t = 2, len = 2)"),
        header=TOKEN_HEADER),
    bad("len-plus-one", "target(t) = x(len + 1)",
        (3, 15, "position len + 1 can be 2, outside 1..len; restrict it with a condition (T = 4, t = 1, len = 1)"),
        header=TOKEN_HEADER),
    bad("last-position-past-len", "target(t) = x(T)",
        (3, 15, "position T can be 4, outside 1..len; restrict it with a condition (T = 4, t = 1, len = 1)"),
        header=TOKEN_HEADER),
    bad("fixed-position-past-len", "target(t : t >= 2) = x(3)",
        (3, 24, "position 3 is outside 1..len; restrict it with a condition (T = 4, t = 2, len = 2)"),
        header=TOKEN_HEADER),
    bad("empty-range-at-len-1", "target sum_<s, r : s != r> [x(s) == x(r)]",
        (3, 8, "the range of this sum is empty (T = 4, len = 1)"), header=TOKEN_HEADER),
    bad("duplicate-entry", "target(t) = 1",
        (1, 28, 'token "a" is already in the vocabulary (column 18)'),
        header='input x : token {"a", "b", "a"}\nlength T = 4\n'),
    bad("duplicate-number", "target(t) = 1",
        (1, 24, "token 1 is already in the vocabulary (column 18)"),
        header="input x : token {1, 2, 1.0}\nlength T = 4\n"),
    bad("empty-vocabulary", "target(t) = 1",
        (1, 11, 'the vocabulary is empty: list its tokens, e.g. token {"a", "b"} or token {1, 2, 3}'),
        header="input x : token {}\nlength T = 4\n"),
    bad("mixed-vocabulary", "target(t) = 1",
        (1, 23, "a vocabulary is all quoted names (categorical) or all numbers (numeric), not both"),
        header='input x : token {"a", 1}\nlength T = 4\n'),
    bad("domain-on-tokens", "target(t) = 1",
        (1, 23, "a token input has no domain: its tokens are the vocabulary's"),
        header='input x : token {"a"} in [0, 1]\nlength T = 4\n'),
    bad("vocabulary-as-a-constant-space", "const c : token {1} = 1\ntarget(t) = c",
        (3, 11, "a vocabulary token {...} is an input's space; a constant's is R, R^n or R^{m x n}"),
        header=TOKEN_HEADER),
    bad("quoted-in-numeric", 'target(t) = [x(t) == "a"]',
        (3, 22, '"a" is a quoted token, but the vocabulary {1, 2, 3} is numeric: write its tokens as numbers'),
        header=NUMERIC_HEADER),
    bad("literal-without-tokens", 'margin 0.1\ntarget [x(1)[1] == "a"]',
        (4, 20, 'the token literal "a" needs a token input (input x : token {"a", ...})'), header=VECTOR_HEADER),
    bad("target-is-a-literal", 'target(t) = "a"',
        (3, 13, "the target is a token literal; a target is a number, a vector, or a token x(...) of the input "
                "(write [condition] for 1 where it holds, 0 elsewhere)"), header=TOKEN_HEADER),
    bad("bad-position-form", "target(t) = x(t + len)",
        (3, 15, "a position inside x(...) is v + c, v - c, c - v, len, len - c or len + c - v (v a position "
                "variable, c a whole number)"), header=NUMERIC_HEADER),
    bad("syntax-bracket-without-comparison", "target(t) = [x(t)]",
        (3, 18, 'unexpected \']\': a bracket holds a comparison: [x(t) == "a"], [a < b and not c >= 1]'),
        header=TOKEN_HEADER),
    bad("syntax-vocabulary-without-comma", "target(t) = 1",
        (1, 22, 'unexpected \'"b"\': a vocabulary is written token {"a", "b", "c"} (quoted names) or '
                'token {1, 2, 3} (numbers)'), header='input x : token {"a" "b"}\nlength T = 4\n'),
]
