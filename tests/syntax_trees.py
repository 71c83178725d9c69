"""Short ways to write ``.iflow`` ASTs in tests: the AST of an expression's text, and builders
for the nodes the parser and printer tests spell out by hand."""

from __future__ import annotations

from infoflow_dsl.language import syntax as ast
from infoflow_dsl.language.parse import parse

N = ast.Number
V = ast.Name


def target_of(text: str) -> ast.Expr:
    """The AST of the expression ``text`` (parsed as a target line)."""
    (declaration,) = parse(f"target {text}\n").declarations
    assert isinstance(declaration, ast.TargetDecl)
    return declaration.expression


def add(left: ast.Expr, right: ast.Expr) -> ast.Binary:
    return ast.Binary("+", left, right)


def reduction(kind: str, names: str, body: ast.Expr, *conditions: ast.Condition, rank: int | None = None):
    """``kind_<names : conditions> body``; ``names`` comma-separated."""
    binders = tuple(ast.Binder(n.strip()) for n in names.split(","))
    return ast.Reduction(kind, binders, conditions, body, rank)  # type: ignore[arg-type]
