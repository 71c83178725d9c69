"""The parser: every table program parses, spans, precedence, statements across lines,
comments, several syntax errors at once."""

from __future__ import annotations

import pytest
from programs import ALL, TOKENS
from syntax_trees import N, V, add, reduction, target_of

from infoflow_dsl.errors import ProgramError
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language.parse import parse


def diagnostics_of(source: str) -> list[tuple[int, int, str]]:
    with pytest.raises(ProgramError) as error:
        parse(source, "f.iflow")
    return [(d.line, d.column, d.message) for d in error.value.diagnostics]


# ----------------------------------------------------------------------------- the table programs


@pytest.mark.parametrize("example", ALL + TOKENS, ids=lambda e: e.name)
def test_every_table_program_parses(example) -> None:
    program = parse(example.source, example.path)
    kinds = [type(d) for d in program.declarations]
    assert kinds.count(ast.InputDecl) == 1
    assert kinds.count(ast.TargetDecl) == 1
    assert all(d.span.line >= 1 and d.span.column == 1 for d in program.declarations)


def test_canonical_targets_have_the_expected_shape() -> None:
    assert target_of("min_<t1, t2> <x(t1), x(t2)>") == reduction(
        "min", "t1, t2", ast.InnerProduct(ast.Call("x", (V("t1"),)), ast.Call("x", (V("t2"),)))
    )
    nearest = target_of("x(argmin_<s : s != T> ||x(s) - x(T)||^2)")
    assert nearest == ast.Call("x", (reduction(
        "argmin", "s",
        ast.Power(ast.Norm(ast.Binary("-", ast.Call("x", (V("s"),)), ast.Call("x", (V("T"),)))), N("2")),
        ast.Condition(V("s"), "!=", V("T")),
    ),))
    assert target_of("top(2)_<t> <x(t), w>") == reduction(
        "top", "t", ast.InnerProduct(ast.Call("x", (V("t"),)), V("w")), rank=2
    )


# ----------------------------------------------------------------------------- spans

SPANNED = """input x : R^4 in [-1, 1]
length T = 32
target min_<t1, t2 : t1 != t2> <x(t1), x(t2)> + 1
"""


def test_spans_of_declarations() -> None:
    source_input, source_length, target = parse(SPANNED).declarations
    assert isinstance(source_input, ast.InputDecl) and isinstance(source_input.domain, ast.BoxDomain)
    assert source_input.span == ast.Span(1, 1, 1, 25)
    assert source_input.space.span == ast.Span(1, 11, 1, 14)
    assert source_input.domain.span == ast.Span(1, 15, 1, 25)
    assert source_input.domain.low.span == ast.Span(1, 19, 1, 21)
    assert source_input.domain.high.span == ast.Span(1, 23, 1, 24)
    assert source_length.span == ast.Span(2, 1, 2, 14)
    assert target.span == ast.Span(3, 1, 3, 50)


def test_spans_of_expression_nodes() -> None:
    target = parse(SPANNED).declarations[2]
    assert isinstance(target, ast.TargetDecl)
    top = target.expression
    assert isinstance(top, ast.Reduction)
    assert top.span == ast.Span(3, 8, 3, 50)
    assert [b.span for b in top.binders] == [ast.Span(3, 13, 3, 15), ast.Span(3, 17, 3, 19)]
    (condition,) = top.conditions
    assert condition.span == ast.Span(3, 22, 3, 30)
    assert condition.right.span == ast.Span(3, 28, 3, 30)
    body = top.body
    assert isinstance(body, ast.Binary) and isinstance(body.left, ast.InnerProduct)
    assert body.span == ast.Span(3, 32, 3, 50)
    assert body.left.span == ast.Span(3, 32, 3, 46)
    first = body.left.left
    assert isinstance(first, ast.Call)
    assert first.span == ast.Span(3, 33, 3, 38)
    assert first.arguments[0].span == ast.Span(3, 35, 3, 37)
    assert body.right.span == ast.Span(3, 49, 3, 50)


def test_spans_count_from_the_file_not_the_statement() -> None:
    source = (
        "# comment\n\ninput x : R^2\nlength T = 4\nconst A : R^{2 x 2} = [[1, 2],\n    [3, 4]]\n  target  A @ x(1)\n"
    )
    declarations = parse(source).declarations
    constant, target = declarations[2], declarations[3]
    assert isinstance(constant, ast.ConstDecl) and isinstance(constant.value, ast.MatrixLiteral)
    assert constant.span == ast.Span(5, 1, 6, 12)
    assert constant.value.rows[1].span == ast.Span(6, 5, 6, 11)
    assert target.span == ast.Span(7, 3, 7, 19)
    assert isinstance(target, ast.TargetDecl)
    assert target.expression.span == ast.Span(7, 11, 7, 19)


def test_spans_are_not_part_of_equality() -> None:
    assert target_of("x(1)  +   2") == target_of("x(1) + 2") == add(ast.Call("x", (N("1"),)), N("2"))
    assert target_of("x(1) + 2").span != target_of("x(1)  +   2").span


# ----------------------------------------------------------------------------- precedence


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("1 + 2 * 3", add(N("1"), ast.Binary("*", N("2"), N("3")))),
        ("1 * 2 + 3", add(ast.Binary("*", N("1"), N("2")), N("3"))),
        ("1 - 2 - 3", ast.Binary("-", ast.Binary("-", N("1"), N("2")), N("3"))),
        ("1 - (2 - 3)", ast.Binary("-", N("1"), ast.Binary("-", N("2"), N("3")))),
        ("a / b * c", ast.Binary("*", ast.Binary("/", V("a"), V("b")), V("c"))),
        ("A @ v + w", add(ast.Binary("@", V("A"), V("v")), V("w"))),
        ("2 * A @ v", ast.Binary("@", ast.Binary("*", N("2"), V("A")), V("v"))),
        ("-a ^ 2", ast.Negate(ast.Power(V("a"), N("2")))),
        ("-a * b", ast.Binary("*", ast.Negate(V("a")), V("b"))),
        ("a * -b", ast.Binary("*", V("a"), ast.Negate(V("b")))),
        ("- -a", ast.Negate(ast.Negate(V("a")))),
        ("v[1]^2", ast.Power(ast.Index(V("v"), N("1")), N("2"))),
        ("x(1)[2][1]", ast.Index(ast.Index(ast.Call("x", (N("1"),)), N("2")), N("1"))),
        ("||a - b||^2", ast.Power(ast.Norm(ast.Binary("-", V("a"), V("b"))), N("2"))),
        ("|a| + |b|", add(ast.Abs(V("a")), ast.Abs(V("b")))),
        ("<a, b + c>", ast.InnerProduct(V("a"), add(V("b"), V("c")))),
        ("relu(a) + min(a, b) + max(1, 2)", add(add(ast.Call("relu", (V("a"),)), ast.Call("min", (V("a"), V("b")))),
                                                 ast.Call("max", (N("1"), N("2"))))),
        ("f()", ast.Call("f", ())),
        ("1.5e-3 + .5 + 2.", add(add(N("1.5e-3"), N(".5")), N("2."))),
    ],
)
def test_operator_precedence(text: str, tree: ast.Expr) -> None:
    assert target_of(text) == tree


def test_a_reductions_body_extends_as_far_right_as_possible() -> None:
    assert target_of("min_<t> a + 1") == reduction("min", "t", add(V("a"), N("1")))
    assert target_of("1 + min_<t> a + 2") == add(N("1"), reduction("min", "t", add(V("a"), N("2"))))
    assert target_of("2 * max_<t> a * 3") == ast.Binary(
        "*", N("2"), reduction("max", "t", ast.Binary("*", V("a"), N("3")))
    )
    assert target_of("-sum_<t> a - 1") == ast.Negate(reduction("sum", "t", ast.Binary("-", V("a"), N("1"))))
    assert target_of("max_<t> f(t) + max_<t> g(t)") == reduction(
        "max", "t", add(ast.Call("f", (V("t"),)), reduction("max", "t", ast.Call("g", (V("t"),))))
    )


def test_brackets_end_a_reductions_body() -> None:
    assert target_of("(min_<t> a) + 1") == add(reduction("min", "t", V("a")), N("1"))
    assert target_of("<min_<t> a, b>") == ast.InnerProduct(reduction("min", "t", V("a")), V("b"))
    assert target_of("x(argmax_<s> a) + 1") == add(ast.Call("x", (reduction("argmax", "s", V("a")),)), N("1"))
    assert target_of("|mean_<t> a| + 1") == add(ast.Abs(reduction("mean", "t", V("a"))), N("1"))
    assert target_of("max(min_<t> a, b)") == ast.Call("max", (reduction("min", "t", V("a")), V("b")))


def test_reduction_heads_and_conditions() -> None:
    tree = target_of("top( 3 )_<s, t : s != t and s < 3 and T >= t and 2 == s and t <= T and s > 1> a")
    assert tree == reduction(
        "top", "s, t", V("a"),
        ast.Condition(V("s"), "!=", V("t")), ast.Condition(V("s"), "<", N("3")), ast.Condition(V("T"), ">=", V("t")),
        ast.Condition(N("2"), "==", V("s")), ast.Condition(V("t"), "<=", V("T")), ast.Condition(V("s"), ">", N("1")),
        rank=3,
    )
    for kind in ("min", "max", "sum", "mean", "argmin", "argmax"):
        assert target_of(f"{kind}_<t> a") == reduction(kind, "t", V("a"))


# ----------------------------------------------------------------------------- statements and comments


def test_statements_continue_across_line_breaks_inside_brackets() -> None:
    source = """input x : R^2
length T = 4
const A : R^{2 x 2} = [[1, 2],
                       [3, 4]]
target max(x(1)[1],
           (A @ x(2))[2]) + (<x(1),
                              x(2)>)
"""
    program = parse(source)
    assert [type(d) for d in program.declarations] == [ast.InputDecl, ast.LengthDecl, ast.ConstDecl, ast.TargetDecl]
    constant, target = program.declarations[2], program.declarations[3]
    assert isinstance(constant, ast.ConstDecl) and isinstance(constant.value, ast.MatrixLiteral)
    assert [[e.text for e in row.entries] for row in constant.value.rows] == [["1", "2"], ["3", "4"]]
    assert isinstance(target, ast.TargetDecl)
    assert target.span == ast.Span(5, 1, 7, 37)
    assert target.expression == add(
        ast.Call("max", (ast.Index(ast.Call("x", (N("1"),)), N("1")),
                         ast.Index(ast.Binary("@", V("A"), ast.Call("x", (N("2"),))), N("2")))),
        ast.InnerProduct(ast.Call("x", (N("1"),)), ast.Call("x", (N("2"),))),
    )


def test_a_line_break_outside_brackets_ends_the_statement() -> None:
    assert diagnostics_of("input x : R^2\nlength T = 4\ntarget x(1)\n  + x(2)\n") == [
        (4, 3, "unexpected '+': a declaration starts with one of: input, length, const, let, margin, target, table"),
    ]


def test_an_unclosed_bracket_stops_at_the_next_declaration() -> None:
    assert diagnostics_of("input x : R^2\ntarget (x(1)\nlength T = 4\n") == [
        (2, 13, "unexpected end of statement; expected one of ')', ':'"),
    ]


def test_comments() -> None:
    source = """# a comment line
input x : R^2   # after a declaration
  # indented comment

length T = 4 # T
const A : R^{2 x 2} = [[1, 2],  # a comment inside brackets
                       [3, 4]]  # and after them
target A @ x(1)  # <x(1), x(2)> is not read
# last
"""
    program = parse(source)
    assert [type(d) for d in program.declarations] == [ast.InputDecl, ast.LengthDecl, ast.ConstDecl, ast.TargetDecl]
    assert program == parse("input x : R^2\nlength T = 4\nconst A : R^{2 x 2} = [[1, 2], [3, 4]]\ntarget A @ x(1)\n")


def test_a_comment_with_a_form_feed_is_still_a_comment() -> None:
    source = "# page\x0cbreak\u2028and more\ninput x : R^2\nlength T = 4\ntarget x(1)\n"
    assert len(parse(source).declarations) == 3


def test_an_empty_file_parses_to_no_declarations() -> None:
    assert parse("") == ast.SourceProgram(())
    assert parse("# only a comment\n\n   \n") == ast.SourceProgram(())


# ----------------------------------------------------------------------------- syntax errors


def test_several_syntax_errors_are_all_reported_with_their_lines() -> None:
    source = """input x R^2
length T = 4
const c = $
target min_<t x(t)[1]
let f(a) =
target x(1) +  # trailing
target 1 2
"""
    assert diagnostics_of(source) == [
        (1, 9, "unexpected 'R': the input needs a space: input x : R^d"),
        (3, 11, "unexpected character '$'"),
        (4, 15, "unexpected 'x': a reduction's variables are closed with '>' before its body"),
        (5, 11, "unexpected end of statement: an expression is missing"),
        (6, 14, "unexpected end of statement: an expression is missing"),
        (7, 10, "unexpected '2'; expected one of '*', '+', '-', '/', '@', '[', '^', the end of the statement"),
    ]


@pytest.mark.parametrize(
    ("line", "diagnostic"),
    [
        ("x = 1", (1, 1, "unexpected 'x': a declaration starts with one of: input, length, const, let, margin, "
                         "target, table")),
        ("input x : R4", (1, 12, "unexpected '4': a space is written R, R^n or R^{m x n}")),
        ("input x : R^2 in (0, 1)", (1, 18, "unexpected '(': a domain is written in [a, b] or in ball(r)")),
        ("input x : R^2 in [0 1]", (1, 21, "unexpected '1': a domain is written in [a, b] or in ball(r)")),
        ("input x : R^2 in [0, 1] 3", (1, 25, "unexpected '3'; expected the end of the statement")),
        ("target", (1, 7, "unexpected end of statement: an expression is missing")),
        ("target <x(1), >", (1, 15, "unexpected '>': an expression is missing")),
        ("target = x(len)", (1, 8, "unexpected '=': a target for the whole sequence is written target EXPR (no "
                                   "'='); one per token target(t) = EXPR")),
        ("target <x(1) x(2)>", (1, 14, "unexpected 'x'; expected one of '*', '+', ',', '-', '/', '@', '[', '^'")),
        ("target x(1) )", (1, 13, "unexpected ')'; expected the end of the statement")),
        ("target min_<t : t> x(t)[1]", (1, 21, "unexpected '(': a condition compares two positions: s != t, s < 3, "
                                               "t == T")),
        ("const c = 1.5e", (1, 14, "unexpected 'e'; expected the end of the statement")),
        ("let = 3", (1, 5, "unexpected '='; expected a name")),
        ("target x(1)[1.5]", (1, 13, "a component index must be a whole number ≥ 1, not 1.5")),
        ("target x(1)[0]", (1, 13, "a component index must be a whole number ≥ 1, not 0")),
        ("target min_<t : t < 2.5> x(t)[1]", (1, 21, "a position must be a whole number ≥ 1, not 2.5")),
        ("input x : R^2.5", (1, 13, "a dimension must be a whole number, not 2.5")),
        ("length T = 2.0", (1, 12, "the length must be a whole number, not 2.0")),
        ("const A : R^{2 y 2} = randn(1)", (1, 13, "a matrix space is written R^{m x n}, e.g. R^{2 x 3}")),
        ("const A : R^{2 x 2} = randn(1.5)", (1, 29, "a seed must be a whole number, not 1.5")),
        ("target top(0)_<t> x(t)[1]", (1, 8, "top(k) needs k ≥ 1")),
        ("target x(1) é", (1, 13, "unexpected character 'é'")),
        ("target mx_<s, t> <x(s), x(t)>", (1, 11, "unexpected '<': `mx_` is not a reduction (the reductions are "
                                                  "min_, max_, sum_, mean_, argmin_, argmax_, top(k)_); did you mean "
                                                  "max_?")),
        ("target 1 + summ_<s> x(s)[1]", (1, 17, "unexpected '<': `summ_` is not a reduction (the reductions are "
                                                "min_, max_, sum_, mean_, argmin_, argmax_, top(k)_); did you mean "
                                                "sum_?")),
    ],
)
def test_syntax_error_messages(line: str, diagnostic: tuple[int, int, str]) -> None:
    assert diagnostics_of(line + "\n") == [diagnostic]


def test_a_statement_nested_too_deeply_is_refused_not_a_crash() -> None:
    source = "target " + "-" * 5000 + "1\n"
    assert diagnostics_of(source) == [(1, 108, "the expression is nested too deeply (more than 100 levels)")]
    assert isinstance(target_of("-" * 90 + "1"), ast.Negate)


def test_a_token_literal_may_hold_brackets_and_hashes() -> None:
    """Statements are cut outside quoted tokens: "(" opens no bracket, "#" starts no comment."""
    source = 'input x : token {"(", "#", ")"}\nlength T = 4\ntarget(t) = [x(t) == "("] + [x(t) == "#"]\n'
    input_decl, _, target = parse(source).declarations
    assert [e.text for e in input_decl.space.entries] == ["(", "#", ")"]  # type: ignore[union-attr]
    assert target.span.line == 3 and target.variable is not None  # type: ignore[union-attr]


def test_a_bracket_is_not_an_index() -> None:
    assert target_of("x(1)[2]") == ast.Index(ast.Call("x", (N("1"),)), N("2"))
    assert target_of("2 * [a < b]") == ast.Binary("*", N("2"), ast.Bracket(ast.Compare("<", V("a"), V("b"))))
    assert target_of("[a < b][1]") == ast.Index(ast.Bracket(ast.Compare("<", V("a"), V("b"))), N("1"))
