"""The checker: one table of bad programs, each with the exact line, column and message of
every diagnostic, run both in process and through the CLI; several errors at once; good
programs (types, shadowing); and a typing rule for every AST expression class."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostics import HEADER, assert_distinct, assert_the_cli_reports, bad, diagnostics_of
from programs import ALL, by_name

import infoflow_dsl as ifl
from infoflow_dsl.errors import ProgramError
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.check import TYPING_RULES

BAD_PROGRAMS = [
    # -- syntax errors
    bad("syntax-missing-operand", "target x(1) +",
        (3, 14, "unexpected end of statement: an expression is missing")),
    bad("syntax-unclosed-binders", "target min_<t x(t)[1]",
        (3, 15, "unexpected 'x': a reduction's variables are closed with '>' before its body")),
    bad("syntax-bad-character", "target x(1) $ 2", (3, 13, "unexpected character '$'")),
    bad("syntax-two-operands", "target 1 2",
        (3, 10, "unexpected '2'; expected one of '*', '+', '-', '/', '@', '[', '^', the end of the statement")),
    bad("syntax-not-a-declaration", "x(1) + 1",
        (3, 1, "unexpected 'x': a declaration starts with one of: input, length, const, let, margin, target, table")),
    # -- unknown names and functions
    bad("unknown-name", "target <x(1), w>", (3, 15, "unknown name 'w'")),
    bad("unknown-function", "target foo(x(1))",
        (3, 8, "unknown function 'foo' (the functions are relu, min, max, the input x(...), the let macros "
               "and the tables)")),
    bad("constant-called", "const w : R^2 = [1, 2]\ntarget w(1)", (4, 8, "'w' is a constant, not a function")),
    bad("input-without-position", "target <x, x(1)>",
        (3, 9, "the input 'x' is a sequence; write x(t) for the token at position t")),
    # -- position variables
    bad("position-outside-its-reduction", "target (max_<t> x(t)[1]) + x(t)[2]",
        (3, 30, "position variable 't' is used outside the reduction that binds it")),
    bad("position-as-number", "target max_<t> x(t)[1] + t",
        (3, 26, "a position is used as a number; positions only index x(...) or appear in conditions")),
    bad("position-as-target", "target argmax_<t> x(t)[1]",
        (3, 8, "the target is a position; write x(...) to retrieve the token there")),
    bad("binder-clashes-with-constant", "const s = 1\ntarget max_<s> x(s)[1]",
        (4, 13, "'s' is already a name in the program; choose another position variable")),
    bad("condition-on-a-constant", "const w = 1\ntarget min_<t : t != w> x(t)[1]",
        (4, 22, "a condition compares positions; 'w' is not a bound position variable")),
    bad("argmax-of-two-variables", "target x(argmax_<s, t> x(s)[1])",
        (3, 10, "argmax binds exactly one position variable, got 2")),
    # -- types
    bad("inner-product-of-different-lengths", "const w : R^3 = [1, 2, 3]\ntarget <x(1), w>",
        (4, 8, "the inner product needs two vectors of equal length, got a vector[2] and a vector[3]")),
    bad("inner-product-of-scalars", "target <x(1)[1], x(2)[1]>",
        (3, 8, "the inner product needs two vectors of equal length, got a scalar and a scalar")),
    bad("matrix-columns-do-not-match", "const A : R^{3 x 3} = randn(1)\ntarget A @ x(1)",
        (4, 8, "'A' is a matrix[3,3] and needs a vector[3], got a vector[2]")),
    bad("vector-where-a-scalar-is-needed", "target relu(x(1))",
        (3, 13, "the argument of relu must be a scalar, got a vector[2]")),
    bad("vector-body-of-max", "target max_<t> x(t)",
        (3, 16, "the body of max must be a scalar, got a vector[2]")),
    bad("vector-plus-scalar", "target x(1) + 1",
        (3, 8, "'+' needs operands of the same type, got a vector[2] and a scalar")),
    bad("vector-times-vector", "target x(1) * x(2)",
        (3, 8, "'*' multiplies by a scalar; for two vectors write <a, b>")),
    bad("norm-of-a-scalar", "target ||x(1)[1]||",
        (3, 8, "||·|| needs a vector, got a scalar (for a scalar write |a|)")),
    # -- ranges of indices and positions
    bad("component-index-out-of-range", "target x(1)[3]", (3, 13, "component index 3 is outside 1..2")),
    bad("position-beyond-T", "target x(5)", (3, 10, "position 5 is outside 1..T (T = 4)")),
    bad("position-zero", "target x(0) + x(2)", (3, 10, "position 0 is outside 1..T (T = 4)")),
    # -- division and powers
    bad("division-by-a-non-constant", "target x(1) / x(1)[1]",
        (3, 15, "division is only by a constant (a number or a scalar const)")),
    bad("division-by-zero", "const z = 0\ntarget x(1) / (2 * z)", (4, 16, "division by zero")),
    bad("exponent-other-than-2", "target x(1)[1]^3", (3, 16, "the only exponent is the literal 2, not 3")),
    bad("square-of-a-vector", "target x(1)^2",
        (3, 8, "^2 squares a scalar, got a vector[2] (for a vector write ||v||^2)")),
    # -- built-in functions
    bad("builtin-with-wrong-arity", "target min(x(1)[1])", (3, 8, "min(...) takes 2 arguments, got 1")),
    # -- reduction ranges
    bad("empty-range", "target min_<s, t : s != t> <x(s), x(t)>",
        (3, 8, "the range of this min is empty (T = 1)"), header="input x : R^2\nlength T = 1\n"),
    bad("empty-inner-range", "target max_<t> min_<s : s < t> x(s)[1]",
        (3, 16, "the range of this min is empty (T = 4, t = 1)")),
    bad("empty-sum-range", "target sum_<t : t > T> x(t)", (3, 8, "the range of this sum is empty (T = 4)")),
    bad("top-k-beyond-the-positions", "target top(5)_<t> x(t)[1]",
        (3, 8, "top(5) needs at least 5 positions, but the range has 4 (T = 4)")),
    bad("top-k-beyond-a-restricted-range", "target top(2)_<t : t < 2> x(t)[1]",
        (3, 8, "top(2) needs at least 2 positions, but the range has 1 (T = 4)")),
    # -- per-token targets and position offsets (docs/language.md, v2)
    bad("offset-before-the-first-position", "target(t) = x(t - 1)",
        (3, 15, "position t - 1 can be 0, outside 1..T; restrict it with a condition (T = 4, t = 1)")),
    bad("offset-after-the-last-position", "target(t) = x(t + 1)",
        (3, 15, "position t + 1 can be 5, outside 1..T; restrict it with a condition (T = 4, t = 4)")),
    bad("offset-in-a-sequence-reduction", "target max_<s> x(s - 1)[1]",
        (3, 18, "position s - 1 can be 0, outside 1..T; restrict it with a condition (T = 4, s = 1)")),
    bad("offset-past-its-condition", "target(t : t >= 2) = x(t - 2)",
        (3, 24, "position t - 2 can be 0, outside 1..T; restrict it with a condition (T = 4, t = 2)")),
    bad("offset-of-t-beyond-the-length", "target(t) = x(T + 1)", (3, 15, "position T + 1 is outside 1..T (T = 4)")),
    bad("offset-of-a-literal", "target(t) = x(3 - 1)",
        (3, 15, "a position offset is a position variable or T plus or minus a whole number (t - 1, s + 2, T - 1)")),
    bad("offset-by-a-fraction", "target(t) = x(t - 0.5)",
        (3, 15, "a position offset is a position variable or T plus or minus a whole number (t - 1, s + 2, T - 1)")),
    bad("target-variable-shadowed", "target(t) = max_<t> x(t)[1]",
        (3, 18, "'t' is the per-token target's position variable; a reduction inside the target cannot rebind it "
                "(choose another name)")),
    bad("target-condition-on-an-unbound-variable", "target(t : s > 1) = x(t)[1]",
        (3, 12, "a condition compares positions; 's' is not a bound position variable")),
    bad("target-head-not-a-name", "target(t + 1) = x(t)",
        (3, 8, "a per-token target names its position variable: target(t) = ... or target(t : t >= 2) = ...")),
    bad("target-defined-nowhere", "target(t : t > T) = x(t)[1]",
        (3, 12, "the per-token target is defined at no position (T = 4)")),
    bad("target-variable-is-a-constant", "const c = 1\ntarget(c) = x(1)",
        (4, 8, "'c' is already a name in the program; choose another position variable for the per-token target")),
    bad("per-token-target-is-a-position", "target(t) = t",
        (3, 13, "the target is a position; write x(...) to retrieve the token there")),
    bad("offset-condition-on-an-unbound-variable", "target(t) = max_<s : s < r - 1> x(s)[1]",
        (3, 26, "a condition compares positions; 'r' is not a bound position variable")),
    bad("empty-range-under-the-target-condition", "target(t : t <= 2) = max_<s : s > t + 2> x(s)[1]",
        (3, 22, "the range of this max is empty (T = 4, t = 2)")),
]


def test_the_table_is_large_and_distinct() -> None:
    assert len(BAD_PROGRAMS) >= 25
    assert_distinct(BAD_PROGRAMS)


@pytest.mark.parametrize(("source", "expected"), BAD_PROGRAMS)
def test_bad_program_diagnostics(source: str, expected: list[tuple[int, int, str]]) -> None:
    assert diagnostics_of(source) == expected


@pytest.mark.parametrize(("source", "expected"), BAD_PROGRAMS)
def test_bad_program_through_the_cli(tmp_path: Path, source: str, expected: list[tuple[int, int, str]]) -> None:
    assert_the_cli_reports(tmp_path, source, expected)


def test_every_expression_class_has_a_typing_rule() -> None:
    assert set(TYPING_RULES) == set(ast.Expr.__args__)  # type: ignore[attr-defined]


def test_a_diagnostic_shows_the_line_and_a_caret_under_the_offending_text() -> None:
    source = HEADER + "target <x(1), x(2)> + ||x(1)[2]||\n"
    with pytest.raises(ProgramError) as error:
        ifl.parse_program(source, "f.iflow")
    assert str(error.value) == "\n".join([
        "f.iflow:3:23: error: ||·|| needs a vector, got a scalar (for a scalar write |a|)",
        "    target <x(1), x(2)> + ||x(1)[2]||",
        "                          ^~~~~~~~~~~",
    ])


def test_several_independent_errors_are_all_reported() -> None:
    source = """input x : R^2 in [2, 1]
input y : R^3
length T = 4
const w : R^3 = [1, 2]
const w = 1
let f(a) = <a, a>
target relu(x(1)) + f(x(1), x(2)) + ||x(1)[1]|| + x(7)[1] + z + x(1)[1] / x(2)[1] + x(1)[1]^3
"""
    assert diagnostics_of(source) == [
        (1, 15, "the domain [2, 1] is empty: a > b"),
        (2, 1, "a second input declaration (the first is at line 1)"),
        (4, 17, "the value of 'w' is a vector[2], but its space says vector[3]"),
        (5, 1, "'w' is already defined at line 4"),
        (7, 13, "the argument of relu must be a scalar, got a vector[2]"),
        (7, 21, "macro 'f' takes 1 argument, got 2"),
        (7, 37, "||·|| needs a vector, got a scalar (for a scalar write |a|)"),
        (7, 53, "position 7 is outside 1..T (T = 4)"),
        (7, 61, "unknown name 'z'"),
        (7, 75, "division is only by a constant (a number or a scalar const)"),
        (7, 93, "the only exponent is the literal 2, not 3"),
    ]


def test_an_error_is_not_reported_again_by_the_expressions_around_it() -> None:
    assert diagnostics_of(HEADER + "target max_<t> <x(t), y> + 1\n") == [(3, 23, "unknown name 'y'")]


# ----------------------------------------------------------------------------- good programs


@pytest.mark.parametrize("example", ALL, ids=lambda e: e.name)
def test_every_table_program_checks(example) -> None:
    program = ifl.parse_program(example.source, example.path)
    assert program.target.type.kind in ("scalar", "vector")
    assert program.dimension >= 1 and program.length >= 1


@pytest.mark.parametrize(
    ("name", "type_"),
    [
        ("min_pairwise", ir.SCALAR),
        ("kth_largest", ir.SCALAR),
        ("triangle_center", ir.SCALAR),
        ("first_three", ir.vector(4)),
        ("nearest_neighbour", ir.vector(4)),
        ("mean_token", ir.vector(2)),
        ("sum_scaled", ir.vector(3)),
        ("projection_matrix", ir.vector(2)),
        ("last_plus_first", ir.vector(2)),
        ("argmax_token", ir.vector(3)),
    ],
)
def test_target_types(name: str, type_: ir.ValueType) -> None:
    program = ifl.parse_program(by_name(name).source)
    assert program.target.type == type_
    assert program.output_shape == type_.shape


def test_checked_program_fields() -> None:
    nearest = ifl.parse_program(by_name("nearest_neighbour").source, "n.iflow")
    assert (nearest.input_name, nearest.dimension, nearest.length, nearest.margin) == ("x", 4, 16, 0.05)
    assert nearest.domain == ir.Box(-1.0, 1.0)
    assert isinstance(nearest.target, ir.Token) and isinstance(nearest.target.position, ir.ArgPosition)
    assert ifl.parse_program(by_name("triangle_center").source).domain == ir.Ball(4.0)
    assert ifl.parse_program(by_name("min_pairwise").source, length=5).length == 5


def test_shadowing_is_accepted() -> None:
    source = HEADER + "let f(t) = x(t)[1]\nlet g(t) = x(t)[2]\ntarget max_<t> f(t) + max_<t> g(t)\n"
    program = ifl.parse_program(source)
    outer = program.target
    assert isinstance(outer, ir.Reduce) and outer.variables == ("t",)
    inner = outer.body.right  # type: ignore[attr-defined]
    assert isinstance(inner, ir.Reduce) and inner.variables == ("t′",)
    assert inner.body.vector.position == ir.PositionVariable("t′")  # type: ignore[attr-defined]


def test_conditions_linking_too_many_positions_are_refused_not_crashed(tmp_path, capsys):
    """A grid over ten linked variables would need terabytes: a diagnostic, exit 2."""
    from infoflow_dsl.cli.main import run

    names = ", ".join(f"v{i}" for i in range(10))
    chain = " and ".join(f"v{i} < v{i + 1}" for i in range(9))
    path = tmp_path / "linked.iflow"
    path.write_text(f"input x : R^2\nlength T = 100\ntarget min_<{names} : {chain}> x(v0)[1]\n", encoding="utf-8")
    assert run(["parse", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3:8: error: the conditions of this min link 10 position variables" in err


def test_many_unlinked_variables_are_analysed_quickly(tmp_path, capsys):
    from infoflow_dsl.cli.main import run

    path = tmp_path / "wide.iflow"
    source = "input x : R^2\nlength T = 20\ntarget min_<a, b, c, d, e, f, g, h, i, j> x(a)[1]\n"
    path.write_text(source, encoding="utf-8")
    assert run(["analyze", str(path), "--json"]) == 0
    assert '"order": 1' in capsys.readouterr().out
