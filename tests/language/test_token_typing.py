"""Language v3 (language/token_typing.py and the checker around it): the table of bad token programs
with exact lines, columns and messages, in process and through the CLI; the syntax labels as a
first statement and after another; what good token programs check to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_runner import run_cli
from diagnostics import BAD_TOKEN_PROGRAMS, assert_distinct, assert_the_cli_reports, diagnostics_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import TOKENS
from strategies import expression_strategy, mutate_tokens

import infoflow_dsl as ifl
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.parse import parse
from infoflow_dsl.language.printer import print_program
from infoflow_dsl.language.syntax_errors import SYNTAX_EXAMPLES


def test_the_table_is_large_and_distinct() -> None:
    assert len(BAD_TOKEN_PROGRAMS) >= 12
    assert_distinct(BAD_TOKEN_PROGRAMS)


@pytest.mark.parametrize(("source", "expected"), BAD_TOKEN_PROGRAMS)
def test_bad_token_program_diagnostics(source: str, expected: list[tuple[int, int, str]]) -> None:
    assert diagnostics_of(source) == expected


@pytest.mark.parametrize(("source", "expected"), BAD_TOKEN_PROGRAMS)
def test_bad_token_program_through_the_cli(tmp_path: Path, source: str, expected: list[tuple[int, int, str]]) -> None:
    assert_the_cli_reports(tmp_path, source, expected)


TOKEN_LABELS = [label for label in SYNTAX_EXAMPLES if "vocabulary" in label or "bracket" in label]
LABELLED = [(label, example) for label in TOKEN_LABELS for example in SYNTAX_EXAMPLES[label]]


@pytest.mark.parametrize(("label", "example"), LABELLED, ids=[e for _, e in LABELLED])
@pytest.mark.parametrize("before", ["", "length T = 4\n"], ids=["first", "after-another"])
def test_each_token_syntax_example_gets_its_label_wherever_it_stands(label: str, example: str, before: str) -> None:
    with pytest.raises(ifl.ProgramError) as error:
        parse(before + example + "\n", "f.iflow")
    (diagnostic,) = error.value.diagnostics
    assert diagnostic.line == before.count("\n") + 1
    assert diagnostic.message.endswith(": " + label)


@pytest.mark.parametrize("example", TOKENS, ids=lambda e: e.name)
def test_every_token_program_checks(example) -> None:
    program = ifl.parse_program(example.source, example.path)
    assert program.over_tokens and program.dimension == 1
    assert program.vocabulary is not None and program.vocabulary.size >= 1


def test_what_token_programs_check_to() -> None:
    header = 'input x : token {"a", "b"}\nlength T = 4\n'
    reverse = ifl.parse_program(header + "target(t) = x(len + 1 - t)\n")
    assert reverse.token_output
    assert reverse.target == ir.Token(ir.ReflectedPosition(ir.PositionVariable("t"), 1), ir.TOKEN)
    count = ifl.parse_program(header + 'target(t) = (sum_<s> [x(s) == "b"]) + len\n')
    assert not count.token_output
    bracket = ir.Bracket(ir.Compare("==", ir.Token(ir.PositionVariable("s"), ir.TOKEN), ir.TokenLiteral(1, "b")))
    assert count.target == ir.Arithmetic("+", ir.Reduce("sum", ("s",), (), bracket, ir.SCALAR),
                                         ir.PositionNumber(ir.RunLength()), ir.SCALAR)
    numeric = ifl.parse_program("input x : token {1, 2.5}\nlength T = 4\ntarget(t) = [t - 1 < x(t)]\n")
    assert numeric.vocabulary == ir.Vocabulary(("1", "2.5"), (1.0, 2.5))
    assert numeric.target.condition.left == ir.Arithmetic(  # type: ignore[attr-defined]
        "-", ir.PositionNumber(ir.PositionVariable("t")), ir.NumberLiteral(1.0), ir.SCALAR)


@pytest.mark.parametrize(("text", "position"), [
    ("x(1 + t)", ir.PositionVariable("t", offset=1)),
    ("x(-1 + t)", ir.PositionVariable("t", offset=-1)),
    ("x(len - 1)", ir.RunLength(offset=-1)),
    ("x(len + 1 - t)", ir.ReflectedPosition(ir.PositionVariable("t"), 1)),
    ("x(4 - t)", ir.ReflectedPosition(ir.PositionVariable("t"), 4, from_length=False)),
])
def test_position_expressions_inside_x(text: str, position: ir.Expr) -> None:
    header = "input x : token {1, 2}\nlength T = 4\n"
    program = ifl.parse_program(header + f"target(t : t >= 2 and t < len and len == 3) = {text}\n")
    assert program.target == ir.Token(position, ir.SCALAR)  # type: ignore[arg-type]


def test_a_vector_program_keeps_its_v2_errors() -> None:
    """Positions are numbers only over a token vocabulary: a v1/v2 program reads as before."""
    assert diagnostics_of("input x : R^2\nlength T = 4\ntarget max_<t> x(t)[1] + t\n") == [
        (3, 26, "a position is used as a number; positions only index x(...) or appear in conditions")]


def test_a_bracket_over_vectors_with_a_margin_checks() -> None:
    program = ifl.parse_program("input x : R^2\nlength T = 4\nmargin 0.1\ntarget sum_<s> [x(s)[1] < 0]\n")
    assert isinstance(program.target.body, ir.Bracket)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- fuzz

TOKEN_PATTERN = re.compile(
    r'#[^\n]*|\n|"[^"\n]*"|top\([0-9]+\)_<|(?:argmin|argmax|min|max|sum|mean)_<|\|\||!=|<=|>=|=='
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*|\S"
)
TOKEN_PROGRAM_TOKENS = [TOKEN_PATTERN.findall(example.source) for example in TOKENS]
REPLACEMENTS = ['"a"', '"z"', '"("', "len", "t", "s", "r", "T", "1", "0", "3", "==", "<", "!=", "and", "or", "not",
                "[", "]", "(", ")", "+", "-", "*", "x", "token", "{", "}", ","]


@st.composite
def mutated_token_programs(draw: st.DrawFn) -> str:
    """A token program of the table with 1-3 token mutations: delete, duplicate, swap, insert or replace."""
    tokens = [t for t in draw(st.sampled_from(TOKEN_PROGRAM_TOKENS)) if not t.startswith("#")]
    replacement = st.sampled_from(REPLACEMENTS)
    return mutate_tokens(draw, tokens, draw(st.integers(1, 3)), inserted=lambda: draw(replacement),
                         replaced=lambda _token: draw(replacement))


@settings(deadline=None, database=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_token_programs())
def test_fuzz_mutated_token_programs_never_crash_analyze(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    """Exit 0 with a verdict, or exit 2 with located diagnostics; never a traceback."""
    path = tmp_path_factory.getbasetemp() / "fuzz_tokens.iflow"
    path.write_text(text, encoding="utf-8")
    code, out, err = run_cli(["analyze", str(path)])
    assert "Traceback" not in out + err
    assert code in (0, 2), (code, err)
    if code == 0:
        assert "verdict" in out and err == ""
    else:
        assert err.startswith(f"{path}:")


TOKEN_HEADERS = ['input x : token {"a", "b"}\nlength T = 3\n', "input x : token {1, 2.5}\nlength T = 2\n"]
SMALL = expression_strategy(st.sampled_from(["x", "t", "s", "len", "T", "a"]), st.sampled_from(["0", "1", "2"]),
                            st.sampled_from(["1", "2", "3"]), max_leaves=10)


@settings(deadline=None, database=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(header=st.sampled_from(TOKEN_HEADERS), body=SMALL, per_token=st.booleans())
def test_fuzz_well_formed_token_programs_never_crash(tmp_path_factory: pytest.TempPathFactory, header: str,
                                                      body: ast.Expr, per_token: bool) -> None:
    """Random well-formed targets over a token input: the checker, the reference and analyze never crash."""
    target = ast.TargetDecl(body, variable=ast.Binder("t") if per_token else None)
    text = header + print_program(ast.SourceProgram((target,)))
    try:
        program = ifl.parse_program(text, "f.iflow")
    except ifl.ProgramError as error:
        assert all(d.line >= 1 for d in error.diagnostics)
        return
    values = ifl.evaluate(program, ifl.sample_inputs(program, 3, length=program.length))
    assert values.shape[0] == 3
    assert ifl.analyze(program).verdict in ("efficient", "inefficient")
