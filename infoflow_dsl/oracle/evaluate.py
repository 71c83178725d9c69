"""The reference evaluator: the exact value of a checked program, in float64, batched.

This is the oracle every later stage is tested against. A value inside the target is held
as a tensor of shape ``(B, *scope, *value_shape)``: one axis per position variable bound at
that point (size T where the value depends on it, 1 where it does not, so broadcasting does
the bookkeeping), then the value's own shape (``()`` scalar, ``(n,)`` vector). A reduction
appends axes for its variables, evaluates its body, masks the tuples its conditions exclude,
and reduces those axes away. No Python loop runs over the batch or over positions.

Ties in argmin/argmax go to the smallest position; ``top(k)`` is the k-th largest value
counted with multiplicity (top(2) of 3, 3, 1 is 3).

A program over a token vocabulary reads token ids (B, T') for any T' in 1..T
(:func:`evaluate_tokens`): its batch holds each token's value (its number, or its id for a
categorical vocabulary) as a (B, T', 1) tensor, ``len`` is T' and ``T`` stays the compiled
length. A bracket's comparisons are exact on these values; a token output is the id of the
token at the retrieved position.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from ..language import typed as ir
from ..language.check import check
from ..language.functions import POINTWISE
from ..language.load import program_argument
from ..language.value_sets import FiniteDomain, finite_domain
from .exact import decided, looked_up
from .fast_pairs import reduce_pairs
from .tokens import UNDEFINED_ID, check_ids, token_values

if TYPE_CHECKING:
    from ..language.load import ProgramSource

Tensor = torch.Tensor


def constant(values: Any, dtype: torch.dtype | None, device: torch.device) -> Tensor:
    """A program's constant (a number, a vector, a matrix, a position) as a tensor on ``device``.
    Off the CPU it is copied there once and cloned on the device after that: a copy from the host
    waits for the device to finish its queued work, which the trainer's step must not (its
    targets are evaluated on the device every step). The same values either way."""
    if device.type == "cpu":
        return torch.tensor(values, dtype=dtype, device=device)
    return _held(values, dtype, device).clone()


@lru_cache(maxsize=256)
def _held(values: Any, dtype: torch.dtype | None, device: torch.device) -> Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


class ReferenceEvaluator:
    """Evaluates expressions of one program on one batch ``x`` of shape (B, T, d).

    ``value`` dispatches on the node's class through ``value_rules`` (:data:`VALUE_RULES`; a
    subclass that evaluates more node classes extends the table).
    """

    value_rules: ClassVar[dict[type, Callable[..., Tensor]]]

    def __init__(self, x: Tensor, last: int | None = None, domain: FiniteDomain | None = None,
                 path: str = "<string>") -> None:
        self.x = x  # (B, T, d); a token program's values (B, T', 1)
        self.domain = domain  # a token program's: comparisons decided on exact values (oracle/exact.py)
        self.path = path
        self.batch, self.length, self.dimension = x.shape
        self.last = self.length if last is None else last  # what T means: a token program's compiled length
        self.ids: Tensor | None = None  # a token program's ids (B, T'), for token outputs
        self.margins: list[Tensor] = []  # per argmin/argmax evaluated: best − runner-up score, (B, *scope dims)

    # ------------------------------------------------------------------ positions

    def _axis(self, scope: tuple[str, ...], name: str) -> Tensor:
        """0-based positions along ``name``'s axis: shape (1, *[1 or T per scope variable])."""
        shape = [1] * (1 + len(scope))
        shape[1 + scope.index(name)] = self.length
        return torch.arange(self.length, device=self.x.device).reshape(shape)

    def _scalar_position(self, index: int, scope: tuple[str, ...]) -> Tensor:
        return constant(index, None, self.x.device).reshape([1] * (1 + len(scope)))

    def position(self, expr: ir.Expr, scope: tuple[str, ...]) -> Tensor:
        """0-based positions, shape (B or 1, *scope dims), int64."""
        return POSITION_RULES[type(expr)](self, expr, scope)

    def _PositionVariable(self, expr: ir.PositionVariable, scope: tuple[str, ...]) -> Tensor:
        return self._axis(scope, expr.name) + expr.offset

    def _FixedPosition(self, expr: ir.FixedPosition, scope: tuple[str, ...]) -> Tensor:
        return self._scalar_position(expr.index - 1, scope)

    def _LastPosition(self, expr: ir.LastPosition, scope: tuple[str, ...]) -> Tensor:
        return self._scalar_position(self.last - 1 + expr.offset, scope)

    def _RunLength(self, expr: ir.RunLength, scope: tuple[str, ...]) -> Tensor:
        return self._scalar_position(self.length - 1 + expr.offset, scope)

    def _ReflectedPosition(self, expr: ir.ReflectedPosition, scope: tuple[str, ...]) -> Tensor:
        """(len or 0) + offset − v, 1-based: with v's 0-based position p, 0-based base + offset − p − 2."""
        base = self.length if expr.from_length else 0
        return base + expr.offset - 2 - self.position(expr.mirrored, scope)

    def _ArgPosition(self, expr: ir.ArgPosition, scope: tuple[str, ...]) -> Tensor:
        inner = (*scope, expr.variable)
        scores = self._expand_new_axes(self.value(expr.body, inner), len(scope), 1)  # (B, *dims, T)
        mask = self.mask(expr.conditions, inner)  # (1, *dims, T)
        scores = decided((expr.body,), (scores,), self.domain, self.path)[0].to(torch.float64)  # rationals' ties
        signed = scores if expr.kind == "argmax" else -scores
        ranked = torch.where(mask, signed, -torch.inf)  # (B, *dims, T), best = largest
        if self.length > 1:
            top = ranked.topk(2, dim=-1).values  # (B, *dims, 2)
            gap = (top[..., 0] - top[..., 1]).nan_to_num(nan=torch.inf)
            self.margins.append(gap.expand(self.batch, *gap.shape[1:]))
        return ranked.argmax(dim=-1)

    def mask(self, conditions: tuple[ir.PositionCondition, ...], scope: tuple[str, ...]) -> Tensor:
        """Which tuples the conditions keep: bool, shape (1, *scope dims)."""
        keep = torch.ones([1] * (1 + len(scope)), dtype=torch.bool, device=self.x.device)
        for condition in conditions:
            left, right = self.position(condition.left, scope), self.position(condition.right, scope)
            keep = keep & _COMPARE[condition.operator](left, right)
        return keep

    # ------------------------------------------------------------------ values

    def value(self, expr: ir.Expr, scope: tuple[str, ...]) -> Tensor:
        """The value of ``expr``: shape (B or 1, *scope dims, *value shape), float64."""
        rule = self.value_rules.get(type(expr))
        if rule is None:
            raise TypeError(f"the reference evaluator has no rule for {type(expr).__name__}")
        return rule(self, expr, scope)

    def _NumberLiteral(self, expr: ir.NumberLiteral, scope: tuple[str, ...]) -> Tensor:
        return constant(expr.value, torch.float64, self.x.device).reshape([1] * (1 + len(scope)))

    def _Constant(self, expr: ir.Constant, scope: tuple[str, ...]) -> Tensor:
        values = constant(expr.values, torch.float64, self.x.device)
        return values.reshape([1] * (1 + len(scope)) + list(expr.type.shape))

    def _Token(self, expr: ir.Token, scope: tuple[str, ...]) -> Tensor:
        if isinstance(expr.position, ir.PositionVariable) and not expr.position.offset:  # a view, no gather
            shape = [self.batch] + [1] * len(scope) + [self.dimension]
            shape[1 + scope.index(expr.position.name)] = self.length
            return _token_value(self.x.reshape(shape), expr)
        # an offset may point outside 1..T only where a condition excludes the tuple (the checker
        # proved it): clamp so the gather is valid; the mask discards those values
        positions = self.position(expr.position, scope).clamp(0, self.length - 1)  # (B or 1, *dims)
        dims = positions.shape[1:]
        flat = positions.expand(self.batch, *dims).reshape(self.batch, -1, 1)  # (B, N, 1)
        gathered = torch.gather(self.x, 1, flat.expand(-1, -1, self.dimension))  # (B, N, d)
        return _token_value(gathered.reshape(self.batch, *dims, self.dimension), expr)

    def _TokenLiteral(self, expr: ir.TokenLiteral, scope: tuple[str, ...]) -> Tensor:
        value = constant(float(expr.index), torch.float64, self.x.device)
        return value.reshape([1] * (1 + len(scope)))

    def _PositionNumber(self, expr: ir.PositionNumber, scope: tuple[str, ...]) -> Tensor:
        return (self.position(expr.position, scope) + 1).to(torch.float64)

    def _Compare(self, expr: ir.Compare, scope: tuple[str, ...]) -> Tensor:
        operands = decided((expr.left, expr.right), (self.value(expr.left, scope), self.value(expr.right, scope)),
                           self.domain, self.path)
        return _COMPARE[expr.operator](*operands)

    def _Logical(self, expr: ir.Logical, scope: tuple[str, ...]) -> Tensor:
        left, right = self.value(expr.left, scope), self.value(expr.right, scope)
        return left & right if expr.operator == "and" else left | right

    def _Not(self, expr: ir.Not, scope: tuple[str, ...]) -> Tensor:
        return ~self.value(expr.argument, scope)

    def _Bracket(self, expr: ir.Bracket, scope: tuple[str, ...]) -> Tensor:
        return self.value(expr.condition, scope).to(torch.float64)

    def _Component(self, expr: ir.Component, scope: tuple[str, ...]) -> Tensor:
        return self.value(expr.vector, scope)[..., expr.index - 1]

    def _Inner(self, expr: ir.Inner, scope: tuple[str, ...]) -> Tensor:
        # a broadcasting contraction: no (B, T, T, n) product is materialised
        return torch.einsum("...i,...i->...", self.value(expr.left, scope), self.value(expr.right, scope))

    def _Norm(self, expr: ir.Norm, scope: tuple[str, ...]) -> Tensor:
        return torch.linalg.vector_norm(self.value(expr.argument, scope), dim=-1)

    def _Square(self, expr: ir.Square, scope: tuple[str, ...]) -> Tensor:
        value = self.value(expr.argument, scope)
        return value * value

    def _Pointwise(self, expr: ir.Pointwise, scope: tuple[str, ...]) -> Tensor:
        return POINTWISE[expr.function].apply(*(self.value(a, scope) for a in expr.arguments))

    def _TableLookup(self, expr: ir.TableLookup, scope: tuple[str, ...]) -> Tensor:
        """The table's value at each argument tuple (:func:`.exact.looked_up`)."""
        arguments = torch.broadcast_tensors(*(self.value(a, scope).to(torch.float64) for a in expr.arguments))
        return looked_up(expr, arguments, self.domain, self.path)

    def _Arithmetic(self, expr: ir.Arithmetic, scope: tuple[str, ...]) -> Tensor:
        left, right = self.value(expr.left, scope), self.value(expr.right, scope)
        if expr.operator == "*":
            left, right = _align(left, right, expr.left.type), _align(right, left, expr.right.type)
            return left * right
        return left + right if expr.operator == "+" else left - right

    def _Negate(self, expr: ir.Negate, scope: tuple[str, ...]) -> Tensor:
        return -self.value(expr.argument, scope)

    def _Divide(self, expr: ir.Divide, scope: tuple[str, ...]) -> Tensor:
        return self.value(expr.numerator, scope) / expr.divisor

    def _MatVec(self, expr: ir.MatVec, scope: tuple[str, ...]) -> Tensor:
        matrix = constant(expr.matrix.values, torch.float64, self.x.device)
        matrix = matrix.reshape(expr.matrix.type.shape)  # (m, n)
        return self.value(expr.vector, scope) @ matrix.T  # (..., n) @ (n, m) -> (..., m)

    def _Reduce(self, expr: ir.Reduce, scope: tuple[str, ...]) -> Tensor:
        fast = reduce_pairs(self, expr, scope)  # pair bodies by matrix products (fast_pairs.py), else None
        if fast is not None:
            return fast
        inner = (*scope, *expr.variables)
        count = len(expr.variables)
        value_rank = len(expr.type.shape)
        body = self._expand_new_axes(self.value(expr.body, inner), len(scope), count, value_rank)
        mask = self.mask(expr.conditions, inner)  # (1, *dims)
        mask = mask.reshape(mask.shape + (1,) * value_rank)
        axes = tuple(range(1 + len(scope), 1 + len(scope) + count))
        if expr.kind == "min":
            return torch.where(mask, body, torch.inf).amin(dim=axes)
        if expr.kind == "max":
            return torch.where(mask, body, -torch.inf).amax(dim=axes)
        total = torch.where(mask, body, 0.0).sum(dim=axes)
        if expr.kind == "sum":
            return total
        if expr.kind == "mean":
            return total / mask.expand(torch.broadcast_shapes(mask.shape, (1, *body.shape[1:]))).sum(dim=axes)
        assert expr.kind == "top" and expr.rank is not None
        flat = torch.where(mask, body, -torch.inf).flatten(start_dim=1 + len(scope))  # (B, *dims, N)
        if flat.shape[-1] < expr.rank:  # inputs shorter than k: -inf where a row (undefined there) has < k keys
            flat = torch.nn.functional.pad(flat, (0, expr.rank - flat.shape[-1]), value=-torch.inf)
        return flat.topk(expr.rank, dim=-1).values[..., expr.rank - 1]

    def _expand_new_axes(self, value: Tensor, outer: int, count: int, value_rank: int = 0) -> Tensor:
        """Broadcast the ``count`` axes after the first 1 + ``outer`` to full length T."""
        shape = list(value.shape)
        for axis in range(1 + outer, 1 + outer + count):
            shape[axis] = self.length
        return value.expand(shape)


#: The rule of each value node of the typed IR: ``rule(evaluator, expr, scope)``.
VALUE_RULES: dict[type, Callable[[ReferenceEvaluator, Any, tuple[str, ...]], Tensor]] = {
    node: getattr(ReferenceEvaluator, "_" + node.__name__)
    for node in (ir.NumberLiteral, ir.Constant, ir.Token, ir.Component, ir.Inner, ir.Norm, ir.Square, ir.Pointwise,
                 ir.Arithmetic, ir.Negate, ir.Divide, ir.MatVec, ir.Reduce, ir.TokenLiteral, ir.PositionNumber,
                 ir.Compare, ir.Logical, ir.Not, ir.Bracket, ir.TableLookup)
}

ReferenceEvaluator.value_rules = VALUE_RULES

#: The rule of each position node: 0-based positions, int64.
POSITION_RULES: dict[type, Callable[[ReferenceEvaluator, Any, tuple[str, ...]], Tensor]] = {
    node: getattr(ReferenceEvaluator, "_" + node.__name__)
    for node in (ir.PositionVariable, ir.FixedPosition, ir.LastPosition, ir.ArgPosition, ir.RunLength,
                 ir.ReflectedPosition)
}

_COMPARE = {
    "!=": torch.ne, "==": torch.eq, "<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge,
}


def _token_value(tokens: Tensor, expr: ir.Token) -> Tensor:
    """A token program's token is one number (its value or its id): the trailing axis goes."""
    return tokens if expr.type.shape else tokens[..., 0]


def _align(value: Tensor, other: Tensor, value_type: ir.ValueType) -> Tensor:
    """A scalar operand gets a trailing axis to broadcast against a vector operand."""
    if value_type.kind == "scalar" and other.dim() > value.dim():
        return value.unsqueeze(-1)
    return value


def at_length(program: ir.Program, length: int) -> ir.Program:
    """``program`` re-checked for sequence length ``length`` (x(k), ranges depend on T); a token
    program holds at every length 1..T as it is (``len`` is the length, ``T`` the compiled one)."""
    if length == program.length or program.over_tokens:
        return program
    return check(program.expanded, program.path, program.source, length=length, margin=program.margin)


def retrieval_margin(program: ir.Program, x: Tensor) -> Tensor:
    """For each input, the smallest gap between the best and the runner-up score over every
    argmin/argmax the target evaluates (inf when it has none), float64: (B,) for a sequence
    target; (B, T) for a per-token target, whose margin is taken per position.

    A model that retrieves tokens is promised accurate only where this is ≥ the margin δ.
    """
    program, evaluator = evaluator_for(program, x)
    target_value(program, evaluator)
    batch, length = evaluator.batch, evaluator.length
    margin = torch.full((batch, length) if program.per_token else (batch,), torch.inf, dtype=torch.float64)
    for gap in evaluator.margins:  # (B, *scope dims); a per-token target's first scope axis is t
        if program.per_token:
            gap = gap.reshape(batch, 1) if gap.dim() == 1 else gap
            gap = gap.reshape(batch, gap.shape[1], -1).amin(dim=-1).expand(batch, length)  # (B, T)
        else:
            gap = gap.reshape(batch, -1).amin(dim=-1)  # (B,)
        margin = torch.minimum(margin, gap)
    return margin


def target_value(program: ir.Program, evaluator: ReferenceEvaluator) -> Tensor:
    """The target on the evaluator's batch: (B, *value shape) for a sequence target; for a
    per-token target (B, T, *value shape), NaN at the positions where its condition fails."""
    if program.token_output:
        return _token_ids(program, evaluator)
    if not program.per_token:
        result = evaluator.value(program.target, ())  # (B or 1, *value shape)
        return result.expand(evaluator.batch, *result.shape[1:])
    scope = program.output_scope
    result = evaluator.value(program.target, scope)  # (B or 1, T or 1, *value shape)
    result = result.expand(evaluator.batch, evaluator.length, *result.shape[2:])
    defined = evaluator.mask(program.token_conditions, scope)  # (1, T or 1)
    defined = defined.reshape(*defined.shape, *[1] * (result.dim() - 2))
    return torch.where(defined, result, torch.nan)


def defined_positions(program: ir.Program, length: int) -> Tensor:
    """Where a per-token target is defined at sequence length ``length``: bool (length,) (a
    token program's ``T`` stays its compiled length, ``len`` is ``length``)."""
    program = at_length(program, length)
    evaluator = ReferenceEvaluator(torch.zeros(1, length, program.dimension, dtype=torch.float64),
                                   last=program.length if program.over_tokens else None)
    return evaluator.mask(program.token_conditions, (program.token_variable or "t",)).reshape(-1).expand(length)


def _token_ids(program: ir.Program, evaluator: ReferenceEvaluator) -> Tensor:
    """A token output: the id at the position the target reads (or, for a table of tokens, the
    id of its value among the table's tokens), (B,) or (B, T') int64; ``UNDEFINED_ID`` where a
    per-token target's condition fails."""
    assert evaluator.ids is not None
    scope = program.output_scope
    if isinstance(program.target, ir.TableLookup):
        value = evaluator.value(program.target, scope)  # (B or 1, T' or 1) or (B or 1,): the ids, as floats
        ids = value.expand(evaluator.batch, *([evaluator.length] if scope else [])).to(torch.int64)
        ids = ids.reshape(evaluator.batch, -1)
    else:
        assert isinstance(program.target, ir.Token)
        positions = evaluator.position(program.target.position, scope)  # (B or 1, T' or 1) or (B or 1,)
        positions = positions.expand(evaluator.batch, *([evaluator.length] if scope else []))
        ids = torch.gather(evaluator.ids, 1, positions.clamp(0, evaluator.length - 1).reshape(evaluator.batch, -1))
    if not program.per_token:
        return ids.reshape(evaluator.batch)
    defined = evaluator.mask(program.token_conditions, scope).reshape(1, -1)  # (1, T' or 1)
    return torch.where(defined, ids, UNDEFINED_ID)


def evaluator_for(program: ir.Program, x: Tensor) -> tuple[ir.Program, ReferenceEvaluator]:
    """The program at the batch's length and an evaluator on it: x (B, T, d) for a program over
    vectors (re-checked at that T), token ids (B, T') for a token program (any T' in 1..T)."""
    if program.over_tokens:
        ids = check_ids(program, torch.as_tensor(x))
        evaluator = ReferenceEvaluator(token_values(program, ids), last=program.length, domain=finite_domain(program),
                                       path=program.path)
        evaluator.ids = ids
        return program, evaluator
    x = torch.as_tensor(x)
    if x.dim() != 3 or x.shape[2] != program.dimension or x.shape[1] < 1:
        raise ValueError(f"evaluate expects x of shape (batch, T, {program.dimension}), got {tuple(x.shape)}")
    if x.shape[1] > program.length:  # as the model refuses it: the program is checked up to its T
        raise ValueError(f"input length {x.shape[1]} exceeds the program's T = {program.length} (check it at "
                         f"that length first: ifl.load_program(path, length={x.shape[1]}))")
    return at_length(program, x.shape[1]), ReferenceEvaluator(x.to(torch.float64))


def evaluate(program: ProgramSource, x: Tensor) -> Tensor:
    """The exact target on a batch, float64: x (B, T, d) -> (B,) or (B, k) for a sequence
    target; (B, T) or (B, T, k) for a per-token target, NaN where its condition fails.

    T may be shorter than the program's declared length (the program is re-checked for it),
    never longer (ValueError, as the model refuses it: check the program at that length). A
    token program takes ids (B, T') int64 for any T' in 1..T (``len`` = T'); a token output
    is int64 ids, ``UNDEFINED_ID`` (−1) where a per-token target is undefined.

    Args:
        program: a checked program, or the path of a ``.iflow`` file.
        x: inputs (B, T, d) float, or token ids (B, T') int64.

    Returns:
        The exact target, float64 (token outputs: int64 ids), shaped as above.

    Raises:
        ValueError: inputs of the wrong shape, longer than T, or ids outside the vocabulary.
    """
    program, evaluator = evaluator_for(program_argument(program, "evaluate"), x)
    return target_value(program, evaluator).clone()


