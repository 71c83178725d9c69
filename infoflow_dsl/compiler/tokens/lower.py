"""The token lowering's expression walker: a typed token program -> features in a circuit.

``feature(expr, row)`` is the value of a scalar expression whose free position variable (if
any) is ``row``, computed at every row of the residual stream with ``row`` standing for that
row's position; ``token(position, row)`` is the token at a position, as V indicators. Values a
reduction reads at its keys are the same walk with the reduced variable as the row. Each node
class has one rule (:data:`RULES`); every rule builds from :mod:`.ffn` (units) and
:mod:`.heads` (attention). A sub-expression that reads only the row's own token, or only its
position, is not built at all: it is a column of the embedding table or of the positional code.

Reductions over one variable s (``sum``/``mean``/``min``/``max``) and ``x(argmin_<s> …)``:

- the range's conditions between s and the row (or a fixed position) are the head's structural
  mask; s ≤ len is no condition; other conditions on len multiply a sum's body as a bracket;
- comparisons of s with the row inside the body split the keys into classes
  (:func:`~.separate.key_classes`), one mask each;
- the body on a class is separated into Σₖ aₖ(row)·bₖ(s) (:func:`~.separate.separated_terms`):
  a mean is Σₖ aₖ·mean_s bₖ (one uniform head for all bₖ, then products), a sum is
  count(row)·mean (the count of the class's keys is an exact integer feature of the row's
  position and len, whose product with the mean costs ~3T units), a min/max or argmin/argmax is
  one sharp head on the score Σₖ aₖ·bₖ (argmin |e| is argmin e²; ties go to the smallest
  position by a tie-break −γ·s with γ below the score's gap over 2T).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import torch

from ...analysis.finite import FiniteDomain, value_set
from ...errors import CompileError
from ...language import typed as ir
from ...language.printer import describe
from ...reference.evaluate import ReferenceEvaluator
from ...transformer.masks import Condition
from ..circuit import LinearForm
from . import ffn
from .builder import Feature, TokenCircuitBuilder, TokenFeature, constant_feature
from .heads import length, retrieve, uniform_mean
from .separate import KeyClass, exclusive_indicators, key_classes, polynomial_terms, renamed, separated_terms

LOCAL = "@"  # the row's own variable in cache keys


class TokenLowering:
    """Builds the features of one token program on a :class:`TokenCircuitBuilder`."""

    def __init__(self, builder: TokenCircuitBuilder, domain: FiniteDomain) -> None:
        self.builder = builder
        self.domain = domain

    # ------------------------------------------------------------------ entry points

    def feature(self, expr: ir.Expr, row: str) -> Feature:
        key = ("feature", renamed(expr, row, LOCAL))
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
            built = rule(self, expr, row)
            exact = self.values(expr)
            if exact is not None:
                built = Feature(built.form, exact, built.stage, built.error)
        self.builder.cache[key] = built
        return built

    def token(self, position: ir.Position, row: str) -> TokenFeature:
        key = ("token", renamed(position, row, LOCAL))  # type: ignore[arg-type]
        cached = self.builder.cache.get(key)
        if isinstance(cached, TokenFeature):
            return cached
        built = self._fetch(position, row)
        self.builder.cache[key] = built
        return built

    def values(self, expr: ir.Expr) -> frozenset[Fraction] | None:
        return value_set(expr, self.domain)

    def refuse(self, expr: object, why: str) -> CompileError:
        text = describe(expr) if hasattr(expr, "__dataclass_fields__") else str(expr)
        return CompileError(f"cannot compile `{text}`: {why}")

    # ------------------------------------------------------------------ tables

    def _columns(self, expr: ir.Expr, row: str, x: torch.Tensor) -> tuple[float, ...]:
        evaluator = ReferenceEvaluator(x, last=self.builder.length)
        value = evaluator.value(expr, (row,)).reshape(-1)  # (V,) or (T+1,)
        return tuple(float(v) for v in value.expand(x.shape[0] * x.shape[1]))

    def _token_column(self, expr: ir.Expr, row: str) -> Feature:
        vocabulary = self.builder.vocabulary
        numbers = vocabulary.values if vocabulary.values is not None else tuple(range(vocabulary.size))
        x = torch.tensor(numbers, dtype=torch.float64).reshape(-1, 1, 1)  # (V, 1, 1): each token alone
        column = self._columns(expr, row, x)
        name = "x" if isinstance(expr, ir.Token) else f"tok:{describe(renamed(expr, row, 't'))}"
        direction = self.builder.token_column(name, column)
        return Feature(LinearForm.of(direction), self.values(expr), 0)

    def _position_column(self, expr: ir.Expr, row: str) -> Feature:
        values = self.values(expr)
        if values is not None and len(values) == 1:
            return constant_feature(next(iter(values)))
        x = torch.zeros(1, self.builder.length + 1, 1, dtype=torch.float64)  # positions 1..T+1
        column = self._columns(expr, row, x)
        direction = self.builder.position_column(f"pos:{describe(renamed(expr, row, 't'))}", column)
        return Feature(LinearForm.of(direction), values, 0)

    def onehot(self) -> TokenFeature:
        vocabulary = self.builder.vocabulary
        forms = tuple(LinearForm.of(self.builder.token_column(
            f"x={name}", tuple(1.0 if i == v else 0.0 for i in range(vocabulary.size))))
            for v, name in enumerate(vocabulary.names))
        return TokenFeature(forms, 0)

    # ------------------------------------------------------------------ tokens

    def _fetch(self, position: ir.Position, row: str) -> TokenFeature:
        own = self.onehot()
        if isinstance(position, ir.PositionVariable) and position.name == row:
            if position.offset == 0:
                return own
            return self._masked_fetch(own, ("key", "==", _side("query", position.offset)), position)
        if isinstance(position, ir.FixedPosition):
            return self._masked_fetch(own, ("key", "==", position.index), position)
        if isinstance(position, ir.LastPosition):
            return self._masked_fetch(own, ("key", "==", self.builder.length + position.offset), position)
        if isinstance(position, ir.RunLength | ir.ReflectedPosition):
            return self._scored_fetch(own, self.feature(ir.PositionNumber(position), row), position)
        if isinstance(position, ir.ArgPosition):
            return self._arg_fetch(own, position, row)
        raise self.refuse(position, "this position cannot be fetched")

    def _masked_fetch(self, own: TokenFeature, condition: Condition, position: object) -> TokenFeature:
        (outputs,) = [uniform_mean(self.builder, [Feature(f, frozenset({Fraction(0), Fraction(1)}), 0) for f in
                                                  own.onehot], [None] * len(own.onehot), (condition,),
                                   f"x({ir.position_label(position)}) by a mask", kind="position")]
        return TokenFeature(tuple(o.form for o in outputs), outputs[0].stage, outputs[0].error)

    def _scored_fetch(self, own: TokenFeature, place: Feature, position: object) -> TokenFeature:
        """score 2p·s − s²: the key at s = p wins by 1 (p within 1/(8T) of an integer)."""
        if place.error * 4 * self.builder.length >= 0.5:
            raise self.refuse(position, f"its position is computed within {place.error:.3g}, too coarse to fetch")
        s, s2 = self.builder.position_number(), self.builder.position_square()
        score = [(place.form, LinearForm.of(s, 2.0)), (LinearForm.const(1.0), LinearForm.of(s2, -1.0))]
        outputs, stage, tail = retrieve(self.builder, score=score, stage=place.stage, values=own.onehot, gap=0.5,
                                        mask=(), value_error=0.0,
                                        formula=f"x({ir.position_label(position)}) by score 2p·s − s²")
        return TokenFeature(tuple(LinearForm.of(o) for o in outputs), stage, tail)

    def _arg_fetch(self, own: TokenFeature, position: ir.ArgPosition, row: str) -> TokenFeature:
        """x(argmax_<s> B) (argmin: −B) by one sharp head with the tie-break −γ·s, γ = gap/(2T)."""
        body = position.body
        mask = self._structural(position.conditions, position.variable, row, position)
        sign = 1.0 if position.kind == "argmax" else -1.0
        gap = _gap(self.values(body))
        if gap is None:
            raise self.refuse(position, "its score does not take finitely many values")
        tie = gap / (2 * self.builder.length)  # −γ·s: the smallest position wins a tie
        distance = self._distance_score(body, position.variable, row, sign) if sign < 0 else None
        if distance is not None:
            score, stage, error = distance
        else:
            if isinstance(body, ir.Pointwise) and body.function == "abs":
                body = ir.Square(body.arguments[0])  # argmin |e| = argmin e² (the same winners)
                tie = _gap(self.values(body)) / (2 * self.builder.length)  # type: ignore[operator]
            score, stage, error = self._score(body, position.variable, row, sign, 0.4 * tie)
        if error >= 0.4 * tie:  # the winner still leads by tie − 2·error ≥ tie/5
            raise self.refuse(position, f"its score is computed within {error:.3g}, not below {0.4 * tie:.3g} "
                                        f"(0.4 of the tie-break step); use float64")
        score.append((LinearForm.const(-tie), LinearForm.of(self.builder.position_number())))
        outputs, out_stage, tail = retrieve(self.builder, score=score, stage=stage, values=own.onehot,
                                            gap=tie - 2 * error, mask=mask, value_error=0.0,
                                            formula=f"x({position.kind}_<{position.variable}> {describe(body)})")
        return TokenFeature(tuple(LinearForm.of(o) for o in outputs), out_stage, tail)

    def _distance_score(self, body: ir.Expr, key: str,
                        row: str, sign: float) -> tuple[list[tuple[LinearForm, LinearForm]], int, float] | None:
        """−|A(s) − B(t)| for finite A, B, by cuts: with the sorted union of their values c₀ < … < cₙ,
        |A − B| = Σₖ (cₖ − cₖ₋₁)·|[A ≥ cₖ] − [B ≥ cₖ]|, and |a − b| = a + b − 2ab for indicators, so
        −|A − B| = Σₖ Δₖ·2[A ≥ cₖ][B ≥ cₖ] − (A − c₀) + (a term of t alone, which moves no winner).
        Its factors are indicators: the score's rounding stays ~ϱ·T, not ϱ·T² as with (A − B)².
        None where the body is not such an |A − B|."""
        if not (isinstance(body, ir.Pointwise) and body.function == "abs"):
            return None
        terms = polynomial_terms(body.arguments[0], key, row)
        if terms is None:
            return None
        key_part = [(c, k) for c, q, k in terms if k is not None and q is None]
        query_part = [(c, q) for c, q, k in terms if k is None]
        if len(key_part) + len(query_part) != len(terms) or not key_part:
            return None
        a = ffn.linear([(c, self.feature(k, key)) for c, k in key_part], None)
        b = ffn.linear([(-c, self.feature(q, row)) for c, q in query_part if q is not None],
                       None, -sum(c for c, q in query_part if q is None))
        a_values = self.values(_signed_sum([(c, k) for c, k in key_part]))
        b_values = self.values(_signed_sum([(-c, q) for c, q in query_part if q is not None]))
        if a_values is None or b_values is None:
            return None
        offset = Fraction(-sum(c for c, q in query_part if q is None))
        a = Feature(a.form, a_values, a.stage, a.error)
        b = Feature(b.form, frozenset(v + offset for v in b_values), b.stage, b.error)
        cuts = sorted(a.values | b.values)  # type: ignore[operator]
        score: list[tuple[LinearForm, LinearForm]] = []
        stage, error = max(a.stage, b.stage), 0.0
        for low, high in itertools.pairwise(cuts):
            at_a, at_b = ffn.at_least(self.builder, a, high, "A"), ffn.at_least(self.builder, b, high, "B")
            spacing = float(high - low)  # key [A ≥ c], query Δ·(2[B ≥ c] − 1)
            score.append((at_b.form.scaled(2.0 * spacing).plus(LinearForm.const(-spacing)), at_a.form))
            stage = max(stage, at_a.stage, at_b.stage)
            error += spacing * (2 * at_b.error + at_a.error + 2 * at_a.error * at_b.error)
        return score, stage, error

    def _score(self, body: ir.Expr, key: str, row: str, sign: float,
               budget: float) -> tuple[list[tuple[LinearForm, LinearForm]], int, float]:
        """sign·body as Σ q(row)·k(key) (terms not reading the key dropped: they move no winner);
        the stage all factors are ready and the score's error. A factor whose error would spend
        more than its share of ``budget`` is re-quantised first (a table resets it to rounding)."""
        terms = separated_terms(body, key, row, self.domain)
        if terms is None:
            raise self.refuse(body, "the score is not a sum of products of per-position features")
        factors = [(c, self.feature(q, row) if q is not None else constant_feature(Fraction(1)), self.feature(k, key))
                   for c, q, k in terms if k is not None]
        share = budget / (2 * max(len(factors), 1))

        def exact_enough(f: Feature, other: Feature, coefficient: float) -> Feature:
            if abs(coefficient) * f.error * (other.magnitude + other.error) < share:
                return f
            return ffn.requantised(self.builder, f, describe(body))

        score, stage, error = [], 0, 0.0
        for coefficient, q, k in factors:
            q, k = exact_enough(q, k, coefficient), exact_enough(k, q, coefficient)
            score.append((q.form.scaled(sign * coefficient), k.form))
            stage = max(stage, q.stage, k.stage)
            error += abs(coefficient) * (q.error * k.magnitude + k.error * q.magnitude + q.error * k.error)
        return score, stage, error

    # ------------------------------------------------------------------ ranges

    def _structural(self, conditions: tuple[ir.PositionCondition, ...], key: str, row: str,
                    node: object) -> tuple[Condition, ...]:
        """The mask of a range whose conditions are all structural (else refused)."""
        mask, factors = self._range(conditions, key, row, node)
        if factors:
            raise self.refuse(node, "a condition on len in this range is not a structural mask (only a sum can "
                                    "take it as a bracket)")
        return mask

    def _range(self, conditions: tuple[ir.PositionCondition, ...], key: str, row: str,
               node: object) -> tuple[tuple[Condition, ...], list[ir.Expr]]:
        """(mask conditions, brackets a sum's body is multiplied by)."""
        mask: list[Condition] = []
        factors: list[ir.Expr] = []
        for condition in conditions:
            sides = [_mask_term(term, key, row, self.builder.length) for term in (condition.left, condition.right)]
            if any(side is None for side in sides) or "key" not in {_base(s) for s in sides}:
                if _always(condition, self.builder.length):
                    continue
                factors.append(ir.Compare(condition.operator, ir.PositionNumber(condition.left),
                                          ir.PositionNumber(condition.right)))
                continue
            if any(isinstance(s, str) and s.startswith("outer") for s in sides):
                raise self.refuse(node, "a range that compares with a position other than the row's")
            left, right = sides
            mask.append(_key_first((left, condition.operator, right)))  # type: ignore[arg-type]
        return tuple(mask), factors

    # ------------------------------------------------------------------ reductions

    def reduce(self, expr: ir.Reduce, row: str) -> Feature:
        if len(expr.variables) != 1:
            raise self.refuse(expr, "a reduction over several positions at once (nest one-variable reductions)")
        if expr.kind == "top":
            raise self.refuse(expr, "top(k) over tokens is not built yet")
        (key,) = expr.variables
        mask, factors = self._range(expr.conditions, key, row, expr)
        body = expr.body
        if factors and expr.kind != "sum":
            raise self.refuse(expr, "a condition on len in this range is not a structural mask (only a sum can "
                                    "take it as a bracket)")
        for factor in factors:
            body = ir.Arithmetic("*", ir.Bracket(factor), body, ir.SCALAR)  # type: ignore[arg-type]
        classes = key_classes(body, key, row)
        if expr.kind in ("min", "max"):
            if len(classes) > 1:
                raise self.refuse(expr, "a min/max whose body compares the two positions")
            return self._extreme(expr, body, key, row, mask)
        if expr.kind == "mean":
            if len(classes) > 1:
                raise self.refuse(expr, "a mean whose body compares the two positions (write it as a sum)")
            return self._class_mean(classes[0], key, row, mask, expr)
        parts = [(1.0, ffn.product(self.builder, self._count(mask + part.mask(), row),
                                   self._class_mean(part, key, row, mask + part.mask(), expr), describe(expr)))
                 if not _is_own(part) else (1.0, self._own_term(part, key, row, mask))
                 for part in classes]
        return ffn.linear(parts, self.values(expr))

    def _own_term(self, part: KeyClass, key: str, row: str, mask: tuple[Condition, ...]) -> Feature:
        """The class s = row: the body at s = row, where the range's mask admits the row itself."""
        if not all(_admits_self(c) for c in mask):
            return constant_feature(Fraction(0))
        return self.feature(renamed(part.body, key, row), row)

    def _class_mean(self, part: KeyClass, key: str, row: str, mask: tuple[Condition, ...], expr: ir.Reduce) -> Feature:
        terms = separated_terms(part.body, key, row, self.domain)
        if terms is None:
            raise self.refuse(expr, "its body is not a sum of products of per-position features")
        keyed = [(c, q, k) for c, q, k in terms]
        key_features = [self.feature(k, key) if k is not None else constant_feature(Fraction(1)) for _, _, k in keyed]
        if all(f.constant is not None for f in key_features):
            means = key_features  # mean of a constant: itself (where the range is not empty)
        else:
            values = [self.values(ir.Reduce("mean", (key,), (), k if k is not None else ir.NumberLiteral(1.0),
                                            ir.SCALAR)) for _, _, k in keyed]
            means = uniform_mean(self.builder, key_features, values, mask, f"mean over {describe(expr)}'s keys")
        parts = []
        for (coefficient, query_part, _), mean in zip(keyed, means, strict=True):
            q = self.feature(query_part, row) if query_part is not None else constant_feature(Fraction(1))
            parts.append((coefficient, ffn.product(self.builder, q, mean, describe(expr))))
        total = ffn.linear(parts, self.values(ir.Reduce("mean", (key,), (), part.body, ir.SCALAR)))
        if exclusive_indicators([q for _, q, _ in keyed]):  # one gate is open: the others give exactly 0
            return Feature(total.form, total.values, total.stage, max(abs(c) * f.error for c, f in parts))
        return total

    def _extreme(self, expr: ir.Reduce, body: ir.Expr, key: str, row: str, mask: tuple[Condition, ...]) -> Feature:
        """min/max by one sharp head whose values are the score's own key factors (the Gibbs mean of
        the body is then Σ q·E[k], products at the query)."""
        values = self.values(body)
        gap = _gap(values)
        if gap is None:
            return self.feature(renamed(body, key, row), row) if values and len(values) == 1 else _raise(
                self.refuse(expr, "its body does not take finitely many values"))
        terms = separated_terms(body, key, row, self.domain)
        if terms is None:
            raise self.refuse(expr, "its body is not a sum of products of per-position features")
        sign = 1.0 if expr.kind == "max" else -1.0
        score, stage, error = self._score(body, key, row, sign, gap / 4)
        if error >= gap / 4:
            raise self.refuse(expr, f"its body is computed within {error:.3g}, not below {gap / 4:.3g}")
        keyed = [(c, q, k) for c, q, k in terms if k is not None]
        key_features = [self.feature(k, key) for _, _, k in keyed]
        outputs, out_stage, tail = retrieve(self.builder, score=score, stage=stage,
                                            values=[f.form for f in key_features], gap=gap / 2, mask=mask,
                                            value_error=error, formula=describe(expr), kind="score retrieval")
        parts: list[tuple[float, Feature]] = []
        for (coefficient, query_part, k_expr), out, k in zip(keyed, outputs, key_features, strict=True):
            read = Feature(LinearForm.of(out), self.values(k_expr), out_stage,
                           k.error + tail * (k.magnitude + 1) * 2)  # type: ignore[arg-type]
            q = self.feature(query_part, row) if query_part is not None else constant_feature(Fraction(1))
            parts.append((coefficient, ffn.product(self.builder, q, read, describe(expr))))
        constant_terms = [(c, self.feature(q, row)) for c, q, k in terms if k is None and q is not None]
        return ffn.linear(parts + constant_terms, values)

    def _count(self, mask: tuple[Condition, ...], row: str) -> Feature:
        """#{s in 1..len : mask(s, row)}: an exact integer feature of the row's position and len."""
        return count_keys(self, mask, row)


def _signed_sum(parts: list[tuple[float, ir.Expr]]) -> ir.Expr:
    """Σ c·e as one expression (for its value set)."""
    total: ir.Expr | None = None
    for coefficient, expr in parts:
        term = expr if coefficient == 1.0 else ir.Arithmetic("*", ir.NumberLiteral(coefficient), expr, ir.SCALAR)
        total = term if total is None else ir.Arithmetic("+", total, term, ir.SCALAR)
    return total if total is not None else ir.NumberLiteral(0.0)


def _raise(error: Exception) -> Any:
    raise error


def _gap(values: frozenset[Fraction] | None) -> float | None:
    if values is None or len(values) < 2:
        return None
    ordered = sorted(values)
    return float(min(b - a for a, b in itertools.pairwise(ordered)))


def _side(side: str, offset: int) -> str:
    return f"{side}{offset:+d}" if offset else side


def _base(side: object) -> str:
    return side.rstrip("+-0123456789") if isinstance(side, str) else "fixed"


def _mask_term(term: ir.PositionTerm, key: str, row: str, length: int) -> str | int | None:
    """A range term as a mask side (None: it reads len or T, not structural)."""
    if isinstance(term, ir.PositionVariable):
        if term.name == key:
            return _side("key", term.offset)
        return _side("query" if term.name == row else "outer", term.offset)
    if isinstance(term, ir.FixedPosition):
        return term.index
    return None


def _always(condition: ir.PositionCondition, length: int) -> bool:
    """s ≤ len + c (c ≥ 0), s ≤ T + c (c ≥ 0), s < len + c (c ≥ 1) ...: true for every s in 1..len."""
    left, right, op = condition.left, condition.right, condition.operator
    if isinstance(left, ir.RunLength | ir.LastPosition):
        left, right = right, left
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
    if not isinstance(left, ir.PositionVariable) or left.offset != 0:
        return False
    if isinstance(right, ir.RunLength | ir.LastPosition):
        return (op == "<=" and right.offset >= 0) or (op == "<" and right.offset >= 1)
    return False


def _key_first(condition: tuple[str | int, str, str | int]) -> Condition:
    left, op, right = condition
    if isinstance(left, str) and left.startswith("key"):
        return condition
    flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}[op]
    return (right, flipped, left)


def _is_own(part: KeyClass) -> bool:
    return part.low == 0 and part.high == 0


def _admits_self(condition: Condition) -> bool:
    left, op, right = condition
    if right == "query" and left == "key":
        return op in ("<=", ">=", "==")
    if isinstance(right, str) and right.startswith("query"):
        offset = int(right[len("query"):])
        return {"<": 0 < offset, "<=": 0 <= offset, ">": 0 > offset, ">=": 0 >= offset, "==": offset == 0,
                "!=": offset != 0}[op]
    return False


from .counts import count_keys  # noqa: E402  (counts builds on this module's features)


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


def _position_number_rule(lowering: TokenLowering, expr: ir.PositionNumber, row: str) -> Feature:
    position = expr.position
    if isinstance(position, ir.RunLength):
        return ffn.linear([(1.0, length(lowering.builder))], None, float(position.offset))
    if isinstance(position, ir.ReflectedPosition):
        mirrored = lowering.feature(ir.PositionNumber(position.mirrored), row)
        terms = [(-1.0, mirrored)] + ([(1.0, length(lowering.builder))] if position.from_length else [])
        return ffn.linear(terms, None, float(position.offset))
    raise lowering.refuse(expr, "the position of an argmin/argmax as a number is not built yet")


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
    ir.Reduce: TokenLowering.reduce,
}

__all__ = ["RULES", "TokenLowering"]
