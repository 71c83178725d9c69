"""Hypothesis strategies for ``.iflow`` ASTs: names, numbers, conditions, expressions and
declarations, and token mutations of whole programs (the parser's round-trip test and the fuzz tests share them)."""

from __future__ import annotations

import keyword
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from infoflow_dsl.language import syntax as ast

NOT_NAMES = {"input", "length", "const", "let", "margin", "target", "table", "in", "ball", "randn", "and", "R", "top",
             "or", "not", "token"}
REDUCER_PREFIXES = ("argmin_", "argmax_", "min_", "max_", "sum_", "mean_")

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: n not in NOT_NAMES and not n.startswith(REDUCER_PREFIXES) and not keyword.iskeyword(n)
)
NUMBER_TEXTS = st.from_regex(r"([0-9]{1,4}\.?[0-9]{0,3}|\.[0-9]{1,3})([eE][+-]?[0-9]{1,3})?", fullmatch=True)
WHOLE_TEXTS = st.integers(1, 999).map(str) | st.sampled_from(["01", "007"])
SIZES = st.integers(0, 10**6)
#: The text of a quoted token (no quote or line break inside: the grammar has no escapes).
TOKEN_TEXTS = st.from_regex(r'[A-Za-z0-9 ()\[\]{}#+<>=-]{0,4}', fullmatch=True)


def condition_strategy(names: st.SearchStrategy[str] = NAMES,
                       whole_texts: st.SearchStrategy[str] = WHOLE_TEXTS) -> st.SearchStrategy[ast.Condition]:
    """Conditions between names, literals and offsets (``t - 1``, ``s + 2``)."""
    offsets = st.builds(lambda name, sign, text: ast.PositionOffset(ast.Name(name), sign * int(text), ast.Number(text)),
                        names, st.sampled_from([1, -1]), whole_texts)
    position_terms = names.map(ast.Name) | whole_texts.map(ast.Number) | offsets
    return st.builds(
        ast.Condition, position_terms, st.sampled_from(["!=", "<", "<=", ">", ">=", "=="]), position_terms,
    )


def expression_strategy(
    names: st.SearchStrategy[str] = NAMES, number_texts: st.SearchStrategy[str] = NUMBER_TEXTS,
    whole_texts: st.SearchStrategy[str] = WHOLE_TEXTS, max_leaves: int = 25,
) -> st.SearchStrategy[ast.Expr]:
    """Well-formed expression ASTs of every kind (they need not type-check)."""
    numbers = number_texts.map(ast.Number)
    conditions = condition_strategy(names, whole_texts)
    binders = st.lists(names.map(ast.Binder), min_size=1, max_size=3).map(tuple)

    @st.composite
    def reductions(draw: st.DrawFn, bodies: st.SearchStrategy[ast.Expr]) -> ast.Reduction:
        kind = draw(st.sampled_from(["min", "max", "sum", "mean", "top", "argmin", "argmax"]))
        rank = draw(st.integers(1, 20)) if kind == "top" else None
        chosen = draw(st.lists(conditions, max_size=3).map(tuple))
        return ast.Reduction(kind, draw(binders), chosen, draw(bodies), rank)

    def compound(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        return st.one_of(
            st.builds(ast.Call, names, st.lists(children, max_size=3).map(tuple)),
            st.builds(ast.Index, children, whole_texts.map(ast.Number)),
            st.builds(ast.InnerProduct, children, children),
            st.builds(ast.Norm, children),
            st.builds(ast.Abs, children),
            st.builds(ast.Binary, st.sampled_from(["+", "-", "*", "/", "@"]), children, children),
            st.builds(ast.Negate, children),
            st.builds(ast.Power, children, numbers),
            reductions(children),
            predicates(children).map(ast.Bracket),
        )

    def predicates(children: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        """A bracket's condition: comparisons of expressions joined with and, or, not."""
        comparisons = st.builds(ast.Compare, st.sampled_from(["!=", "<", "<=", ">", ">=", "=="]), children, children)
        joined = st.builds(ast.Logical, st.sampled_from(["and", "or"]), comparisons, comparisons)
        return st.one_of(comparisons, joined, st.builds(ast.Not, comparisons | joined),
                         st.builds(ast.Logical, st.sampled_from(["and", "or"]), joined, st.builds(ast.Not, joined)))


    return st.recursive(numbers | names.map(ast.Name) | TOKEN_TEXTS.map(ast.String), compound,
                        max_leaves=max_leaves)


def declaration_strategy(
    names: st.SearchStrategy[str] = NAMES, number_texts: st.SearchStrategy[str] = NUMBER_TEXTS,
    expressions: st.SearchStrategy[ast.Expr] | None = None, sizes: st.SearchStrategy[int] = SIZES,
) -> st.SearchStrategy[ast.Declaration]:
    """Well-formed declarations of every kind."""
    expressions = expressions if expressions is not None else expression_strategy(names, number_texts)
    signed_numbers = st.builds(
        lambda sign, text: ast.SignedNumber(sign + text), st.sampled_from(["", "-"]), number_texts,
    )
    vocabularies = st.one_of(
        st.lists(TOKEN_TEXTS.map(ast.String), max_size=4), st.lists(signed_numbers, max_size=4),
    ).map(lambda entries: ast.TokenSpace(tuple(entries)))
    spaces = st.one_of(
        st.just(ast.ScalarSpace()), sizes.map(ast.VectorSpace), st.builds(ast.MatrixSpace, sizes, sizes), vocabularies,
    )
    domains = st.one_of(
        st.none(), st.builds(ast.BoxDomain, signed_numbers, signed_numbers), signed_numbers.map(ast.BallDomain),
    )
    vector_literals = st.lists(signed_numbers, min_size=1, max_size=4).map(lambda e: ast.VectorLiteral(tuple(e)))
    const_values = st.one_of(
        signed_numbers.map(ast.ScalarLiteral),
        vector_literals,
        st.lists(vector_literals, min_size=1, max_size=3).map(lambda rows: ast.MatrixLiteral(tuple(rows))),
        st.integers(0, 10**6).map(ast.RandnLiteral),
    )
    booleans = st.sampled_from(["true", "false"]).map(ast.Name)
    table_atoms = st.one_of(TOKEN_TEXTS.map(ast.String), signed_numbers, booleans)
    table_keys = st.one_of(st.tuples(table_atoms), st.tuples(table_atoms, table_atoms))
    table_entries = st.builds(ast.TableEntry, table_keys, table_atoms)
    tables = st.builds(
        lambda name, entries, default: ast.TableDecl(
            name, (*entries, *((ast.TableEntry((), default),) if default else ()))),
        names, st.lists(table_entries, min_size=1, max_size=4), st.none() | table_atoms,
    )
    return st.one_of(
        tables,
        st.builds(ast.InputDecl, names, spaces, domains),
        st.builds(ast.LengthDecl, names, sizes),
        st.builds(ast.ConstDecl, names, st.none() | spaces, const_values),
        st.builds(ast.LetDecl, names, st.none() | st.lists(names, max_size=3).map(tuple), expressions),
        st.builds(ast.MarginDecl, signed_numbers),
        st.builds(ast.TargetDecl, expressions),
        st.builds(lambda e, name, cs: ast.TargetDecl(e, variable=ast.Binder(name), conditions=tuple(cs)),
                  expressions, names, st.lists(condition_strategy(names), max_size=2)),
    )


def join_tokens(tokens: list[str]) -> str:
    """Program text from tokens: a space after each, newlines as they are."""
    return "".join(token if token == "\n" else token + " " for token in tokens)


MUTATIONS = ("delete", "duplicate", "swap", "insert", "replace")


def mutate_tokens(draw: st.DrawFn, tokens: list[str], rounds: int, inserted: Callable[[], str],
                  replaced: Callable[[str], str], kinds: Sequence[str] = MUTATIONS) -> str:
    """``tokens`` after ``rounds`` mutations drawn from ``kinds``: delete, duplicate or swap a token,
    insert ``inserted()`` before one, or replace one (never a newline) by ``replaced(token)``."""
    tokens = list(tokens)
    for _ in range(rounds):
        kind = draw(st.sampled_from(list(kinds)))
        i = draw(st.integers(0, len(tokens) - 1))
        if kind == "delete" and len(tokens) > 1:
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == "insert":
            tokens.insert(i, inserted())
        elif kind == "replace" and tokens[i] != "\n":
            tokens[i] = replaced(tokens[i])
    return join_tokens(tokens)

