"""Separating a comparison's score into per-token features: f(t, s) = Σ_j φ_j(t) · ψ_j(s).

A retrieval head compares position s for the querying token t by the score q(t)·k(s), so the
score must be a finite sum of products of a feature of the querying side (φ_j: of t, of fixed
positions, of values already at the readout) and a feature of the compared position
(ψ_j: of s alone). This module expands an expression into a polynomial whose monomials are
products of **atoms** — a token coordinate x(p)[i], or an opaque per-token function such as
||x(s)|| or relu(<x(s), w>) or the result of an earlier comparison — each belonging to one
**source** position, then groups the monomials by their s-part. Inner products, bilinear
forms <a, A @ b>, squared distances and any polynomial separate; ||x(t) − x(s)|| (not a
polynomial of both) or relu(<x(t), x(s)>) do not, and the caller reports that. In a token
program a non-polynomial function of two positions' finite-valued features (``[x(r) < x(s)]``)
separates too, as a sum of indicator products (:mod:`.finite`): one pair per value of one side.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..language import typed as ir
from ..language.functions import POINTWISE
from ..language.printer import describe
from .comparisons import NodeResult
from .finite import FiniteDomain, FiniteSplit, finite_split, indicator_terms, value_set

#: Set while separating a gathered score (see ``separate``).
_GATHERED: ContextVar[bool] = ContextVar("gathered", default=False)
#: A token program's finite domain while separating, and the finite splits made (see ``separate``).
_FINITE: ContextVar[FiniteDomain | None] = ContextVar("finite", default=None)
_SPLITS: ContextVar[list[tuple[str, FiniteSplit]] | None] = ContextVar("splits", default=None)
#: the compared position (the reduction's key) of the body being separated
_KEY: ContextVar[str | None] = ContextVar("key", default=None)

#: Above this many monomials an expansion is abandoned (reported as not separable).
MAX_MONOMIALS = 4096

READOUT = "readout"


@dataclass(frozen=True, order=True)
class Atom:
    """A scalar factor that lives at one ``source`` position (a variable name, ``3``, ``T``, ``readout``)."""

    source: str
    key: str
    expr: object = None

    def __hash__(self) -> int:
        return hash((self.source, self.key))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Atom) and (self.source, self.key) == (other.source, other.key)


Monomial = tuple[Atom, ...]
Polynomial = dict[Monomial, float]


@dataclass(frozen=True)
class FeaturePair:
    """One term φ(query side) · ψ(compared position) of a separated score."""

    query: Polynomial
    key: Monomial


class NotSeparable(Exception):
    """The expression mixes sources inside a non-polynomial function (or is too large)."""


def position_source(position: object) -> str:
    """The source label of a position: a variable's name, ``3``, ``T``, or where a retrieval ran.

    ``x(s - 1)`` lives at s: the token one place back is fetched to every token s first (a
    position head), so it is a feature of s like x(s) itself."""
    if isinstance(position, ir.PositionVariable):
        return position.name
    if isinstance(position, ir.ReflectedPosition):  # x(len + 1 - t) is fetched to every token t
        return position_source(position.mirrored)
    label = ir.position_label(position)
    if label is not None:
        return label
    variables = getattr(position, "variables", None)
    if variables is not None:  # a node result: it lives where its node ran
        if len(variables) > 1:
            raise NotSeparable(f"{describe(position)} depends on several positions")
        return variables[0] if variables else READOUT
    raise NotSeparable(f"cannot place {describe(position)}")


def _constant(value: float) -> Polynomial:
    return {(): value} if value != 0 else {}


def _add(a: Polynomial, b: Polynomial, scale: float = 1.0) -> Polynomial:
    out = dict(a)
    for monomial, c in b.items():
        out[monomial] = out.get(monomial, 0.0) + scale * c
        if out[monomial] == 0:
            del out[monomial]
    return out


def _multiply(a: Polynomial, b: Polynomial) -> Polynomial:
    out: Polynomial = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            monomial = tuple(sorted(ma + mb))
            out[monomial] = out.get(monomial, 0.0) + ca * cb
    if len(out) > MAX_MONOMIALS:
        raise NotSeparable("the expansion has too many terms")
    return {m: c for m, c in out.items() if c != 0}


def _scale(a: Polynomial, factor: float) -> Polynomial:
    return {m: c * factor for m, c in a.items()} if factor != 0 else {}


def _is_fixed(source: str) -> bool:
    """A fixed position's source label (``3``, ``T``, ``T - 1``)."""
    return source.isdigit() or source.startswith(("T", "len"))


def _opaque(expr: object) -> Polynomial:
    """A non-polynomial scalar: one atom if it lives at one source, else not separable (in a
    gathered score a fixed position joins whichever token reads it)."""
    sources = sources_of(expr)
    if _GATHERED.get() and len(sources) > 1:
        sources = {s for s in sources if not _is_fixed(s)} or {min(sources)}
    domain = _FINITE.get()
    if len(sources) == 2 and domain is not None:  # ties enumerate the query side, as the compiler does
        split = finite_split(expr, domain, sources_of, prefer=next((s for s in sources if s != _KEY.get()), None))
        if split is not None:
            return _indicator_sum(expr, split, domain)
    if len(sources) > 1:
        raise NotSeparable(f"{describe(expr)} mixes positions {', '.join(sorted(sources))} inside a "
                           f"function that is not a polynomial")
    source = next(iter(sources)) if sources else READOUT
    return {(Atom(source, describe(expr), expr),): 1.0}


def _indicator_sum(expr: object, split: FiniteSplit, domain: FiniteDomain) -> Polynomial:
    """g(a, b) = Σ_v [a = v] · g(v, b): one monomial per joint value v of the split's side."""
    if split.rank > MAX_MONOMIALS:
        raise NotSeparable(f"{describe(expr)} takes {split.rank} values on each side: too many indicator terms")
    recorded = _SPLITS.get()
    if recorded is not None:
        recorded.append((describe(expr), split))
    out: Polynomial = {}
    for indicator, rest in indicator_terms(expr, split, domain):
        monomial = [Atom(split.source, describe(indicator), indicator)]
        if sources_of(rest):
            monomial.append(Atom(split.other, describe(rest), rest))
            out[tuple(sorted(monomial))] = 1.0
        else:  # a constant: its one value
            (constant,) = value_set(rest, domain) or {0}
            if constant:
                out[tuple(monomial)] = float(constant)
    return out


def sources_of(expr: object) -> set[str]:
    """The source positions whose values ``expr`` reads (a slot guard lives at the token it guards)."""
    if isinstance(expr, ir.Presence):
        return {name for c in expr.conditions for name in _variable_names(c)}
    if isinstance(expr, ir.Token):
        return {position_source(expr.position)}
    if isinstance(expr, ir.PositionNumber):  # k and T are constants; a variable's number lives at it
        fixed = isinstance(expr.position, ir.FixedPosition | ir.LastPosition)
        return set() if fixed else {position_source(expr.position)}
    if hasattr(expr, "label") and hasattr(expr, "variables"):
        return {position_source(expr)}
    found: set[str] = set()
    for item in ir.children(expr):
        found |= sources_of(item)
    return found


def _variable_names(condition: ir.PositionCondition) -> list[str]:
    return [t.name for t in (condition.left, condition.right) if isinstance(t, ir.PositionVariable)]


def expand(expr: object) -> list[Polynomial]:
    """The polynomial of each component of ``expr`` (one entry for a scalar): :data:`EXPAND_RULES`,
    one rule per class; a class with no polynomial structure (a pointwise function, a bracket,
    a position number, ...) is one atom (:func:`_atom`)."""
    rule = EXPAND_RULES.get(type(expr))
    if rule is None:
        raise TypeError(f"the feature expansion has no rule for {type(expr).__name__}")
    return rule(expr)


def _token(expr: ir.Token) -> list[Polynomial]:
    source, name = position_source(expr.position), describe(expr)
    if not expr.type.shape:  # a token program's token: one number
        return [{(Atom(source, name, expr),): 1.0}]
    return [{(Atom(source, f"{name}[{i + 1}]", ir.Component(expr, i + 1)),): 1.0} for i in range(expr.type.shape[0])]


def _inner(expr: ir.Inner) -> list[Polynomial]:
    total: Polynomial = {}
    for a, b in zip(expand(expr.left), expand(expr.right), strict=True):
        total = _add(total, _multiply(a, b))
    return [total]


def _square(expr: ir.Square) -> list[Polynomial]:
    if isinstance(expr.argument, ir.Norm):
        return expand(ir.Inner(expr.argument.argument, expr.argument.argument))
    (a,) = expand(expr.argument)
    return [_multiply(a, a)]


def _matvec(expr: ir.MatVec) -> list[Polynomial]:
    rows, columns = expr.matrix.type.shape
    vector = expand(expr.vector)
    out = []
    for r in range(rows):
        row: Polynomial = {}
        for c in range(columns):
            row = _add(row, vector[c], expr.matrix.values[r * columns + c])
        out.append(row)
    return out


def _node_result(expr: NodeResult) -> list[Polynomial]:
    if expr.type.kind == "vector":  # a vector result: one atom a component
        source = position_source(expr)
        return [{(Atom(source, f"{describe(expr)}[{i + 1}]", ir.Component(expr, i + 1)),): 1.0}  # type: ignore[arg-type]
                for i in range(expr.type.shape[0])]
    return [_opaque(expr)]


def _atom(expr: object) -> list[Polynomial]:
    """A scalar with no polynomial structure of its own: one atom."""
    if expr.type.kind == "vector":  # type: ignore[attr-defined]
        raise NotSeparable(f"{describe(expr)} is a vector this analysis cannot expand")
    return [_opaque(expr)]


def _arithmetic(expr: ir.Arithmetic) -> list[Polynomial]:
    left, right = expand(expr.left), expand(expr.right)
    if expr.operator == "*":
        if len(left) == 1:
            return [_multiply(left[0], p) for p in right]
        return [_multiply(p, right[0]) for p in left]
    sign = 1.0 if expr.operator == "+" else -1.0
    return [_add(a, b, sign) for a, b in zip(left, right, strict=True)]


#: How each value node of a comparison's body expands into polynomials of atoms (a reduction or
#: an argmin/argmax is a comparison node's result by now; the gather route's presences are atoms).
EXPAND_RULES: dict[type, Callable[[Any], list[Polynomial]]] = {
    ir.NumberLiteral: lambda expr: [_constant(expr.value)],
    ir.Constant: lambda expr: [_constant(v) for v in expr.values],
    ir.Token: _token,
    ir.Component: lambda expr: [expand(expr.vector)[expr.index - 1]],
    ir.Inner: _inner,
    ir.Square: _square,
    ir.Arithmetic: _arithmetic,
    ir.Negate: lambda expr: [_scale(p, -1.0) for p in expand(expr.argument)],
    ir.Divide: lambda expr: [_scale(p, 1.0 / expr.divisor) for p in expand(expr.numerator)],
    ir.MatVec: _matvec,
    NodeResult: _node_result,
    **{atomic: _atom for atomic in (ir.Norm, ir.Pointwise, ir.Presence, ir.TokenLiteral, ir.PositionNumber,
                                    ir.Compare, ir.Logical, ir.Not, ir.Bracket, ir.TableLookup)},
}


def separate(body: object, variable: str, gathered: bool = False, finite: FiniteDomain | None = None,
             splits: list[tuple[str, FiniteSplit]] | None = None) -> list[FeaturePair]:
    """``body`` as Σ_j φ_j · ψ_j with ψ_j a monomial in atoms of ``variable`` alone (per component).

    The pair with ψ = 1 (empty monomial) collects the terms free of ``variable``.
    ``gathered`` (compile's gather route, where every token holds every fixed position's token):
    fixed positions are features of the compared token too, so they go to the key side and may
    mix with it inside a non-polynomial function.
    ``finite`` (a token program's domain): a function of two positions' finite-valued features
    separates as a sum of indicator products; each such split is appended to ``splits``.
    Raises :class:`NotSeparable`.
    """
    tokens = _GATHERED.set(gathered), _FINITE.set(finite), _SPLITS.set(splits), _KEY.set(variable)
    try:
        polynomials = expand(body)
    finally:
        _GATHERED.reset(tokens[0])
        _FINITE.reset(tokens[1])
        _SPLITS.reset(tokens[2])
        _KEY.reset(tokens[3])
    pairs: list[FeaturePair] = []
    for polynomial in polynomials:  # a vector body (sum, mean) separates component by component
        grouped: dict[Monomial, Polynomial] = defaultdict(dict)
        for monomial, coefficient in polynomial.items():
            on_key = [a.source == variable or (gathered and _is_fixed(a.source)) for a in monomial]
            key = tuple(a for a, k in zip(monomial, on_key, strict=True) if k)
            query = tuple(a for a, k in zip(monomial, on_key, strict=True) if not k)
            grouped[key][query] = grouped[key].get(query, 0.0) + coefficient
        pairs.extend(FeaturePair(query, key) for key, query in sorted(grouped.items()))
    return pairs


def describe_monomial(monomial: Monomial) -> str:
    if not monomial:
        return "1"
    return "·".join(a.key for a in monomial)


def describe_polynomial(polynomial: Polynomial) -> str:
    parts = []
    for monomial, c in sorted(polynomial.items()):
        factor = describe_monomial(monomial)
        if factor == "1":
            parts.append(f"{c:g}")
        elif c == 1:
            parts.append(factor)
        else:
            parts.append(f"{c:g}·{factor}")
    return " + ".join(parts) if parts else "0"


def monomial_interpolations(monomial: tuple) -> int:
    """Products inside one side's monomial: a square costs one function, a product two."""
    if len(monomial) < 2:
        return 0
    return sum(1 if a == b else 2 for a, b in itertools.pairwise(monomial))


def interpolations(expr: object) -> int:
    """How many univariate functions an FFN must interpolate to compute ``expr`` (squares,
    products by polarisation count two, sqrt); relu, |·|, min, max are exact and count none."""
    count = 0
    for node in [expr, *ir.sub_nodes(expr)]:
        if isinstance(node, ir.Inner):
            if sources_of(node.left) and sources_of(node.right):
                count += 2 * node.left.type.shape[0]
        elif isinstance(node, ir.Arithmetic) and node.operator == "*":
            if sources_of(node.left) and sources_of(node.right):
                count += 2 * max(1, node.type.shape[0] if node.type.shape else 1)
        elif isinstance(node, ir.Square):
            count += node.argument.argument.type.shape[0] if isinstance(node.argument, ir.Norm) else 1
        elif isinstance(node, ir.Norm):
            count += node.argument.type.shape[0] + 1
        elif isinstance(node, ir.Pointwise):
            count += POINTWISE[node.function].interpolations
    return count
