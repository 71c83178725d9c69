"""Reductions over one position s: their ranges as masks, their bodies per key class, and the
sum, mean, min and max built from them.

- the range's conditions between s and the row (or a fixed position) are the head's structural
  mask; s ≤ len is no condition; other conditions on len multiply a sum's body as a bracket;
- comparisons of s with the row inside the body split the keys into classes
  (:func:`~.separate.key_classes`), one mask each; the class s = t is the body at s = t itself;
- the body on a class is separated into Σₖ aₖ(row)·bₖ(s) (:func:`~.separate.separated_terms`):
  a mean is Σₖ aₖ·mean_s bₖ (one uniform head for all bₖ, then products; a sum of gates by the
  brackets of one finite split has one gate open, so its error is the largest gate's), a sum is
  count(row)·mean (:mod:`.counts`: an exact integer feature, whose product with the mean costs
  ~3T units), a min/max one sharp head on the score Σₖ aₖ·bₖ whose values are the score's own
  key factors (the Gibbs mean of the body is then Σₖ aₖ·E[bₖ]).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

from ...language import typed as ir
from ...language.printer import describe
from ...transformer.masks import MASK_OPS, Condition, term_side
from ..circuit import LinearForm
from . import ffn
from .builder import Built, Feature, constant_feature
from .context import LoweringContext
from .counts import count_keys
from .heads import retrieve, uniform_mean
from .rewrites import bracketed, nested, top_as_counts
from .scores import ScoreContext, score_terms, value_gap
from .separate import KeyClass, exclusive_indicators, key_classes, renamed, separated_terms
from .widths import WidthRatio, indicator_sum, width_ratio


class ReductionContext(ScoreContext, Protocol):
    """What a reduction reads of the lowering: its :class:`~.scores.ScoreContext`, the conditions
    given on the target's row, and the walker's record of what it built (a cache keyed by
    expression, the names of built expressions, the sums a reader asked to be stepped)."""

    @property
    def given(self) -> dict[str, tuple[ir.PositionCondition, ...]]:
        """{the target's row: its conditions} (a per-token target's ``t : t >= 2``)."""
        ...

    def cached(self, kind: str, expr: ir.Expr, row: str, build: Callable[[], Built]) -> Built:
        """``build()`` once per (kind, expression up to its row's name): later calls get the same."""
        ...

    def name(self, expr: ir.Expr, row: str, built: Feature) -> None:
        """Record that ``built`` holds ``expr`` at every row, for the circuit map."""
        ...

    def own_token_values(self, expr: ir.Expr, row: str) -> frozenset[float] | None:
        """The values ``expr`` takes over the vocabulary where it reads only the row's own token, else None."""
        ...

    def spreads(self, expr: ir.Expr, row: str) -> bool:
        """Whether a reader asked for ``expr``'s steps (a width built with each step in a direction of its own)."""
        ...


def structural(lowering: LoweringContext, conditions: tuple[ir.PositionCondition, ...], key: str, row: str,
                node: object) -> tuple[Condition, ...]:
    """The mask of a range whose conditions are all structural (else refused)."""
    mask, factors = range_masks(lowering, conditions, key, row, node)
    if factors:
        raise lowering.refuse(node, "a condition on len in this range is not a structural mask (only a sum can "
                                "take it as a bracket)")
    return mask


def range_masks(lowering: LoweringContext, conditions: tuple[ir.PositionCondition, ...], key: str, row: str,
           node: object) -> tuple[tuple[Condition, ...], list[ir.PositionCondition]]:
    """(mask conditions, conditions a sum's body is multiplied by as brackets)."""
    mask: list[Condition] = []
    factors: list[ir.PositionCondition] = []
    for condition in conditions:
        terms = (condition.left, condition.right)
        if all(_names(term, key) for term in terms):  # s + a op s + b: a op b, the same for every key
            if not MASK_OPS[condition.operator](terms[0].offset, terms[1].offset):  # type: ignore[union-attr]
                raise lowering.refuse(node, "a range whose condition holds for no key")
            continue
        if not all(_structural(term) for term in terms) or not any(_names(term, key) for term in terms):
            if _always(condition, lowering.builder.length):
                continue
            factors.append(condition)
            continue
        if any(isinstance(term, ir.PositionVariable) and term.name not in (key, row) for term in terms):
            raise lowering.refuse(node, "a range that compares with a position other than the row's")
        left, right = (term_side(term, key) for term in terms)  # the one mask writer: key, query, a literal
        mask.append(_key_first((left, condition.operator, right)))
    return tuple(mask), factors


def reduce(lowering: ReductionContext, expr: ir.Reduce, row: str) -> Feature:
    if expr.kind == "top":  # counts, over one position or several
        return lowering.feature(top_as_counts(expr, lowering.values(expr.body)), row)
    if len(expr.variables) != 1:
        return lowering.feature(nested(expr, lowering.builder.length, row, lowering.given.get(row, ())), row)
    (key,) = expr.variables
    mask, factors = range_masks(lowering, expr.conditions, key, row, expr)
    body = expr.body
    if factors and expr.kind != "sum":
        raise lowering.refuse(expr, "a condition on len in this range is not a structural mask (only a sum can "
                                "take it as a bracket)")
    body = bracketed(body, factors)
    classes = key_classes(body, key, row)
    if expr.kind in ("min", "max"):
        if len(classes) > 1:
            raise lowering.refuse(expr, "a min/max whose body compares the two positions")
        return extreme(lowering, expr, body, key, row, mask)
    if expr.kind == "mean":
        if len(classes) > 1:
            raise lowering.refuse(expr, "a mean whose body compares the two positions (write it as a sum)")
        return class_mean(lowering, classes[0], key, row, mask, expr)
    signed = [term for part in classes for term in _upper_bounded(lowering, part, mask)]
    parts = None if len(signed) == len(classes) else lowering.builder.tried(
        lambda: _class_sums(lowering, signed, key, row, mask, expr))  # widths, where their steps certify
    if parts is None:
        parts = _class_sums(lowering, [(1.0, part) for part in classes], key, row, mask, expr)
    values = lowering.values(expr)
    if values is not None and len(parts) == 1 and parts[0][1].values is not None:  # the class's own, if fewer
        values = (values & parts[0][1].values) or values
    return ffn.linear(parts, values)


def _class_sums(lowering: ReductionContext, signed: list[tuple[float, KeyClass]], key: str, row: str,
                mask: tuple[Condition, ...], expr: ir.Reduce) -> list[tuple[float, Feature]]:
    """± each class's sum (the class s = t: its body there)."""
    return [(sign, class_sum(lowering, part, key, row, mask, expr, whole=len(signed) == 1))
            if not _is_own(part) else (sign, own_term(lowering, part, key, row, mask))
            for sign, part in signed]


def _upper_bounded(lowering: ReductionContext, part: KeyClass,
                   mask: tuple[Condition, ...]) -> list[tuple[float, KeyClass]]:
    """A class of keys bounded from below only (s ≥ t + k) with a 0/1 body, in a range with no mask of
    its own, as Σ_{s ≥ t+k} b = Σ_s b − Σ_{s ≤ t+k−1} b: two classes bounded from above (or not at
    all), whose key 1 is in every nonempty range, so each sum is a width (:mod:`.widths`: steps on
    its mean and 1/count) rather than count × mean (a ``len`` table and a product). Any other
    class as it is."""
    values = lowering.values(part.body)
    if mask or part.high is not None or part.low is None or values is None or not values <= {0, 1}:
        return [(1.0, part)]
    return [(1.0, KeyClass(None, None, part.body)), (-1.0, KeyClass(None, part.low - 1, part.body))]


def class_sum(lowering: ReductionContext, part: KeyClass, key: str, row: str, mask: tuple[Condition, ...],
              expr: ir.Reduce, whole: bool) -> Feature:
    """The sum of the body over one key class's keys: a 0/1 body by steps on its mean and 1/count
    (:mod:`.widths`), else count × mean. ``whole``: the class is the whole sum (its values are the sum's)."""
    keys = mask + part.mask()
    spread = whole and lowering.spreads(expr, row)

    def width() -> Feature | None:
        ratio = class_ratio(lowering, part, key, row, keys, expr, whole)
        return None if ratio is None else indicator_sum(ratio, lowering, describe(expr), spread=spread)

    built = lowering.builder.tried(width)  # None where it does not apply, or its steps do not certify (float32, long T)
    if built is not None:
        return built
    return ffn.product(lowering.builder, count_keys(lowering, keys, row),
                       class_mean(lowering, part, key, row, keys, expr), describe(expr))


def class_ratio(lowering: ReductionContext, part: KeyClass, key: str, row: str, keys: tuple[Condition, ...],
                expr: ir.Reduce, whole: bool) -> WidthRatio | None:
    """One key class's sum as a width's (m, u) (:func:`.widths.width_ratio`), or None. The whole
    sum's is built once: a reader of (m, u) (:func:`sum_ratio`) and a reader of S share its head."""
    values = lowering.values(expr) if whole and not keys else None  # a range never empty: the sum's own values
    own = lowering.own_token_values(renamed(part.body, key, row), row)  # the body where s = t, token by token
    if values is not None and own in ({1.0}, {0.0}):  # every key, and the query's own key counts 1 (or 0) always
        values = frozenset(v for v in values if (v >= 1 if own == {1.0} else v <= lowering.builder.length - 1))

    def build() -> WidthRatio | None:
        ratio = width_ratio(lowering, part, key, row, keys, values, describe(expr))
        if ratio is not None and whole and part.body == expr.body and not part.mask():
            mean = ir.Reduce("mean", expr.variables, expr.conditions, expr.body, ir.SCALAR)
            lowering.name(mean, row, ratio.mean)  # m = S/c: the body's mean over the range (0 where it is empty)
        return ratio

    return lowering.cached("ratio", expr, row, build) if whole else build()


def sum_ratio(lowering: ReductionContext, expr: ir.Expr, row: str) -> WidthRatio | None:
    """``expr``'s (m, u) where it is a sum of one key class that :func:`reduce` builds as a width
    (the class is the whole sum), else None."""
    if not isinstance(expr, ir.Reduce) or expr.kind != "sum" or len(expr.variables) != 1:
        return None
    (key,) = expr.variables
    mask, factors = range_masks(lowering, expr.conditions, key, row, expr)
    classes = key_classes(expr.body, key, row)
    if factors or len(classes) != 1 or _is_own(classes[0]) or len(_upper_bounded(lowering, classes[0], mask)) != 1:
        return None
    return class_ratio(lowering, classes[0], key, row, mask + classes[0].mask(), expr, whole=True)


def own_term(lowering: ReductionContext, part: KeyClass, key: str, row: str, mask: tuple[Condition, ...]) -> Feature:
    """The class s = row: the body at s = row, where the range's mask admits the row itlowering."""
    if not all(_admits_self(c) for c in mask):
        return constant_feature(Fraction(0))
    return lowering.feature(renamed(part.body, key, row), row)


def class_mean(lowering: ReductionContext, part: KeyClass, key: str, row: str, mask: tuple[Condition, ...],
               expr: ir.Reduce) -> Feature:
    """The mean of the body over one key class's keys: Σₖ aₖ(row)·mean bₖ."""
    terms = separated_terms(part.body, key, row, lowering.domain)
    if terms is None:
        raise lowering.refuse(expr, "its body is not a sum of products of per-position features")
    keyed = [(c, q, k) for c, q, k in terms]
    key_features = [lowering.feature(k, key) if k is not None else constant_feature(Fraction(1)) for _, _, k in keyed]
    if all(f.constant is not None for f in key_features):
        means = key_features  # mean of a constant: itself (where the range is not empty)
    else:
        values = [lowering.values(ir.Reduce("mean", (key,), (), k if k is not None else ir.NumberLiteral(1.0),
                                        ir.SCALAR)) for _, _, k in keyed]
        means = uniform_mean(lowering.builder, key_features, values, mask, f"mean over {describe(expr)}'s keys")
    parts = []
    for (coefficient, query_part, _), mean in zip(keyed, means, strict=True):
        q = lowering.feature(query_part, row) if query_part is not None else constant_feature(Fraction(1))
        parts.append((float(coefficient), ffn.product(lowering.builder, q, mean, describe(expr))))
    total = ffn.linear(parts, lowering.values(ir.Reduce("mean", (key,), (), part.body, ir.SCALAR)))
    if exclusive_indicators([q for _, q, _ in keyed]):  # one gate is open: the others give exactly 0
        return Feature(total.form, total.values, total.stage, max(abs(c) * f.error for c, f in parts))
    return total


def extreme(lowering: ReductionContext, expr: ir.Reduce, body: ir.Expr, key: str, row: str,
            mask: tuple[Condition, ...]) -> Feature:
    """min/max by one sharp head whose values are the score's own key factors (the Gibbs mean of
    the body is then Σ q·E[k], products at the query). Keys that tie for the best score share
    the weight, so E[k] is the mean of k over the winners: its values are a mean's over some
    keys (1/3 of [x(s) = v] where one of three winners has v), not k's own: a product with it cuts
    the query's factor and gates E[k] (``ffn.scaled_by``), never the other way round (a factor k
    in {0, 1} is no indicator once averaged)."""
    values = lowering.values(body)
    gap = value_gap(values)
    if gap is None:
        if values and len(values) == 1:  # a constant body: its one value
            return lowering.feature(renamed(body, key, row), row)
        raise lowering.refuse(expr, "its body does not take finitely many values")
    terms = separated_terms(body, key, row, lowering.domain)
    if terms is None:
        raise lowering.refuse(expr, "its body is not a sum of products of per-position features")
    sign = 1.0 if expr.kind == "max" else -1.0
    score, stage, error = score_terms(lowering, body, key, row, sign, gap / 4)
    if error >= gap / 4:
        raise lowering.refuse(expr, f"its body is computed within {error:.3g}, not below {gap / 4:.3g}")
    keyed = [(c, q, k) for c, q, k in terms if k is not None]
    key_features = [lowering.feature(k, key) for _, _, k in keyed]
    outputs, out_stage, tail = retrieve(lowering.builder, score=score, stage=stage,
                                        values=[f.form for f in key_features], gap=gap / 2, mask=mask,
                                        value_error=error, formula=describe(expr), kind="score retrieval",
                                        reads=key)
    parts: list[tuple[float, Feature]] = []
    for (coefficient, query_part, k_expr), out, k in zip(keyed, outputs, key_features, strict=True):
        read = Feature(LinearForm.of(out), lowering.values(k_expr), out_stage,
                       k.error + tail * (k.magnitude + 1) * 2)  # within its values' hull, not on them
        q = lowering.feature(query_part, row) if query_part is not None else constant_feature(Fraction(1))
        parts.append((float(coefficient), ffn.scaled_by(lowering.builder, q, read, describe(expr))))
    constant_terms = [(float(c), lowering.feature(q, row)) for c, q, k in terms if k is None and q is not None]
    return ffn.linear(parts + constant_terms, values)



def _structural(term: ir.PositionTerm) -> bool:
    """A term a mask can read: a position variable or a literal position (not len, not T)."""
    return isinstance(term, ir.PositionVariable | ir.FixedPosition)


def _names(term: ir.PositionTerm, key: str) -> bool:
    return isinstance(term, ir.PositionVariable) and term.name == key


def _always(condition: ir.PositionCondition, length: int) -> bool:
    """s ≤ len + c (c ≥ 0), s ≤ T + c (c ≥ 0), s < len + c (c ≥ 1) ...: true for every s in 1..len."""
    left, right, op = condition.left, condition.right, condition.operator
    if isinstance(left, ir.RunLength | ir.LastPosition):
        left, right = right, left
        op = ir.FLIPPED[op]
    if not isinstance(left, ir.PositionVariable) or left.offset != 0:
        return False
    if isinstance(right, ir.RunLength | ir.LastPosition):
        return (op == "<=" and right.offset >= 0) or (op == "<" and right.offset >= 1)
    return False


def _key_first(condition: tuple[str | int, ir.ComparisonOperator, str | int]) -> Condition:
    left, op, right = condition
    if isinstance(left, str) and left.startswith("key"):
        return condition
    return (right, ir.FLIPPED[op], left)


def _is_own(part: KeyClass) -> bool:
    return part.low == 0 and part.high == 0


def _admits_self(condition: Condition) -> bool:
    left, op, right = condition
    if left != "key" or not (isinstance(right, str) and right.startswith("query")):
        return False
    return bool(MASK_OPS[op](0, int(right[len("query"):] or 0)))  # s = t: 0 op the offset
