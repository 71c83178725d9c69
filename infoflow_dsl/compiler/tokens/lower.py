"""The token lowering's expression walker: a typed token program -> features in a circuit.

``feature(expr, row)`` is the value of a scalar expression whose free position variable (if
any) is ``row``, computed at every row of the residual stream with ``row`` standing for that
row's position; ``token(position, row)`` is the token at a position, as V indicators. Values a
reduction reads at its keys are the same walk with the reduced variable as the row. Each node
class has one rule (:data:`RULES`); every rule builds from :mod:`.ffn` (units) and
:mod:`.heads` (attention). A sub-expression that reads only the row's own token, or only its
position, is not built at all: it is a column of the embedding table or of the positional code.

Positions other than the row's own are fetched (:mod:`.fetch`), reductions are built by
:mod:`.reductions` and sharp heads' scores by :mod:`.scores`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import torch

from ...analysis.finite import FiniteDomain, smallest_gap, value_set
from ...errors import CompileError, NoConstruction, located
from ...language import typed as ir
from ...language.exact import decimal
from ...language.printer import describe
from ...oracle.evaluate import ReferenceEvaluator
from ..circuit import ExpressionValue, LinearForm
from . import ffn
from .builder import Built, Feature, TokenCircuitBuilder, TokenFeature, constant_feature
from .fetch import arg_number, fetch
from .heads import length
from .reductions import reduce, sum_ratio
from .separate import renamed
from .widths import WidthRatio

LOCAL = "@"  # the row's own variable in cache keys


class TokenLowering:
    """Builds the features of one token program on a :class:`TokenCircuitBuilder`."""

    def __init__(self, builder: TokenCircuitBuilder, domain: FiniteDomain,
                 given: dict[str, tuple[ir.PositionCondition, ...]] | None = None) -> None:
        self.builder = builder
        self.domain = domain
        self.given = given or {}  # {the target's row: its conditions (a per-token target's `t : t >= 2`)}
        self.spread: set[ir.Expr] = set()  # sums to build with each step in a direction of its own
        self.local_forms: dict[str, dict[int, tuple[object, object]]] = {}

    def local(self, expr: ir.Expr, row: str) -> ir.Expr:
        """``expr`` with its row's variable named LOCAL: the caches' key, one expression whatever its
        row is called (every subtree's form remembered per row: lowering asks for each in turn)."""
        return ir.rename(expr, row, LOCAL, memo=self.local_forms.setdefault(row, {}))

    def stepped(self, expr: ir.Expr, row: str) -> Feature:
        """``expr``'s feature for a reader of its steps [expr ≥ c]: a selector width is then built
        with each of its steps [S ≥ v] in a direction of its own, S = v₀ + Σ (v − v′)·[S ≥ v]
        (:mod:`.widths`), so the steps cost no second FFN (where something else built the sum
        first, it is that sum)."""
        self.spread.add(self.local(expr, row))
        return self.feature(expr, row)

    def spreads(self, expr: ir.Expr, row: str) -> bool:
        """Whether a reader asked for ``expr``'s steps (:meth:`stepped`)."""
        return self.local(expr, row) in self.spread

    def cached(self, kind: str, expr: ir.Expr, row: str, build: Callable[[], Built]) -> Built:
        """``build()`` once per (kind, expression up to its row's name): later calls get the same."""
        key = (kind, self.local(expr, row))
        if key not in self.builder.cache:
            self.builder.cache[key] = build()
        return self.builder.cache[key]  # type: ignore[return-value]

    def ratio(self, expr: ir.Expr, row: str) -> WidthRatio | None:
        """``expr``'s (m = S/c, u = 1/c) where it is a selector width S (:func:`.reductions.sum_ratio`)."""
        return sum_ratio(self, expr, row)

    # ------------------------------------------------------------------ entry points

    def feature(self, expr: ir.Expr, row: str) -> Feature:
        key = ("feature", self.local(expr, row))
        cached = self.builder.cache.get(key)
        if isinstance(cached, Feature):
            return cached
        local = _locality(expr, row)
        if local == "token":
            built = self._token_column(expr, row)
        elif local in ("position", "constant"):
            built = self._position_column(expr, row)
        else:
            rule = RULES.get(type(expr))
            if rule is None:
                raise self.refuse(expr, f"the token compiler has no construction for {type(expr).__name__}")
            try:
                built = rule(self, expr, row)
            except CompileError as refusal:
                raise located(refusal, expr) from None
            exact = self.values(expr)
            if exact is not None:  # both hold every value the expression takes: so does their meet
                known = exact if built.values is None else (exact & built.values) or exact
                built = Feature(built.form, known, built.stage, built.error)
            self.name(expr, row, built)
        self.builder.cache[key] = built
        return built

    def name(self, expr: ir.Expr, row: str, built: Feature) -> None:
        """Record that ``built`` holds ``expr`` at every row (``row`` its position), for the
        circuit map (:func:`named_expressions`); the first record of an expression stands."""
        self.builder.cache.setdefault(("named", self.local(expr, row)),
                                      ExpressionValue(expr, row, built.form, built.stage, built.error,
                                                      self.given.get(row, ())))

    def token(self, position: ir.Position, row: str) -> TokenFeature:
        key = ("token", self.local(position, row))
        cached = self.builder.cache.get(key)
        if isinstance(cached, TokenFeature):
            return cached
        built = fetch(self, position, row)
        self.builder.cache[key] = built
        return built

    def values(self, expr: ir.Expr) -> frozenset[Fraction] | None:
        return value_set(expr, self.domain)

    def refuse(self, expr: object, why: str) -> NoConstruction:
        text = describe(expr) if hasattr(expr, "__dataclass_fields__") else str(expr)
        return NoConstruction(f"cannot compile `{text}`: {why}")

    # ------------------------------------------------------------------ tables

    def _columns(self, expr: ir.Expr, row: str, x: torch.Tensor) -> tuple[float, ...]:
        evaluator = ReferenceEvaluator(x, last=self.builder.length, domain=self.domain)  # decided exactly
        value = evaluator.value(expr, (row,)).reshape(-1)  # (V,) or (T+1,)
        return tuple(float(v) for v in value.expand(x.shape[0] * x.shape[1]))

    def own_token_values(self, expr: ir.Expr, row: str) -> frozenset[float] | None:
        """The values ``expr`` takes over the vocabulary where it reads only the row's own token
        (evaluated exactly, token by token), else None."""
        return frozenset(self._each_token(expr, row)) if _locality(expr, row) == "token" else None

    def _each_token(self, expr: ir.Expr, row: str) -> tuple[float, ...]:
        vocabulary = self.builder.vocabulary
        numbers = vocabulary.values if vocabulary.values is not None else tuple(range(vocabulary.size))
        x = torch.tensor(numbers, dtype=torch.float64).reshape(-1, 1, 1)  # (V, 1, 1): each token alone
        return self._columns(expr, row, x)

    def _token_column(self, expr: ir.Expr, row: str) -> Feature:
        """A function of the own token: its column of the embedding. A 0/1 column with more ones
        than zeros is written as its complement c̄ = 1 − c (named ``tok:not …``) and read as
        1 − c̄: the same value, fewer nonzero weights."""
        column = self._each_token(expr, row)
        if len(set(column)) == 1:  # the same on every token ([x(t) < 1] over 1..10): a constant
            return constant_feature(_exact_value(column[0], self.values(expr)))
        name = "x" if isinstance(expr, ir.Token) else f"tok:{describe(renamed(expr, row, 't'))}"
        ones = sum(1 for value in column if value == 1.0)
        if all(value in (0.0, 1.0) for value in column) and 2 * ones > len(column) and name != "x":
            complement = self.builder.token_column(f"tok:not {name[4:]}", tuple(1.0 - v for v in column))
            return ffn.negation(Feature(LinearForm.of(complement), ffn.INDICATOR, 0))
        direction = self.builder.token_column(name, column)
        return Feature(LinearForm.of(direction), self.values(expr), 0)

    def _position_column(self, expr: ir.Expr, row: str) -> Feature:
        values = self.values(expr)
        if values is not None and len(values) == 1:
            return constant_feature(next(iter(values)))
        x = torch.zeros(1, self.builder.length + 1, 1, dtype=torch.float64)  # positions 1..T+1
        # undefined only at the readout row T+1 (past a table's keys, odd = {1: 1, …, T: 0}): no
        # program value lives there, and a weight is never NaN
        column = tuple(0.0 if math.isnan(v) else v for v in self._columns(expr, row, x))
        slope, intercept = column[1] - column[0], column[0] - (column[1] - column[0])
        if all(value == slope * p + intercept for p, value in enumerate(column, start=1)):
            # a·p + b (t − 1, len − t is not: len is no column): the position number, read affinely
            return Feature(LinearForm.of(self.builder.position_number(), slope).plus(LinearForm.const(intercept)),
                           values, 0)
        direction = self.builder.position_column(f"pos:{describe(renamed(expr, row, 't'))}", column)
        return Feature(LinearForm.of(direction), values, 0)

    # ------------------------------------------------------------------ tokens

    # ------------------------------------------------------------------ ranges

    # ------------------------------------------------------------------ reductions

def _exact_value(value: float, values: frozenset[Fraction] | None) -> Fraction:
    """The exact value among ``values`` whose float is ``value`` (else the float's own)."""
    return next((v for v in values or () if float(v) == value), decimal(value))


def _token_rule(lowering: TokenLowering, expr: ir.Token, row: str) -> Feature:
    token = lowering.token(expr.position, row)
    vocabulary = lowering.builder.vocabulary
    if vocabulary.values is None:
        raise lowering.refuse(expr, "a categorical token is not a number")
    form = LinearForm()
    for value, indicator in zip(vocabulary.values, token.onehot, strict=True):
        form = form.plus(indicator, value)
    return Feature(form, lowering.values(expr), token.stage, token.error * sum(abs(v) for v in vocabulary.values))


def _compare_rule(lowering: TokenLowering, expr: ir.Compare, row: str) -> Feature:
    text = describe(expr)
    if expr.left.type == ir.TOKEN or expr.right.type == ir.TOKEN:
        equal = _token_equality(lowering, expr.left, expr.right, row, text)
        return equal if expr.operator == "==" else ffn.negation(equal)
    difference = ir.Arithmetic("-", expr.left, expr.right, ir.SCALAR)
    z = lowering.feature(difference, row)
    return ffn.compare(lowering.builder, z, expr.operator, text)


def _token_equality(lowering: TokenLowering, left: ir.Expr, right: ir.Expr, row: str, text: str) -> Feature:
    """[a == b] of two categorical tokens: a literal picks one indicator; two tokens: Σ_v [a = v ∧ b = v]."""
    if isinstance(right, ir.TokenLiteral):
        left, right = right, left
    if isinstance(left, ir.TokenLiteral):
        token = lowering.token(right.position, row)  # type: ignore[union-attr]
        return Feature(token.onehot[left.index], frozenset({Fraction(0), Fraction(1)}), token.stage, token.error)
    a, b = lowering.token(left.position, row), lowering.token(right.position, row)  # type: ignore[union-attr]
    parts = []
    for u, v in zip(a.onehot, b.onehot, strict=True):
        fu = Feature(u, frozenset({Fraction(0), Fraction(1)}), a.stage, a.error)
        fv = Feature(v, frozenset({Fraction(0), Fraction(1)}), b.stage, b.error)
        parts.append((1.0, ffn.conjunction(lowering.builder, [fu, fv], text)))
    return ffn.linear(parts, frozenset({Fraction(0), Fraction(1)}))


def _chain(expr: ir.Expr, operator: str) -> list[ir.Expr]:
    if isinstance(expr, ir.Logical) and expr.operator == operator:
        return _chain(expr.left, operator) + _chain(expr.right, operator)
    return [expr]


def _logical_rule(lowering: TokenLowering, expr: ir.Logical, row: str) -> Feature:
    parts = [lowering.feature(part, row) for part in _chain(expr, expr.operator)]
    constants = [p.constant for p in parts if p.constant is not None]
    parts = [p for p in parts if p.constant is None]
    if expr.operator == "and":
        if any(c == 0 for c in constants):
            return constant_feature(Fraction(0))
        return ffn.conjunction(lowering.builder, parts, describe(expr)) if parts else constant_feature(Fraction(1))
    if any(c == 1 for c in constants):
        return constant_feature(Fraction(1))
    return ffn.disjunction(lowering.builder, parts, describe(expr)) if parts else constant_feature(Fraction(0))


def _arithmetic_rule(lowering: TokenLowering, expr: ir.Arithmetic, row: str) -> Feature:
    left, right = lowering.feature(expr.left, row), lowering.feature(expr.right, row)
    if expr.operator == "*":
        return ffn.product(lowering.builder, left, right, describe(expr))
    return ffn.linear([(1.0, left), (1.0 if expr.operator == "+" else -1.0, right)], None)


def _pointwise_rule(lowering: TokenLowering, expr: ir.Pointwise, row: str) -> Feature:
    arguments = [lowering.feature(a, row) for a in expr.arguments]
    values, text = lowering.values(expr), describe(expr)
    if expr.function == "relu":
        return ffn.rectified(lowering.builder, arguments[0], values, text)
    if expr.function == "abs":
        return ffn.absolute(lowering.builder, arguments[0], values, text)
    if expr.function in ("min", "max"):
        return ffn.extreme(lowering.builder, arguments[0], arguments[1], expr.function, values, text)
    raise lowering.refuse(expr, f"{expr.function} is not exact on finite values")


def _table_rule(lowering: TokenLowering, expr: ir.TableLookup, row: str) -> Feature:
    """A table (v4) at its arguments: of one categorical token, Σ_v f(v)·[x = v] over the token's
    indicators (no unit, exact); else the table on one number key by robust steps
    (``ffn.table``: exact), two arguments first combined into the key a·M + b, which M makes
    one-to-one on the pairs of values they can take."""
    table, text = expr.table, describe(expr)
    if table.arity == 1 and table.token_columns[0] and isinstance(expr.arguments[0], ir.Token):
        token = lowering.token(expr.arguments[0].position, row)
        outputs = [table.lookup((float(v),)) or 0.0 for v in range(len(token.onehot))]
        form = LinearForm()
        for value, indicator in zip(outputs, token.onehot, strict=True):
            form = form.plus(indicator, value)
        return Feature(form, lowering.values(expr), token.stage, token.error * sum(abs(v) for v in outputs))
    parts = [_table_argument(lowering, a, tokens, row) for a, tokens in zip(expr.arguments, table.token_columns,
                                                                            strict=True)]
    key = parts[0]
    decode: dict[Fraction, tuple[float, ...]] = {v: (float(v),) for v in key.values or ()}
    if len(parts) == 2:
        key, decode = _paired_key(parts[0], parts[1], text)
    return ffn.table(lowering.builder, key, lambda v: decimal(table.lookup(decode[v]) or 0.0), text)  # exact values


def _table_argument(lowering: TokenLowering, argument: ir.Expr, tokens: bool, row: str) -> Feature:
    """A table's argument as a number: a categorical token as its id Σ_v v·[x = v]; a token
    literal (a side of a comparison split on its values puts them in) is the constant id."""
    if not tokens or not isinstance(argument, ir.Token):
        return lowering.feature(argument, row)
    token = lowering.token(argument.position, row)
    form = LinearForm()
    for index, indicator in enumerate(token.onehot):
        form = form.plus(indicator, float(index))
    ids = frozenset(Fraction(i) for i in range(len(token.onehot)))
    return Feature(form, ids, token.stage, token.error * sum(range(len(token.onehot))))


def _paired_key(a: Feature, b: Feature, text: str) -> tuple[Feature, dict[Fraction, tuple[float, ...]]]:
    """The key a·M + b with M = (range of b + its smallest gap) / (a's smallest gap): distinct
    pairs of values give distinct keys; and the map back from a key to its pair.

    The table reads its arguments as floats, so the gaps are those between distinct floats of
    the values: two exact values one float apart (5·fl(1/5) and 1, a mean built as a sum times
    a written 1/n) are one key of the table, and their keys u·M + v differ by less than
    ulp(u)·M, with the same entry, so no step falls between them; a gap taken between them
    would make M, and a's error times M, some 10¹⁶ times larger."""
    if a.values is None or b.values is None:
        raise NoConstruction(f"{text}: a table's arguments must take finitely many values")
    scale = (max(b.values) - min(b.values) + _float_gap(b.values)) / _float_gap(a.values)
    decode: dict[Fraction, tuple[float, ...]] = {u * scale + v: (float(u), float(v))
                                                 for u in a.values for v in b.values}
    return ffn.linear([(float(scale), a), (1.0, b)], frozenset(decode)), decode


def _float_gap(values: frozenset[Fraction]) -> Fraction:
    """The smallest gap between two of ``values`` that are different floats (1 if none)."""
    floats = frozenset(Fraction(float(v)) for v in values)
    return smallest_gap(floats, floats) or Fraction(1)


def _position_number_rule(lowering: TokenLowering, expr: ir.PositionNumber, row: str) -> Feature:
    position = expr.position
    if isinstance(position, ir.RunLength):
        return ffn.linear([(1.0, length(lowering.builder))], None, float(position.offset))
    if isinstance(position, ir.ReflectedPosition):
        mirrored = lowering.feature(ir.PositionNumber(position.mirrored), row)
        terms = [(-1.0, mirrored)] + ([(1.0, length(lowering.builder))] if position.from_length else [])
        return ffn.linear(terms, None, float(position.offset))
    if isinstance(position, ir.ArgPosition):
        return arg_number(lowering, position, row)
    raise lowering.refuse(expr, f"the token compiler has no construction for {type(position).__name__} as a number")


def _bracket_rule(lowering: TokenLowering, expr: ir.Bracket, row: str) -> Feature:
    return lowering.feature(expr.condition, row)


def _not_rule(lowering: TokenLowering, expr: ir.Not, row: str) -> Feature:
    return ffn.negation(lowering.feature(expr.argument, row))


def _negate_rule(lowering: TokenLowering, expr: ir.Negate, row: str) -> Feature:
    return ffn.linear([(-1.0, lowering.feature(expr.argument, row))], None)


def _divide_rule(lowering: TokenLowering, expr: ir.Divide, row: str) -> Feature:
    return ffn.linear([(1.0 / expr.divisor, lowering.feature(expr.numerator, row))], None)


def _square_rule(lowering: TokenLowering, expr: ir.Square, row: str) -> Feature:
    return ffn.table(lowering.builder, lowering.feature(expr.argument, row), lambda v: v * v, describe(expr))


def _locality(expr: object, row: str) -> str | None:
    """``token`` / ``position`` / ``constant`` when ``expr`` reads only the row's own token /
    only its position / nothing; None when it needs heads or mixes the two."""
    found: set[str] = set()

    def visit(node: object) -> bool:
        if isinstance(node, ir.Token):
            position = node.position
            if isinstance(position, ir.PositionVariable) and position.name == row and position.offset == 0:
                found.add("token")
                return True
            return False
        if isinstance(node, ir.PositionNumber):
            position = node.position
            if isinstance(position, ir.PositionVariable) and position.name == row:
                found.add("position")
                return True
            return isinstance(position, ir.FixedPosition | ir.LastPosition)
        if isinstance(node, ir.Reduce | ir.ArgPosition | ir.RunLength | ir.ReflectedPosition | ir.PositionVariable):
            return False
        return all(visit(child) for child in ir.children(node))

    if not visit(expr) or len(found) > 1:
        return None
    return found.pop() if found else "constant"


def _literal_rule(lowering: TokenLowering, expr: ir.NumberLiteral | ir.Constant | ir.TokenLiteral, row: str) -> Feature:
    (value,) = lowering.values(expr) or (None,)
    if value is None:
        raise lowering.refuse(expr, "a constant without one value")
    return constant_feature(value)


#: The rule of each value node a token program can hold (vector operations cannot occur: a
#: token is one value; ``Presence`` is the gather route's). A sub-expression of the row's own
#: token or position alone never reaches its rule: it is a column (:func:`_locality`).
RULES: dict[type, Callable[[TokenLowering, Any, str], Feature]] = {
    ir.NumberLiteral: _literal_rule,
    ir.Constant: _literal_rule,
    ir.TokenLiteral: _literal_rule,
    ir.Token: _token_rule,
    ir.Compare: _compare_rule,
    ir.Logical: _logical_rule,
    ir.Not: _not_rule,
    ir.Bracket: _bracket_rule,
    ir.Arithmetic: _arithmetic_rule,
    ir.Negate: _negate_rule,
    ir.Divide: _divide_rule,
    ir.Square: _square_rule,
    ir.Pointwise: _pointwise_rule,
    ir.PositionNumber: _position_number_rule,
    ir.Reduce: reduce,
    ir.TableLookup: _table_rule,
}

__all__ = ["RULES", "TokenLowering"]
