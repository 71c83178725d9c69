"""The checker: one table of bad programs, each with the exact line, column and message of
every diagnostic (read off the program text: the column is where the offending text starts),
run both in process and through the CLI; several errors at once; and good programs (types,
shadowing, macro expansion)."""

from __future__ import annotations

from pathlib import Path

import pytest
from programs import ALL, by_name

import infoflow_dsl as ifl
from infoflow_dsl.errors import ProgramError
from infoflow_dsl.language import typed as ir
from infoflow_dsl.tools.cli import run

HEADER = "input x : R^2\nlength T = 4\n"  # lines 1 and 2; most bad targets sit on line 3


def bad(name: str, body: str, *diagnostics: tuple[int, int, str], header: str = HEADER):
    return pytest.param(header + body + "\n", list(diagnostics), id=name)


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
        (3, 1, "unexpected 'x': a declaration starts with one of: input, length, const, let, margin, target")),
    # -- unknown names and functions
    bad("unknown-name", "target <x(1), w>", (3, 15, "unknown name 'w'")),
    bad("unknown-function", "target foo(x(1))",
        (3, 8, "unknown function 'foo' (the functions are relu, min, max, the input x(...) and the let macros)")),
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
    # -- declarations
    bad("two-inputs-and-two-targets", "input y : R^2\ntarget x(1)\ntarget x(2)",
        (3, 1, "a second input declaration (the first is at line 1)"),
        (5, 1, "a second target declaration (the first is at line 4)")),
    bad("no-input-and-no-target", "length T = 4",
        (1, 1, "the program has no input declaration (input x : R^d)"),
        (1, 1, "the program has no target declaration (target EXPR)"), header=""),
    bad("no-length", "input x : R^2\ntarget x(1)",
        (1, 1, "the program has no length declaration (length T = N)"), header=""),
    bad("dimension-below-1", "input x : R^0\nlength T = 4\ntarget x(1)",
        (1, 11, "the token dimension d must be at least 1, not 0"), header=""),
    bad("length-below-1", "input x : R^2\nlength T = 0\ntarget x(1)",
        (2, 1, "T must be at least 1, not 0"), header=""),
    bad("length-too-large", "input x : R^2\nlength T = 99999999999\ntarget x(1)",
        (2, 1, "T = 99999999999 is too large (at most 1000000)"), header=""),
    bad("empty-box", "input x : R^2 in [1, -1]\nlength T = 4\ntarget x(1)",
        (1, 15, "the domain [1, -1] is empty: a > b"), header=""),
    bad("empty-ball", "input x : R^2 in ball(0)\nlength T = 4\ntarget x(1)",
        (1, 15, "the domain ball(0) is empty: the radius must be > 0"), header=""),
    bad("negative-ball", "input x : R^2 in ball(-1.5)\nlength T = 4\ntarget x(1)",
        (1, 15, "the domain ball(-1.5) is empty: the radius must be > 0"), header=""),
    bad("margin-not-positive", "margin 0\ntarget x(argmax_<t> x(t)[1])",
        (3, 1, "the margin must be > 0, not 0")),
    bad("reserved-name", "const T = 3\ntarget x(1)", (3, 1, "'T' is reserved and cannot be defined")),
    bad("defined-twice", "const w = 1\nconst w = 2\ntarget x(1)", (4, 1, "'w' is already defined at line 3")),
    # -- constants
    bad("vector-constant-of-the-wrong-length", "const w : R^3 = [1, 2]\ntarget x(1)",
        (3, 17, "the value of 'w' is a vector[2], but its space says vector[3]")),
    bad("matrix-constant-of-the-wrong-shape", "const B : R^{2 x 3} = [[1, 2], [3, 4]]\ntarget x(1)",
        (3, 23, "the value of 'B' is a matrix[2,2], but its space says matrix[2,3]")),
    bad("ragged-matrix", "const A : R^{2 x 2} = [[1, 2], [3]]\ntarget x(1)",
        (3, 23, "the rows of a matrix literal must all have the same length")),
    bad("scalar-for-a-vector", "const c : R^2 = 1\ntarget x(1)",
        (3, 17, "the value of 'c' is a scalar, but its space says vector[2]")),
    bad("randn-without-a-space", "const w = randn(1)\ntarget x(1)",
        (3, 11, "randn(seed) needs a declared vector or matrix space, e.g. R^{2 x 4}")),
    bad("randn-of-no-entries", "const w : R^0 = randn(1)\ntarget x(1)",
        (3, 17, "a constant needs at least one entry")),
    bad("randn-too-large", "const A : R^{100000 x 100000} = randn(3)\ntarget x(1)",
        (3, 33, "randn(seed) fills at most 1000000 entries; 'A' is a matrix[100000,100000]")),
    # -- division and powers
    bad("division-by-a-non-constant", "target x(1) / x(1)[1]",
        (3, 15, "division is only by a constant (a number or a scalar const)")),
    bad("division-by-zero", "const z = 0\ntarget x(1) / (2 * z)", (4, 16, "division by zero")),
    bad("exponent-other-than-2", "target x(1)[1]^3", (3, 16, "the only exponent is the literal 2, not 3")),
    bad("square-of-a-vector", "target x(1)^2",
        (3, 8, "^2 squares a scalar, got a vector[2] (for a vector write ||v||^2)")),
    # -- macros
    bad("macro-with-too-few-arguments", "let f(a, b) = <a, b>\ntarget f(x(1))",
        (4, 8, "macro 'f' takes 2 arguments, got 1")),
    bad("macro-with-an-argument-too-many", "let c = 1\ntarget x(1)[1] + c(2)",
        (4, 18, "macro 'c' takes 0 arguments, got 1")),
    bad("macro-calling-itself", "let g(a) = g(a) + 1\ntarget g(x(1)[1])",
        (3, 12, "macro 'g' calls itself (g → g); macros cannot recurse")),
    bad("macros-calling-each-other", "let f = h + 1\nlet h = f * 2\ntarget f",
        (4, 9, "macro 'f' calls itself (f → h → f); macros cannot recurse")),
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
    # -- per-token targets and position offsets (LANGUAGE.md v2)
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


def diagnostics_of(source: str, path: str = "f.iflow", **overrides) -> list[tuple[int, int, str]]:
    with pytest.raises(ProgramError) as error:
        ifl.parse_program(source, path, **overrides)
    assert all(d.path == path for d in error.value.diagnostics)
    return [(d.line, d.column, d.message) for d in error.value.diagnostics]


def test_the_table_is_large_and_distinct() -> None:
    sources = [param.values[0] for param in BAD_PROGRAMS]
    assert len(set(sources)) == len(sources) >= 25


@pytest.mark.parametrize(("source", "expected"), BAD_PROGRAMS)
def test_bad_program_diagnostics(source: str, expected: list[tuple[int, int, str]]) -> None:
    assert diagnostics_of(source) == expected


@pytest.mark.parametrize(("source", "expected"), BAD_PROGRAMS)
def test_bad_program_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, expected: list[tuple[int, int, str]],
) -> None:
    path = tmp_path / "bad.iflow"
    path.write_text(source, encoding="utf-8")
    assert run(["parse", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    line, column, message = expected[0]
    assert err.startswith(f"{path}:{line}:{column}: error: {message}\n")
    for line, column, message in expected:
        assert f"{path}:{line}:{column}: error: {message}\n" in err


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


def test_length_override_errors() -> None:
    source = by_name("min_pairwise").source
    assert diagnostics_of(source, length=0) == [(1, 1, "T must be at least 1, not 0")]
    assert diagnostics_of(source, length=10**7) == [(1, 1, "T = 10000000 is too large (at most 1000000)")]
    nearest = by_name("nearest_neighbour").source
    with pytest.raises(ProgramError) as error:
        ifl.parse_program(nearest, "n.iflow", length=1)
    assert [d.message for d in error.value.diagnostics] == ["the range of this argmin is empty (T = 1)"]


def test_macro_expansion_too_large_is_refused_not_a_crash() -> None:
    lines = [HEADER.rstrip("\n"), "let a0(u) = u"]
    lines += [f"let a{i}(u) = a{i - 1}(u) + a{i - 1}(u)" for i in range(1, 40)]
    lines.append("target a39(x(1)[1])")
    assert diagnostics_of("\n".join(lines) + "\n") == [
        (43, 8, "with its macros inlined, the target is too large (more than 100000 nodes or 100 levels deep)"),
    ]
    deep = HEADER + "let f(u) = " + "-" * 60 + "u\ntarget f(f(x(1)[1]))\n"
    assert diagnostics_of(deep) == [
        (4, 8, "with its macros inlined, the target is nested too deeply (more than 100 levels)"),
    ]


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


def test_a_position_variable_can_be_passed_to_a_macro() -> None:
    program = ifl.parse_program(HEADER + "let g(s) = min_<t : t != s> x(t)[1]\ntarget max_<u> g(u)\n")
    outer = program.target
    assert isinstance(outer, ir.Reduce) and isinstance(outer.body, ir.Reduce)
    (condition,) = outer.body.conditions
    assert condition.right == ir.PositionVariable("u")


def test_a_macro_argument_that_is_not_a_position_cannot_stand_in_a_condition() -> None:
    source = HEADER + "let g(s) = min_<t : t != s> x(t)[1]\ntarget g(x(1)[1])\n"
    assert diagnostics_of(source) == [
        (3, 26, "a condition compares positions; the macro argument used here is not a position variable, "
                "a literal or T"),
    ]


def test_parse_prints_the_program_with_macros_expanded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nested_macros.iflow"
    path.write_text(by_name("nested_macros").source, encoding="utf-8")
    assert run(["parse", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == (
        "input x : R^2\n"
        "length T = 8\n"
        "const w : R^2 = [1, 2]\n"
        "target (max_<t> <x(t), w>) - min_<s> <x(s), w>\n"
    )
    assert ifl.parse_program(out).target == ifl.parse_program(by_name("nested_macros").source).target


def test_parse_prints_squared_distance_macro_inlined(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ball.iflow"
    path.write_text(by_name("squared_distance_ball").source, encoding="utf-8")
    assert run(["parse", str(path), "--T", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "target min_<s, t : s != t> ||x(s) - x(t)||^2"
    assert "let" not in out


def test_conditions_linking_too_many_positions_are_refused_not_crashed(tmp_path, capsys):
    """A grid over ten linked variables would need terabytes: a diagnostic, exit 2."""
    from infoflow_dsl.tools.cli import run

    names = ", ".join(f"v{i}" for i in range(10))
    chain = " and ".join(f"v{i} < v{i + 1}" for i in range(9))
    path = tmp_path / "linked.iflow"
    path.write_text(f"input x : R^2\nlength T = 100\ntarget min_<{names} : {chain}> x(v0)[1]\n", encoding="utf-8")
    assert run(["parse", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3:8: error: the conditions of this min link 10 position variables" in err


def test_many_unlinked_variables_are_analysed_quickly(tmp_path, capsys):
    from infoflow_dsl.tools.cli import run

    path = tmp_path / "wide.iflow"
    source = "input x : R^2\nlength T = 20\ntarget min_<a, b, c, d, e, f, g, h, i, j> x(a)[1]\n"
    path.write_text(source, encoding="utf-8")
    assert run(["analyze", str(path), "--json"]) == 0
    assert '"order": 1' in capsys.readouterr().out
