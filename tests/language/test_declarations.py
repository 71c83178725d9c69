"""Declarations: faults of the input, length, margin and constant declarations (a table, in
process and through the CLI), the command-line overrides, and what ``declare`` hands the
checker (values of constants, macros, declared names, binder names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostics import assert_distinct, assert_the_cli_reports, bad, diagnostics_of
from programs import by_name

import infoflow_dsl as ifl
from infoflow_dsl.errors import ProgramError
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.declarations import MAX_LENGTH, RESERVED, Declarations, declare, literal_entries, space_type
from infoflow_dsl.language.functions import CALLABLE
from infoflow_dsl.language.parse import parse
from infoflow_dsl.language.randomness import randn

DECLARATION_ERRORS = [
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
    # constants
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
]


def test_the_table_is_distinct() -> None:
    assert_distinct(DECLARATION_ERRORS)


@pytest.mark.parametrize(("source", "expected"), DECLARATION_ERRORS)
def test_declaration_diagnostics(source: str, expected: list[tuple[int, int, str]]) -> None:
    assert diagnostics_of(source) == expected


@pytest.mark.parametrize(("source", "expected"), DECLARATION_ERRORS)
def test_declaration_diagnostics_through_the_cli(
    tmp_path: Path, source: str, expected: list[tuple[int, int, str]],
) -> None:
    assert_the_cli_reports(tmp_path, source, expected)


def test_length_override_errors() -> None:
    """An override is the caller's argument, not a place in the file: a ValueError names it."""
    source = by_name("min_pairwise").source
    for length in (0, -3, MAX_LENGTH + 1, 2.5):
        with pytest.raises(ValueError, match=rf"^length={length}: T must be an integer in 1\.\.1,000,000$"):
            ifl.parse_program(source, "m.iflow", length=length)
    nearest = by_name("nearest_neighbour").source
    with pytest.raises(ProgramError) as error:
        ifl.parse_program(nearest, "n.iflow", length=1)
    assert [d.message for d in error.value.diagnostics] == ["the range of this argmin is empty (T = 1)"]


# ----------------------------------------------------------------------------- declare


def declared(source: str, length: int | None = None, margin: float | None = None) -> tuple[Declarations, list]:
    """``declare`` on ``source``: the declarations and the (line, column, message) of each fault."""
    faults: list[tuple[int, int, str]] = []
    result = declare(parse(source), lambda span, message: faults.append((span.line, span.column, message)),
                     length, margin)
    return result, faults


PROGRAM = """input v : R^2 in ball(2)
length T = 8
margin 0.25
const c = -0.5
const w : R^2 = [1, 0]
const A : R^{2 x 2} = randn(3)
const B = [[1, 2], [3, 4]]
let f(a) = max_<s> a + c
target(t : t >= 2) = min_<r> f(<v(r), w>)
"""


def test_declare_collects_what_the_declarations_say() -> None:
    result, faults = declared(PROGRAM)
    assert faults == []
    assert (result.input_name, result.dimension, result.domain, result.length, result.margin) == (
        "v", 2, ir.Ball(2.0), 8, 0.25)
    assert {name: (c.values, c.type) for name, c in result.constants.items()} == {
        "c": ((-0.5,), ir.SCALAR),
        "w": ((1.0, 0.0), ir.vector(2)),
        "A": (randn(3, (2, 2)), ir.matrix(2, 2)),
        "B": ((1.0, 2.0, 3.0, 4.0), ir.matrix(2, 2)),
    }
    assert list(result.macros) == ["f"] and result.macros["f"].parameters == ("a",)
    lines = {name: span.line for name, span in result.defined.items()}
    assert lines == {"v": 1, "c": 4, "w": 5, "A": 6, "B": 7, "f": 8}
    assert result.binder_names == {"s", "t", "r"}
    assert result.target is not None and result.target.per_token


def test_the_default_domain_is_the_unit_box() -> None:
    result, faults = declared("input x : R^3\nlength T = 2\ntarget x(1)\n")
    assert (faults, result.domain, result.margin) == ([], ir.Box(-1.0, 1.0), None)


def test_overrides_replace_the_declared_length_and_margin() -> None:
    result, faults = declared(PROGRAM, length=3, margin=0.5)
    assert (faults, result.length, result.margin) == ([], 3, 0.5)
    result, faults = declared("input x : R^2\ntarget x(1)\n", length=5, margin=0.1)  # none declared: none needed
    assert (faults, result.length, result.margin) == ([], 5, 0.1)


def test_a_margin_override_must_be_positive() -> None:
    for margin in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match=rf"^margin={margin}: the margin must be a positive number$"):
            ifl.parse_program(PROGRAM, "p.iflow", margin=margin)


def test_a_failed_declaration_leaves_its_name_declared_and_its_value_out() -> None:
    result, faults = declared("input x : R^2\nlength T = 4\nconst w : R^3 = [1, 2]\nlet w = 1\ntarget x(1)\n")
    assert faults == [(3, 17, "the value of 'w' is a vector[2], but its space says vector[3]"),
                      (4, 1, "'w' is already defined at line 3")]
    assert "w" in result.defined and "w" not in result.constants and "w" not in result.macros


def test_a_failed_input_keeps_its_name_and_gives_no_domain() -> None:
    result, faults = declared("input y : R in [0, 1]\nlength T = 4\ntarget y(1)\n")
    assert faults == [(1, 11, "the input's tokens are vectors: write R^d")]
    assert (result.input_name, result.dimension, result.domain) == ("y", 1, None)


def test_the_length_is_declared_as_t() -> None:
    assert declared("input x : R^2\nlength N = 4\ntarget x(1)\n")[1] == [
        (2, 1, "the length is written 'length T = N', not 'N'"),
    ]
    with pytest.raises(ProgramError):
        ifl.parse_program("input x : R^2\nlength N = 4\ntarget x(1)\n")


def test_reserved_names_include_every_builtin() -> None:
    assert set(CALLABLE) <= RESERVED
    assert declared("input x : R^2\nlength T = 4\nlet relu(a) = a\ntarget x(1)\n")[1] == [
        (3, 1, "'relu' is reserved and cannot be defined"),
    ]


@pytest.mark.parametrize(
    ("space", "expected"),
    [(ast.ScalarSpace(), ir.SCALAR), (ast.VectorSpace(3), ir.vector(3)), (ast.MatrixSpace(2, 5), ir.matrix(2, 5))],
)
def test_space_types(space: ast.Space, expected: ir.ValueType) -> None:
    assert space_type(space) == expected


def test_literal_entries_are_row_major_and_rows_must_agree() -> None:
    one, two = ast.SignedNumber("1"), ast.SignedNumber("-2")
    assert literal_entries(ast.ScalarLiteral(two)) == ((-2.0,), ir.SCALAR)
    assert literal_entries(ast.VectorLiteral((one, two))) == ((1.0, -2.0), ir.vector(2))
    matrix = ast.MatrixLiteral((ast.VectorLiteral((one, two)), ast.VectorLiteral((two, two))))
    assert literal_entries(matrix) == ((1.0, -2.0, -2.0, -2.0), ir.matrix(2, 2))
    assert literal_entries(ast.MatrixLiteral((ast.VectorLiteral((one, two)), ast.VectorLiteral((one,))))) is None
