"""Macros: expansion errors (a table, in process and through the CLI), expansion limits,
substitution (parameters in conditions, names captured and shadowed, no hygiene), and the
programs ``infoflowc parse`` prints with their macros inlined."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnostics import HEADER, assert_distinct, assert_the_cli_reports, bad, diagnostics_of
from programs import by_name
from syntax_trees import target_of

import infoflow_dsl as ifl
from infoflow_dsl.cli.main import run
from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.macros import (
    MAX_EXPANSION,
    POISON,
    inline_macros,
    map_children,
    nesting_depth,
    substitute,
    substitute_condition,
)
from infoflow_dsl.language.parse import parse
from infoflow_dsl.language.printer import describe, print_expr

MACRO_ERRORS = [
    bad("macro-with-too-few-arguments", "let f(a, b) = <a, b>\ntarget f(x(1))",
        (4, 8, "macro 'f' takes 2 arguments, got 1")),
    bad("macro-with-an-argument-too-many", "let c = 1\ntarget x(1)[1] + c(2)",
        (4, 18, "macro 'c' takes 0 arguments, got 1")),
    bad("macro-calling-itself", "let g(a) = g(a) + 1\ntarget g(x(1)[1])",
        (3, 12, "macro 'g' calls itself (g → g); macros cannot recurse")),
    bad("macros-calling-each-other", "let f = h + 1\nlet h = f * 2\ntarget f",
        (4, 9, "macro 'f' calls itself (f → h → f); macros cannot recurse")),
]


def test_the_table_is_distinct() -> None:
    assert_distinct(MACRO_ERRORS)


@pytest.mark.parametrize(("source", "expected"), MACRO_ERRORS)
def test_macro_diagnostics(source: str, expected: list[tuple[int, int, str]]) -> None:
    assert diagnostics_of(source) == expected


@pytest.mark.parametrize(("source", "expected"), MACRO_ERRORS)
def test_macro_diagnostics_through_the_cli(tmp_path: Path, source: str, expected: list[tuple[int, int, str]]) -> None:
    assert_the_cli_reports(tmp_path, source, expected)


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


# ----------------------------------------------------------------------------- the expander and substitution


def macros_of(*lines: str) -> dict[str, ast.LetDecl]:
    declarations = parse("".join(line + "\n" for line in lines)).declarations
    return {d.name: d for d in declarations if isinstance(d, ast.LetDecl)}


def expanded(text: str, *lets: str) -> tuple[str | None, list[tuple[int, int, str]]]:
    """The printed expansion of ``text`` under the macros ``lets``, and the faults reported."""
    faults: list[tuple[int, int, str]] = []
    result = inline_macros(target_of(text), macros_of(*lets), lambda span, message: faults.append(
        (span.line, span.column, message)))
    return (None if result is None else print_expr(result)), faults


def test_substitution_replaces_the_parameters_everywhere_in_the_body() -> None:
    body = target_of("min_<t : t != s and t < s + 1> <x(t), a> + a")
    result = substitute(body, {"a": target_of("x(u)"), "s": ast.Name("u")})
    assert print_expr(result) == "min_<t : t != u and t < u + 1> <x(t), x(u)> + x(u)"


def test_substitution_has_no_hygiene_a_binder_captures_the_arguments_names() -> None:
    assert expanded("max_<t> f(x(t)[1])", "let f(a) = max_<t> a") == ("max_<t> max_<t> x(t)[1]", [])
    program = ifl.parse_program(HEADER + "let f(a) = max_<t> a\ntarget max_<t> f(x(t)[1])\n")
    assert describe(program.target) == "max_<t> max_<t′> x(t′)[1]"  # the argument reads the inner t


def test_a_parameter_is_replaced_under_a_binder_of_the_same_name() -> None:
    assert expanded("f(1)", "let f(t) = max_<t> x(t)[1]") == ("max_<t> x(1)[1]", [])


def test_substitution_in_conditions_keeps_positions_and_poisons_other_arguments() -> None:
    (condition,) = target_of("min_<t : t < s - 1> a").conditions  # type: ignore[attr-defined]
    assert substitute_condition(condition, {"s": ast.Name("u")}).left == ast.Name("t")
    assert substitute_condition(condition, {"s": ast.Name("u")}).right.base == ast.Name("u")
    assert substitute_condition(condition, {"s": ast.Number("3")}).right == ast.Name(POISON)
    assert substitute_condition(condition, {"t": ast.Number("3")}).left == ast.Number("3")
    assert substitute_condition(condition, {"t": target_of("x(1)")}).left == ast.Name(POISON)


def test_arguments_are_expanded_before_they_are_substituted() -> None:
    assert expanded("f(g(x(1)))", "let f(a) = <a, a>", "let g(v) = 2 * v") == ("<2 * x(1), 2 * x(1)>", [])


def test_expansion_faults_are_reported_at_the_use_and_poison_it() -> None:
    text, faults = expanded("f(1) + h", "let f(a, b) = a + b", "let h = h")
    assert text == f"{POISON} + {POISON}"
    assert faults == [(1, 8, "macro 'f' takes 2 arguments, got 1"),  # at f(1) in the target
                      (2, 9, "macro 'h' calls itself (h → h); macros cannot recurse")]  # at h in h's body


def test_expansion_past_the_node_limit_is_refused() -> None:
    lets = ["let a0(u) = u", *(f"let a{i}(u) = a{i - 1}(u) + a{i - 1}(u)" for i in range(1, 16))]
    assert 6 * 2**14 - 3 <= MAX_EXPANSION < 6 * 2**15 - 3  # the nodes expanding a14(1), a15(1) visits
    assert expanded("a14(1)", *lets)[1] == []
    assert expanded("a15(1)", *lets) == (None, [
        (1, 8, f"with its macros inlined, the target is too large (more than {MAX_EXPANSION} nodes or 100 levels "
               f"deep)"),
    ])


def test_map_children_applies_to_expressions_only() -> None:
    reduction = target_of("min_<t : t != 1> a + b")
    renamed = map_children(reduction, lambda child: ast.Name("c"))
    assert renamed == ast.Reduction("min", reduction.binders, reduction.conditions, ast.Name("c"))  # type: ignore[attr-defined]
    assert map_children(ast.Name("a"), lambda child: ast.Name("c")) == ast.Name("a")


def test_nesting_depth_counts_levels() -> None:
    assert nesting_depth(target_of("1")) == 1
    assert nesting_depth(target_of("-(1 + x(2))")) == 4
    deep: ast.Expr = ast.Number("1")
    for _ in range(5000):
        deep = ast.Negate(deep)
    assert nesting_depth(deep) == 5001  # iterative: deeper than Python's recursion limit
