"""A fast path of the reference evaluator for reductions over pairs of positions.

The general path of :mod:`infoflow_dsl.oracle.evaluate` broadcasts a reduction's body over a
(B, T, T) grid, one elementwise operation at a time. For the pair bodies below the grid is one
batched matrix product instead, computed ``ROW_CHUNK`` rows of the first variable at a time so
that memory stays bounded (B × rows × T entries per chunk) and reduced chunk by chunk::

    <L(a), R(b)>           (inner product; bilinear forms: R = A @ x(b))   G = L Rᵀ
    L(a) * R(b)            (scalars)                                      G = L Rᵀ, n = 1
    ||L(a) ± R(b)||^2      (squared distance)                             G = |L|² + |R|² ± 2 L Rᵀ
    (L(a) ± R(b))^2        (scalars)                                      the same, n = 1

where ``L`` depends on one of the two bound variables only and ``R`` on the other (each may
be any expression of one variable: x(a), A @ x(a), x(a)[i], sums of them, reductions in them).
The body may add (or subtract) further terms that read one variable or none, f(a) + g(b) + c:
they are added to the rows and the columns of G (this is how ``max_<s,t> P + max_<s′,t′> Q``
parses: the second reduction is a constant term of the first's body). Reductions ``min``,
``max``, ``sum`` and ``mean`` of a scalar body, with any position conditions, that read no
outer position variable take this path; everything else (``top``, bodies of another form)
returns ``None`` and the caller uses the general path. A ``min`` or ``max`` without
position conditions over a long sequence that repeats its tokens (the domain's corners) reads
each side's distinct rows once (:mod:`infoflow_dsl.transformer.repeated_rows`: the same values). The
results agree with the general path to rounding (≈ 1e-15 relative: the same products,
summed in another order; tests/test_evaluate.py holds it to 1e-12 on every table program).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from ..language import typed as ir
from ..transformer.repeated_rows import distinct_rows

Tensor = torch.Tensor
#: entries of one (B, rows, T) chunk of the pair grid: 4 MiB in float64, which stays in cache
#: (min_pairwise at T = 4096: 69 ms an input against 133 ms with chunks of 2^22)
CHUNK_ELEMENTS = 1 << 19
KINDS = ("min", "max", "sum", "mean")


class PairEvaluator(Protocol):
    """What the fast path reads of the reference evaluator (``evaluate.ReferenceEvaluator``):
    the batch size B and sequence length T of its input, the value of a sub-expression with
    position variables bound, and the mask a reduction's position conditions keep."""

    @property
    def batch(self) -> int: ...
    @property
    def length(self) -> int: ...

    def value(self, expr: ir.Expr, scope: tuple[str, ...]) -> Tensor:
        """``expr``'s value: shape (B or 1, *scope dims, *value shape), float64."""
        ...

    def mask(self, conditions: tuple[ir.PositionCondition, ...], scope: tuple[str, ...]) -> Tensor:
        """Which tuples of the scope's positions the conditions keep: bool, shape (1, *scope dims)."""
        ...


def reduce_pairs(evaluator: PairEvaluator, expr: ir.Reduce, scope: tuple[str, ...]) -> Tensor | None:
    """``expr``'s value (B, 1 per scope variable) by matrix products, or None when it has no pair form."""
    if expr.kind not in KINDS or len(expr.variables) != 2 or expr.type.shape != ():
        return None
    if ir.free_variables(expr) & set(scope):  # depends on an outer variable: general path
        return None
    first, second = expr.variables
    terms = _signed_terms(expr.body, 1.0)
    pairs = [(sign, form) for sign, term in terms if (form := _pair_form(term, first, second)) is not None]
    others = [(sign, term) for sign, term in terms if _pair_form(term, first, second) is None]
    if len(pairs) != 1 or any(not ir.free_variables(term) <= {first} and not ir.free_variables(term) <= {second}
                              for _, term in others):
        return None
    sign, (kind, left, right) = pairs[0]
    lhs = _rows(evaluator, left, first)  # (B, T, n)
    rhs = _rows(evaluator, right, second)  # (B, T, n)
    extra = torch.zeros(2, evaluator.batch, evaluator.length, dtype=lhs.dtype, device=lhs.device)  # (2, B, T)
    for term_sign, term in others:  # the rows' and the columns' terms
        side = 0 if ir.free_variables(term) <= {first} else 1
        extra[side] += term_sign * _rows(evaluator, term, expr.variables[side])[..., 0]
    sides = (_Side(lhs, extra[0]), _Side(rhs, extra[1])) if others else (_Side(lhs, None), _Side(rhs, None))
    if expr.conditions:
        mask = evaluator.mask(expr.conditions, (first, second))  # (1, T, T)
    else:
        mask = None
        if expr.kind in ("min", "max"):  # a min or max over all pairs reads each distinct token once
            sides = _distinct_side(sides[0]), _distinct_side(sides[1])
    value = _reduce_chunks(expr.kind, kind, sign, *sides, mask)  # (B,)
    return value.reshape(evaluator.batch, *[1] * len(scope))


@dataclass(frozen=True)
class _Side:
    """One variable's side of a pair body: its rows (B, I, n) and its extra term (B, I) or None."""

    rows: Tensor
    offsets: Tensor | None


def _distinct_side(side: _Side) -> _Side:
    """The side's distinct (row, extra term) tuples (:func:`repeated_rows.distinct_rows`), the
    padding a repeat of a real tuple; the side itself when they are not few."""
    both = side.rows if side.offsets is None else torch.cat([side.rows, side.offsets[..., None]], dim=-1)
    distinct = distinct_rows(both)  # rows (B, U, n or n+1)
    if distinct is None:
        return side
    if side.offsets is None:
        return _Side(distinct.rows, None)
    return _Side(distinct.rows[..., :-1], distinct.rows[..., -1])


def _signed_terms(expr: ir.Expr, sign: float) -> list[tuple[float, ir.Expr]]:
    """``expr`` as a signed sum of terms, splitting scalar + and - and unary minus."""
    if isinstance(expr, ir.Arithmetic) and expr.operator in "+-" and expr.type.kind == "scalar":
        return [*_signed_terms(expr.left, sign), *_signed_terms(expr.right, sign if expr.operator == "+" else -sign)]
    if isinstance(expr, ir.Negate) and expr.type.kind == "scalar":
        return _signed_terms(expr.argument, -sign)
    return [(sign, expr)]


def _pair_form(body: ir.Expr, first: str, second: str) -> tuple[str, ir.Expr, ir.Expr] | None:
    """("product", L, R) for <L, R> or L * R; ("plus"/"minus", L, R) for ||L ± R||^2 or (L ± R)^2;
    with L reading ``first`` alone and R ``second`` alone (the sides swapped if need be)."""
    if isinstance(body, ir.Inner):
        form = "product", body.left, body.right
    elif isinstance(body, ir.Arithmetic) and body.operator == "*" and body.left.type.kind == "scalar" == \
            body.right.type.kind:
        form = "product", body.left, body.right
    elif isinstance(body, ir.Square):
        inside = body.argument.argument if isinstance(body.argument, ir.Norm) else body.argument
        if not (isinstance(inside, ir.Arithmetic) and inside.operator in "+-"):
            return None
        form = ("plus" if inside.operator == "+" else "minus"), inside.left, inside.right
    else:
        return None
    kind, left, right = form
    sides = ir.free_variables(left), ir.free_variables(right)
    if sides == ({first}, {second}):
        return kind, left, right
    if sides == ({second}, {first}):
        return kind, right, left  # every form is symmetric in its two sides
    return None


def _rows(evaluator: PairEvaluator, expr: ir.Expr, variable: str) -> Tensor:
    """``expr`` at every position of ``variable``: (B, T, n) (n = 1 for a scalar)."""
    value = evaluator.value(expr, (variable,))  # (B or 1, T or 1, *shape)
    if expr.type.kind == "scalar":
        value = value.unsqueeze(-1)
    return value.expand(evaluator.batch, evaluator.length, value.shape[-1])


def _reduce_chunks(reduction: str, kind: str, sign: float, left: _Side, right: _Side, mask: Tensor | None) -> Tensor:
    """Reduce sign · G[b, i, j] + a[b, i] + c[b, j] (the body at positions i, j) over the tuples
    ``mask`` keeps, in chunks of rows i: left rows (B, I, n) with extra terms a (B, I) or None
    (zero), right rows (B, J, n) with c, mask (1, I, J) or None (all kept) -> (B,).

    Every chunk is written into one buffer allocated once per call (``out=`` and in-place
    operations): a fresh 4 MiB grid per chunk was handed back to the kernel and mapped again by
    glibc's malloc, and its page faults cost more than the products (min_pairwise at T = 4096:
    21 ms an input inside a compile, 5 ms with the buffer). When the body is symmetric in its two
    positions (:func:`_symmetric`), a min or max reads the upper triangle of G only, block by
    block (columns j ≥ the chunk's first row): the same values, half the products."""
    lhs, rhs = left.rows, right.rows
    batch, length, _ = lhs.shape
    columns = rhs.shape[1]
    rows = max(1, CHUNK_ELEMENTS // max(batch * columns, 1))
    right_t = rhs.transpose(1, 2)  # (B, n, J)
    twice = -2.0 if kind == "minus" else 2.0
    norms = (lhs * lhs).sum(-1), (rhs * rhs).sum(-1)  # (B, I), (B, J), for squared distances
    if mask is not None:
        mask = mask.expand(1, length, columns)
    triangle = reduction in ("min", "max") and _symmetric(left, right, mask)
    fill = {"min": torch.inf, "max": -torch.inf}.get(reduction, 0.0)
    buffer = lhs.new_empty(batch * min(rows, length) * columns)  # one chunk's grid, reused
    partials = []
    for start in range(0, length, rows):
        stop, first = min(start + rows, length), start if triangle else 0  # rows start..stop, columns first..J
        grid = buffer[:batch * (stop - start) * (columns - first)].view(batch, stop - start, columns - first)
        torch.bmm(lhs[:, start:stop], right_t[:, :, first:], out=grid)  # (B, r, J - first)
        if kind != "product":
            grid.mul_(twice).add_(norms[0][:, start:stop, None]).add_(norms[1][:, None, first:])
        if sign != 1.0:
            grid.neg_()
        if left.offsets is not None and right.offsets is not None:
            grid.add_(left.offsets[:, start:stop, None]).add_(right.offsets[:, None, first:])
        if mask is not None:
            grid.masked_fill_(~mask[:, start:stop, first:], fill)  # (1, r, J - first) broadcast over B
        partials.append(_reduce(reduction, grid.flatten(1)))  # (B,)
    stacked = torch.stack(partials, dim=1)  # (B, chunks)
    if reduction in ("min", "max"):
        return _reduce(reduction, stacked)
    total = stacked.sum(dim=1)
    if reduction == "sum":
        return total
    count = mask.sum() if mask is not None else torch.tensor(length * columns)
    return total / count.to(total.dtype)


def _symmetric(left: _Side, right: _Side, mask: Tensor | None) -> bool:
    """Whether the body takes the same value at (i, j) and (j, i): both sides the same rows
    (``<x(s), x(t)>``, ``||x(s) - x(t)||^2``; every pair form is symmetric in its two sides), the
    rows' and the columns' extra terms equal, and the mask symmetric (none, ``s != t``). G = L Lᵀ
    is then symmetric up to the order in which a product's n terms are added."""
    return (torch.equal(left.rows, right.rows)
            and (left.offsets is None or (right.offsets is not None and torch.equal(left.offsets, right.offsets)))
            and (mask is None or torch.equal(mask, mask.transpose(1, 2))))


def _reduce(reduction: str, values: Tensor) -> Tensor:
    """min, max or sum over the last axis (sum also for mean, divided later)."""
    if reduction == "min":
        return values.amin(dim=-1)
    if reduction == "max":
        return values.amax(dim=-1)
    return values.sum(dim=-1)
