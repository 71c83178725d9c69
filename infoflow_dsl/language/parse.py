"""Stage 1 (load), parse: source text -> :class:`~infoflow_dsl.language.syntax.SourceProgram` (with spans).

The file is first cut into statements (one declaration per line; a line break inside ``( )``,
``[ ]`` or ``{ }`` continues the statement, unless the next line starts with a declaration keyword,
which marks an unclosed bracket). Each statement is parsed on its own with the LALR parser
(start rule ``statement``), so every syntax error in the file is reported, each with its
line and column, not only the first. Because every statement is parsed from the parser's
initial state, the ``match_examples`` table below (readable labels for common mistakes) sees
each bad example at the same parser depth as in a real file.

The parse tree becomes the AST through a Lark ``Transformer``; whole-number checks that the
grammar cannot express (``R^4.5``, ``x[1.5]``) are diagnosed there.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import Diagnostic, ProgramError
from . import syntax as ast
from .syntax_errors import KEYWORDS, SYNTAX_EXAMPLES, unknown_reduction

#: How deeply expressions may nest. Every stage walks trees recursively; past this depth a
#: statement is refused with a diagnostic instead of exhausting Python's stack (exit 1).
MAX_NESTING = 100

#: Readable names of the grammar's terminals, for "expected ..." messages.
TERMINAL_DESCRIPTIONS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "REDUCER": "a reduction such as min_<t>",
    "MATRIX_SHAPE": "a matrix shape {m x n}",
    "STRING": 'a quoted token name such as "a"',
    "$END": "the end of the statement",
}


@lru_cache(maxsize=1)
def grammar_text() -> str:
    """The Lark grammar, read from the installed package (it ships inside the wheel)."""
    packaged = resources.files("infoflow_dsl").joinpath("grammar/iflow.lark")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[2] / "grammar" / "iflow.lark").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def statement_parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", start="statement", propagate_positions=True, maybe_placeholders=True)


# ----------------------------------------------------------------------------- statements


def split_statements(source: str) -> list[tuple[int, int]]:
    """Character ranges ``[start, end)`` of the statements of ``source``.

    A newline ends a statement unless brackets ``(``/``[``/``{`` are open; an open bracket is
    abandoned (and the statement ended) when the next line starts with a keyword.
    """
    ranges: list[tuple[int, int]] = []
    depth = 0
    start = 0
    i = 0
    n = len(source)
    while i < n:
        ch = source[i]
        if ch == "#":
            while i < n and source[i] != "\n":
                i += 1
            continue
        if ch == '"':  # a token literal: brackets and '#' inside it are its text
            close = source.find('"', i + 1, _line_end(source, i))
            i = close + 1 if close >= 0 else i + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "\n" and (depth == 0 or _next_line_starts_declaration(source, i + 1)):
            ranges.append((start, i))
            start, depth = i + 1, 0
        i += 1
    ranges.append((start, n))
    return [(a, b) for a, b in ranges if _has_code(source[a:b])]


def _line_end(source: str, offset: int) -> int:
    end = source.find("\n", offset)
    return len(source) if end < 0 else end


def _next_line_starts_declaration(source: str, offset: int) -> bool:
    match = re.match(r"[ \t]*([A-Za-z_]+)", source[offset:offset + 64])
    return match is not None and match.group(1) in KEYWORDS


def _has_code(text: str) -> bool:
    # split on "\n" only, as the lexer counts lines: str.splitlines would also break a comment
    # at a form feed or U+2028 and take the rest of it for code
    return any(line.split("#", 1)[0].strip() for line in text.split("\n"))


def _padded(source: str, start: int, end: int) -> str:
    """The statement at ``[start, end)``, preceded by blanks so Lark's positions are the file's."""
    line_start = source.rfind("\n", 0, start) + 1
    return "\n" * source.count("\n", 0, start) + " " * (start - line_start) + source[start:end]


# ----------------------------------------------------------------------------- tree -> AST


def _span(item: Any) -> ast.Span:
    if isinstance(item, Token):
        return ast.Span(item.line or 0, item.column or 0, item.end_line or 0, item.end_column or 0)
    if getattr(item, "empty", True):
        return ast.NO_SPAN
    return ast.Span(item.line, item.column, item.end_line, item.end_column)


def _binary_rule(operator: str) -> Any:
    """The Transformer callback for one binary operator's rule."""

    def build(self: Any, meta: Any, left: ast.Expr, right: ast.Expr) -> ast.Binary:
        return ast.Binary(operator, left, right, _span(meta))  # type: ignore[arg-type]

    return build


@v_args(meta=True, inline=True)
class SyntaxBuilder(Transformer):
    """Turns Lark's parse tree into AST nodes; records whole-number faults in ``errors``."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.errors: list[Diagnostic] = []

    def _whole(self, token: Token, what: str, minimum: int = 0) -> int:
        text = str(token)
        if not text.isdigit() or int(text) < minimum:
            bound = "a whole number" if minimum == 0 else f"a whole number ≥ {minimum}"
            self.errors.append(Diagnostic(self.path, _span(token), f"{what} must be {bound}, not {text}"))
            return max(minimum, 1)
        return int(text)

    # declarations
    def statement(self, meta: Any, declaration: ast.Declaration) -> ast.Declaration:
        return declaration

    def input_decl(self, meta: Any, name: Token, space: ast.Space, domain: ast.Domain | None) -> ast.InputDecl:
        return ast.InputDecl(str(name), space, domain, _span(meta))

    def length_decl(self, meta: Any, name: Token, value: Token) -> ast.LengthDecl:
        return ast.LengthDecl(str(name), self._whole(value, "the length"), _span(meta))

    def margin_decl(self, meta: Any, value: ast.SignedNumber) -> ast.MarginDecl:
        return ast.MarginDecl(value, _span(meta))

    def sequence_target(self, meta: Any, expression: ast.Expr) -> ast.TargetDecl:
        return ast.TargetDecl(expression, _span(meta))

    def token_target(
        self, meta: Any, head: ast.Expr, conditions: tuple[ast.Condition, ...] | None, expression: ast.Expr,
    ) -> ast.TargetDecl:
        """``target(t : cond) = expr``: the head must be a bare position variable."""
        if not isinstance(head, ast.Name):
            self.errors.append(Diagnostic(self.path, head.span, "a per-token target names its position variable: "
                                                                 "target(t) = ... or target(t : t >= 2) = ..."))
            head = ast.Name("t", head.span)
        return ast.TargetDecl(expression, _span(meta), ast.Binder(head.name, head.span), conditions or ())

    def let_decl(self, meta: Any, name: Token, parameters: tuple[str, ...] | None, body: ast.Expr) -> ast.LetDecl:
        return ast.LetDecl(str(name), parameters, body, _span(meta))

    def table_decl(self, meta: Any, name: Token, *entries: ast.TableEntry) -> ast.TableDecl:
        return ast.TableDecl(str(name), entries, _span(meta))

    def single_entry(self, meta: Any, key: ast.TableAtom, value: ast.TableAtom) -> ast.TableEntry:
        keys = () if isinstance(key, ast.Name) and key.name == "_" else (key,)
        return ast.TableEntry(keys, value, _span(meta))

    def pair_entry(self, meta: Any, first: ast.TableAtom, second: ast.TableAtom,
                   value: ast.TableAtom) -> ast.TableEntry:
        return ast.TableEntry((first, second), value, _span(meta))

    def params(self, meta: Any, *names: Token | None) -> tuple[str, ...]:
        return tuple(str(n) for n in names if n is not None)

    def const_decl(self, meta: Any, name: Token, space: ast.Space | None, value: ast.ConstValue) -> ast.ConstDecl:
        return ast.ConstDecl(str(name), space, value, _span(meta))

    def token_space(self, meta: Any, *entries: ast.String | ast.SignedNumber | None) -> ast.TokenSpace:
        return ast.TokenSpace(tuple(e for e in entries if e is not None), _span(meta))

    def vocabulary_entry(self, meta: Any, entry: Token | ast.SignedNumber) -> ast.String | ast.SignedNumber:
        return self.string(meta, entry) if isinstance(entry, Token) else entry

    def scalar_space(self, meta: Any) -> ast.ScalarSpace:
        return ast.ScalarSpace(_span(meta))

    def vector_space(self, meta: Any, size: Token) -> ast.VectorSpace:
        return ast.VectorSpace(self._whole(size, "a dimension"), _span(meta))

    def matrix_space(self, meta: Any, shape: Token) -> ast.MatrixSpace:
        match = re.fullmatch(r"\{\s*([0-9]+)\s*x\s*([0-9]+)\s*\}", str(shape))
        if not match:
            message = "a matrix space is written R^{m x n}, e.g. R^{2 x 3}"
            self.errors.append(Diagnostic(self.path, _span(shape), message))
            return ast.MatrixSpace(1, 1, _span(meta))
        return ast.MatrixSpace(int(match.group(1)), int(match.group(2)), _span(meta))

    def box_domain(self, meta: Any, low: ast.SignedNumber, high: ast.SignedNumber) -> ast.BoxDomain:
        return ast.BoxDomain(low, high, _span(meta))

    def ball_domain(self, meta: Any, radius: ast.SignedNumber) -> ast.BallDomain:
        return ast.BallDomain(radius, _span(meta))

    def signed(self, meta: Any, *tokens: Token) -> ast.SignedNumber:
        return ast.SignedNumber("".join(str(t) for t in tokens), _span(meta))

    def scalar_literal(self, meta: Any, value: ast.SignedNumber) -> ast.ScalarLiteral:
        return ast.ScalarLiteral(value, _span(meta))

    def vector_literal(self, meta: Any, *entries: ast.SignedNumber) -> ast.VectorLiteral:
        return ast.VectorLiteral(tuple(entries), _span(meta))

    row = vector_literal

    def matrix_literal(self, meta: Any, *rows: ast.VectorLiteral) -> ast.MatrixLiteral:
        return ast.MatrixLiteral(tuple(rows), _span(meta))

    def randn_literal(self, meta: Any, seed: Token) -> ast.RandnLiteral:
        return ast.RandnLiteral(self._whole(seed, "a seed"), _span(meta))

    # expressions
    def number(self, meta: Any, token: Token) -> ast.Number:
        return ast.Number(str(token), _span(token))

    def name(self, meta: Any, token: Token) -> ast.Name:
        return ast.Name(str(token), _span(token))

    def call(self, meta: Any, function: Token, *arguments: ast.Expr | None) -> ast.Call:
        return ast.Call(str(function), tuple(a for a in arguments if a is not None), _span(meta))

    def string(self, meta: Any, token: Token) -> ast.String:
        return ast.String(str(token)[1:-1], _span(token))

    def bracket(self, meta: Any, condition: ast.Expr) -> ast.Bracket:
        return ast.Bracket(condition, _span(meta))

    def compare(self, meta: Any, left: ast.Expr, operator: str, right: ast.Expr) -> ast.Compare:
        return ast.Compare(operator, left, right, _span(meta))  # type: ignore[arg-type]

    def either(self, meta: Any, left: ast.Expr, right: ast.Expr) -> ast.Logical:
        return ast.Logical("or", left, right, _span(meta))

    def both(self, meta: Any, left: ast.Expr, right: ast.Expr) -> ast.Logical:
        return ast.Logical("and", left, right, _span(meta))

    def negated(self, meta: Any, argument: ast.Expr) -> ast.Not:
        return ast.Not(argument, _span(meta))

    def index(self, meta: Any, base: ast.Expr, index: Token) -> ast.Index:
        self._whole(index, "a component index", minimum=1)
        return ast.Index(base, ast.Number(str(index), _span(index)), _span(meta))

    def inner(self, meta: Any, left: ast.Expr, right: ast.Expr) -> ast.InnerProduct:
        return ast.InnerProduct(left, right, _span(meta))

    def norm(self, meta: Any, argument: ast.Expr) -> ast.Norm:
        return ast.Norm(argument, _span(meta))

    def abs(self, meta: Any, argument: ast.Expr) -> ast.Abs:
        return ast.Abs(argument, _span(meta))

    def neg(self, meta: Any, argument: ast.Expr) -> ast.Negate:
        return ast.Negate(argument, _span(meta))

    def power(self, meta: Any, base: ast.Expr, exponent: Token) -> ast.Power:
        return ast.Power(base, ast.Number(str(exponent), _span(exponent)), _span(meta))

    add = _binary_rule("+")
    sub = _binary_rule("-")
    mul = _binary_rule("*")
    div = _binary_rule("/")
    matmul = _binary_rule("@")

    def reduction(
        self, meta: Any, reducer: Token, binders: tuple[ast.Binder, ...],
        conditions: tuple[ast.Condition, ...] | None, body: ast.Expr,
    ) -> ast.Reduction:
        text = str(reducer)
        kind = text.split("_<")[0].split("(")[0].strip()
        rank = None
        if kind == "top":
            rank = int(re.search(r"[0-9]+", text).group(0))  # type: ignore[union-attr]
            if rank < 1:
                self.errors.append(Diagnostic(self.path, _span(reducer), "top(k) needs k ≥ 1"))
                rank = 1
        return ast.Reduction(kind, binders, conditions or (), body, rank, _span(meta))  # type: ignore[arg-type]

    def binders(self, meta: Any, *names: Token) -> tuple[ast.Binder, ...]:
        return tuple(ast.Binder(str(n), _span(n)) for n in names)

    def conditions(self, meta: Any, *conditions: ast.Condition) -> tuple[ast.Condition, ...]:
        return conditions

    def condition(self, meta: Any, left: Any, operator: Any, right: Any) -> ast.Condition:
        return ast.Condition(left, operator, right, _span(meta))

    def comparison(self, meta: Any, token: Token) -> str:
        return str(token)

    def position_term(self, meta: Any, token: Token) -> ast.Name | ast.Number:
        if token.type == "NUMBER":
            self._whole(token, "a position", minimum=1)
            return ast.Number(str(token), _span(token))
        return ast.Name(str(token), _span(token))

    def _offset(self, meta: Any, name: Token, amount: Token, sign: int) -> ast.PositionOffset:
        value = self._whole(amount, "a position offset")
        return ast.PositionOffset(ast.Name(str(name), _span(name)), sign * value,
                                  ast.Number(str(amount), _span(amount)), _span(meta))

    def offset_plus(self, meta: Any, name: Token, amount: Token) -> ast.PositionOffset:
        return self._offset(meta, name, amount, 1)

    def offset_minus(self, meta: Any, name: Token, amount: Token) -> ast.PositionOffset:
        return self._offset(meta, name, amount, -1)


# ----------------------------------------------------------------------------- errors


def _describe_terminal(parser: Lark, name: str) -> str:
    if name in TERMINAL_DESCRIPTIONS:
        return TERMINAL_DESCRIPTIONS[name]
    try:
        pattern = parser.get_terminal(name).pattern
    except KeyError:
        return name
    return f"'{pattern.value}'" if pattern.type == "str" else name


def _expected(parser: Lark, names: set[str]) -> str:
    described = sorted({_describe_terminal(parser, n) for n in names})
    if not described:
        return ""
    if len(described) == 1:
        return f"; expected {described[0]}"
    return "; expected one of " + ", ".join(described)


def _acceptable(error: UnexpectedToken) -> set[str]:
    """The terminals the parser would really accept here.

    ``error.expected`` is the LALR state's lookahead set before its default reductions, so
    after ``target 1`` it lists ``)``, ``,`` and ``>`` (which only fit inside brackets) and
    misses the end of the statement; ``accepts`` replays the parser to find the true set.
    """
    try:
        accepts = error.accepts
    except Exception:
        accepts = None
    return set(accepts) if accepts else {str(name) for name in error.expected}


def _syntax_diagnostic(path: str, error: UnexpectedInput, text: str) -> Diagnostic:
    parser = statement_parser()
    label = None
    if isinstance(error, UnexpectedToken):
        try:
            label = error.match_examples(parser.parse, SYNTAX_EXAMPLES, use_accepts=True)
        except Exception:
            label = None
    if isinstance(error, UnexpectedToken) and error.token.type != "$END":
        token = error.token
        span = _span(token)
        unknown = unknown_reduction(text, token)
        if unknown is not None:
            label = unknown
        message = f"unexpected '{token}'" + (f": {label}" if label else _expected(parser, _acceptable(error)))
    elif isinstance(error, UnexpectedToken | UnexpectedEOF):
        token = getattr(error, "token", None)
        if token is not None and token.end_line:  # $END borrows the last token's position
            line, column = token.end_line, token.end_column
        else:
            last = text.rstrip()
            line = last.count("\n") + 1
            column = len(last) - (last.rfind("\n") + 1) + 1
        span = ast.Span(line, column, line, column + 1)
        expected = _acceptable(error) if isinstance(error, UnexpectedToken) else {str(name) for name in error.expected}
        message = "unexpected end of statement" + (f": {label}" if label else _expected(parser, expected))
    else:
        assert isinstance(error, UnexpectedCharacters)
        span = ast.Span(error.line, error.column, error.line, error.column + 1)
        message = f"unexpected character {error.char!r}"
    return Diagnostic(path, span, message)


# ----------------------------------------------------------------------------- entry point


def _too_deep(tree: Tree) -> Tree | None:
    """The first subtree nested deeper than ``MAX_NESTING`` (the declaration is level 0), or None.

    Iterative, so that it works on trees the recursive Transformer could not walk.
    """
    stack = [(child, 0) for child in reversed(tree.children) if isinstance(child, Tree)]
    while stack:
        node, level = stack.pop()
        if level > MAX_NESTING and not node.meta.empty:
            return node
        stack.extend((child, level + 1) for child in reversed(node.children) if isinstance(child, Tree))
    return None



def parse(source: str, path: str = "<string>") -> ast.SourceProgram:
    """Parse ``source``; raise :class:`ProgramError` with every syntax error found."""
    parser = statement_parser()
    declarations: list[ast.Declaration] = []
    errors: list[Diagnostic] = []
    for start, end in split_statements(source):
        text = _padded(source, start, end)
        try:
            tree = parser.parse(text)
        except UnexpectedInput as error:
            errors.append(_syntax_diagnostic(path, error, text))
            continue
        deep = _too_deep(tree)
        if deep is not None:
            span = ast.Span(deep.meta.line, deep.meta.column, deep.meta.end_line, deep.meta.end_column)
            message = f"the expression is nested too deeply (more than {MAX_NESTING} levels)"
            errors.append(Diagnostic(path, span, message))
            continue
        builder = SyntaxBuilder(path)
        declarations.append(builder.transform(tree))
        errors.extend(builder.errors)
    if errors:
        raise ProgramError(errors, source)
    return ast.SourceProgram(tuple(declarations))
