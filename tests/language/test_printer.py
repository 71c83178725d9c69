"""The printers and their one precedence table: the AST printer round-trips
(``parse(print(ast)) == ast``, on the table programs, generated ASTs and tricky cases) with
parentheses only where they are needed; the typed-IR printer's text for every node class.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from programs import ALL, TOKENS
from strategies import declaration_strategy, expression_strategy
from syntax_trees import N, V, add, reduction, target_of

import infoflow_dsl as ifl
from infoflow_dsl.analysis.comparisons import NodeResult
from infoflow_dsl.errors import ProgramError
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.parse import parse
from infoflow_dsl.language.printer import (
    ATOM,
    DESCRIBE_RULES,
    POSTFIX,
    POWER,
    PRODUCT,
    REDUCTION,
    SUM,
    UNARY,
    describe,
    precedence,
    print_declaration,
    print_expr,
    print_program,
)

# ----------------------------------------------------------------------------- the precedence table


def test_the_ast_and_the_typed_ir_read_the_same_levels() -> None:
    a, b = ir.NumberLiteral(1.0), ir.NumberLiteral(2.0)
    pairs = [
        (ast.Binary("+", V("a"), V("b")), ir.Arithmetic("+", a, b, ir.SCALAR), SUM),
        (ast.Binary("-", V("a"), V("b")), ir.Arithmetic("-", a, b, ir.SCALAR), SUM),
        (ast.Binary("*", V("a"), V("b")), ir.Arithmetic("*", a, b, ir.SCALAR), PRODUCT),
        (ast.Binary("/", V("a"), V("b")), ir.Divide(a, 2.0, ir.SCALAR), PRODUCT),
        (ast.Binary("@", V("A"), V("v")), ir.MatVec(ir.Constant("A", (1.0,), ir.matrix(1, 1)), a, ir.vector(1)),
         PRODUCT),
        (ast.Negate(V("a")), ir.Negate(a, ir.SCALAR), UNARY),
        (ast.Power(V("a"), N("2")), ir.Square(a), POWER),
        (ast.Index(V("v"), N("1")), ir.Component(a, 1), POSTFIX),
        (reduction("min", "t", V("a")), ir.Reduce("min", ("t",), (), a, ir.SCALAR), REDUCTION),
        (ast.Call("relu", (V("a"),)), ir.Pointwise("relu", (a,)), ATOM),
        (ast.InnerProduct(V("a"), V("b")), ir.Inner(a, b), ATOM),
    ]
    for syntax, typed, level in pairs:
        assert precedence(syntax) == precedence(typed) == level, print_expr(syntax)
    assert REDUCTION < SUM < PRODUCT < UNARY < POWER < POSTFIX < ATOM


def grouping_parentheses(text: str) -> list[tuple[int, int]]:
    """The (open, close) indices of the parentheses in ``text`` that group (not a call's, not top(k)'s)."""
    pairs, stack, quoted = [], [], False
    for i, char in enumerate(text):
        quoted ^= char == '"'  # a token literal's text is not grouping
        if quoted or char == '"':
            continue
        if char == "(":
            stack.append((i, i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_)")))
        elif char == ")":
            start, grouping = stack.pop()
            if grouping:
                pairs.append((start, i))
    return pairs


def test_grouping_parentheses_are_told_from_calls() -> None:
    assert grouping_parentheses("f(a) + (top(2)_<t> (b))") == [(19, 21), (7, 22)]
    assert grouping_parentheses('[(x(1) == "(") or a < b]') == [(1, 13)]


@settings(max_examples=300, deadline=None)
@given(expression_strategy())
def test_every_parenthesis_the_printer_writes_is_needed(expression: ast.Expr) -> None:
    """Removing any one pair of the parentheses the precedence table adds gives text that fails
    to parse or parses to another tree: they are minimal. (The parentheses that keep bars apart,
    ``|(|a|)|``, are left out: they are written whenever an argument of bars starts or ends with
    a bar, also where the lexer would read the bars right, as in ``||(||a||)||``.)"""
    text = print_expr(expression)
    for start, end in grouping_parentheses(text):
        if text[start - 1:start] == "|" and text[end + 1:end + 2] == "|":
            continue
        without = text[:start] + text[start + 1:end] + text[end + 1:]
        try:
            assert target_of(without) != expression, f"{text!r}: the parentheses at {start} are not needed"
        except ProgramError:
            pass


@pytest.mark.parametrize(
    ("tree", "text"),
    [
        (add(N("1"), ast.Binary("*", N("2"), N("3"))), "1 + 2 * 3"),
        (ast.Binary("*", add(N("1"), N("2")), N("3")), "(1 + 2) * 3"),
        (ast.Binary("-", ast.Binary("-", V("a"), V("b")), V("c")), "a - b - c"),
        (ast.Binary("-", V("a"), ast.Binary("-", V("b"), V("c"))), "a - (b - c)"),
        (ast.Binary("*", V("a"), ast.Negate(V("b"))), "a * -b"),
        (ast.Negate(ast.Power(V("a"), N("2"))), "-a^2"),
        (ast.Power(ast.Negate(V("a")), N("2")), "(-a)^2"),
        (ast.Negate(ast.Negate(V("a"))), "- -a"),
        (add(V("a"), reduction("min", "t", V("b"))), "a + min_<t> b"),
        (add(reduction("min", "t", V("b")), V("a")), "(min_<t> b) + a"),
        (ast.Negate(reduction("max", "t", add(V("b"), V("c")))), "-max_<t> b + c"),
        (ast.Index(reduction("sum", "t", V("v")), N("1")), "(sum_<t> v)[1]"),
        (ast.Abs(ast.Abs(V("a"))), "|(|a|)|"),
        (ast.InnerProduct(reduction("min", "t", V("a")), V("b")), "<min_<t> a, b>"),
    ],
)
def test_printed_text(tree: ast.Expr, text: str) -> None:
    assert print_expr(tree) == text


# ----------------------------------------------------------------------------- the AST printer round trip


@pytest.mark.parametrize("example", ALL + TOKENS, ids=lambda e: e.name)
def test_printing_a_table_program_round_trips(example) -> None:
    program = parse(example.source, example.path)
    printed = print_program(program)
    assert parse(printed) == program
    assert print_program(parse(printed)) == printed  # the printer is a fixed point after one pass


expressions = expression_strategy()
source_programs = st.lists(
    declaration_strategy(expressions=expressions), max_size=6,
).map(lambda d: ast.SourceProgram(tuple(d)))


@settings(max_examples=500, deadline=None)
@given(expressions)
def test_printed_expressions_parse_back_to_the_same_ast(expression: ast.Expr) -> None:
    assert target_of(print_expr(expression)) == expression


@settings(max_examples=200, deadline=None)
@given(source_programs)
def test_printed_programs_parse_back_to_the_same_ast(program: ast.SourceProgram) -> None:
    text = print_program(program)
    assert parse(text) == program
    assert text.count("\n") == len(program.declarations)
    assert all("\n" not in print_declaration(d) for d in program.declarations)


@pytest.mark.parametrize(
    "expression",
    [
        ast.Abs(ast.Abs(V("a"))),
        ast.Norm(ast.Abs(V("a"))),
        ast.Abs(ast.Norm(V("a"))),
        ast.Norm(ast.Norm(V("a"))),
        ast.Abs(add(ast.Abs(V("a")), V("b"))),
        ast.Abs(add(V("b"), ast.Abs(V("a")))),
        ast.Negate(ast.Negate(ast.Negate(N("1")))),
        ast.Binary("-", V("a"), ast.Negate(V("b"))),
        ast.Power(ast.Power(V("a"), N("2")), N("2")),
        ast.Power(ast.Negate(V("a")), N("2")),
        ast.Index(reduction("sum", "t", V("v")), N("1")),
        add(reduction("min", "t", V("a")), reduction("max", "t", V("b"))),
        add(add(V("a"), reduction("min", "t", V("b"))), V("c")),
        add(add(V("a"), ast.Negate(reduction("min", "t", V("b")))), V("c")),
        ast.Binary("*", ast.Negate(ast.Negate(reduction("max", "t", V("b")))), V("c")),
        ast.Binary("@", ast.Binary("*", V("a"), reduction("sum", "t", V("b"))), V("c")),
        ast.Index(add(V("a"), reduction("min", "t", V("b"))), N("1")),
        ast.Binary("-", V("a"), add(V("b"), reduction("min", "t", V("c")))),
        ast.Binary("-", V("a"), add(V("b"), V("c"))),
        ast.Binary("/", V("a"), ast.Binary("*", V("b"), V("c"))),
        ast.Binary("@", V("A"), ast.Binary("@", V("B"), V("v"))),
        ast.InnerProduct(ast.InnerProduct(V("a"), V("b")), ast.InnerProduct(V("c"), V("d"))),
        ast.Bracket(ast.Logical("and", ast.Logical("or", ast.Compare("<", V("a"), V("b")), ast.Compare("==", V("c"),
                    ast.String("("))), ast.Not(ast.Not(ast.Compare(">=", reduction("min", "t", V("a")), N("0")))))),
        ast.Bracket(ast.Compare("<", ast.Bracket(ast.Compare("!=", V("a"), V("b"))), add(V("len"), N("1")))),
        ast.Index(ast.Bracket(ast.Compare("<", V("a"), V("b"))), N("1")),
    ],
    ids=print_expr,
)
def test_round_trip_of_tricky_expressions(expression: ast.Expr) -> None:
    assert target_of(print_expr(expression)) == expression


# ----------------------------------------------------------------------------- the typed-IR printer


def typed_target(text: str, header: str = "input x : R^2\nlength T = 4\nconst A : R^{2 x 2} = [[1, 0], [0, 1]]\n"):
    return ifl.parse_program(f"{header}target {text}\n").target


@pytest.mark.parametrize(
    ("source", "text"),
    [
        ("x(1)[1] + x(2)[2] + 3", "(x(1)[1] + x(2)[2]) + 3"),
        ("x(1)[1] * (x(2)[2] - 0.5)", "x(1)[1] * (x(2)[2] - 0.5)"),
        ("-x(1)[1]^2", "-(x(1)[1]^2)"),
        ("(A @ x(1))[2] / 4", "(A @ x(1))[2] / 4"),
        ("A @ (x(1) + x(2))", "A @ (x(1) + x(2))"),
        ("1 + max_<t> <x(t), x(1)>", "1 + (max_<t> <x(t), x(1)>)"),
        ("top(2)_<s, t : s != t and t <= T - 1> |x(s)[1] - x(t)[2]|", "top(2)_<s, t : s != t and t <= T - 1> "
                                                                       "|x(s)[1] - x(t)[2]|"),
        ("relu(x(1)[1]) + min(1, ||x(2)||)", "relu(x(1)[1]) + min(1, ||x(2)||)"),
        ("x(argmax_<s : s < T> x(s)[1] / 3)", "x(argmax_<s : s < T> x(s)[1] / 3)"),
        ("mean_<t> x(t)", "mean_<t> x(t)"),
    ],
)
def test_described_text(source: str, text: str) -> None:
    assert describe(typed_target(source)) == text


def test_the_per_token_variable_and_offsets_are_described() -> None:
    program = ifl.parse_program("input x : R^2\nlength T = 4\ntarget(t : t >= 2) = x(t - 1) + x(T - 1)\n")
    assert describe(program.target) == "x(t - 1) + x(T - 1)"


def examples_of_every_typed_class() -> dict[type, object]:
    one, t = ir.NumberLiteral(1.0), ir.PositionVariable("t")
    token = ir.Token(t, ir.vector(2))
    condition = ir.PositionCondition(t, "!=", ir.FixedPosition(1))
    compare = ir.Compare("==", ir.Token(t, ir.TOKEN), ir.TokenLiteral(1, "b"))
    return {
        ir.NumberLiteral: ir.NumberLiteral(0.5),
        ir.Constant: ir.Constant("w", (1.0, 2.0), ir.vector(2)),
        ir.Token: token,
        ir.Component: ir.Component(token, 2),
        ir.Inner: ir.Inner(token, token),
        ir.Norm: ir.Norm(token),
        ir.Square: ir.Square(one),
        ir.Pointwise: ir.Pointwise("sqrt", (one,)),
        ir.Arithmetic: ir.Arithmetic("*", one, token, ir.vector(2)),
        ir.Negate: ir.Negate(token, ir.vector(2)),
        ir.Divide: ir.Divide(token, 4.0, ir.vector(2)),
        ir.MatVec: ir.MatVec(ir.Constant("A", (1.0,) * 4, ir.matrix(2, 2)), token, ir.vector(2)),
        ir.Reduce: ir.Reduce("sum", ("t",), (condition,), token, ir.vector(2)),
        ir.PositionVariable: ir.PositionVariable("s", offset=2),
        ir.FixedPosition: ir.FixedPosition(3),
        ir.LastPosition: ir.LastPosition(),
        ir.ArgPosition: ir.ArgPosition("argmin", "t", (condition,), ir.Component(token, 1)),
        ir.Presence: ir.Presence(2, (ir.PositionCondition(ir.FixedPosition(2), "<", t),)),
        ir.RunLength: ir.RunLength(offset=-1),
        ir.ReflectedPosition: ir.ReflectedPosition(t, 1),
        ir.TokenLiteral: ir.TokenLiteral(0, "a"),
        ir.PositionNumber: ir.PositionNumber(ir.ReflectedPosition(t, 1, from_length=False)),
        ir.Compare: compare,
        ir.Logical: ir.Logical("or", compare, ir.Not(compare)),
        ir.Not: ir.Not(ir.Logical("and", compare, compare)),
        ir.Bracket: ir.Bracket(compare),
        ir.TableLookup: ir.TableLookup(ir.Table("size", ((0.0,),), (5.0,), 3.0, (True,)), (ir.Token(t, ir.TOKEN),)),
    }


def test_every_typed_class_is_described() -> None:
    examples = examples_of_every_typed_class()
    assert set(examples) == set(DESCRIBE_RULES) == set(ir.Expr.__args__)  # type: ignore[attr-defined]
    assert {cls.__name__: describe(node) for cls, node in examples.items()} == {
        "NumberLiteral": "0.5",
        "Constant": "w",
        "Token": "x(t)",
        "Component": "x(t)[2]",
        "Inner": "<x(t), x(t)>",
        "Norm": "||x(t)||",
        "Square": "1^2",
        "Pointwise": "sqrt(1)",
        "Arithmetic": "1 * x(t)",
        "Negate": "-x(t)",
        "Divide": "x(t) / 4",
        "MatVec": "A @ x(t)",
        "Reduce": "sum_<t : t != 1> x(t)",
        "PositionVariable": "s + 2",
        "FixedPosition": "3",
        "LastPosition": "T",
        "ArgPosition": "argmin_<t : t != 1> x(t)[1]",
        "Presence": "present(2 : 2 < t)",
        "RunLength": "len - 1",
        "ReflectedPosition": "len + 1 - t",
        "TokenLiteral": '"a"',
        "PositionNumber": "1 - t",
        "Compare": 'x(t) == "b"',
        "Logical": 'x(t) == "b" or (not x(t) == "b")',
        "Not": 'not (x(t) == "b" and x(t) == "b")',
        "Bracket": '[x(t) == "b"]',
        "TableLookup": "size(x(t))",
    }


def test_a_comparison_nodes_result_is_described_by_its_label() -> None:
    result = NodeResult("c1", ("t1",), ir.SCALAR, "c1(t1)")
    assert describe(result) == "c1(t1)"
    assert describe(ir.Arithmetic("-", result, ir.NumberLiteral(1e20), ir.SCALAR)) == "c1(t1) - 1e+20"


def test_something_that_is_not_typed_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot describe Span"):
        describe(ast.Span(1, 1, 1, 2))
