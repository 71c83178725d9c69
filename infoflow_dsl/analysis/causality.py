"""Whether a per-token target is causal (docs/language.md, v2): its value at t reads x(1..t) alone."""

from __future__ import annotations

from ..language import typed as ir
from ..language.positions import after_query_possible


def is_causal(program: ir.Program) -> bool:
    """docs/language.md: a per-token target is causal when its value at t depends on x(1..t) alone:
    every token it reads is at a position provably ≤ t under the enclosing conditions (own
    token, offsets t − k, variables of reductions bounded by t, and no fixed position that can
    exceed t). Decided exactly, like the checker's offsets, on the position grid. A target that
    reads ``len`` is not causal: its value at t depends on how many tokens follow."""
    if not program.per_token or _reads_length(program):
        return False  # len: the value at t depends on how many tokens follow
    return all(_read_is_causal(program, position, conditions, scope)
               for position, conditions, scope in _reads(program.target, program.output_scope,
                                                         program.token_conditions))


def _reads_length(program: ir.Program) -> bool:
    nodes = [program.target, *ir.sub_nodes(program.target), *program.token_conditions]
    nodes += [n for c in program.token_conditions for n in ir.sub_nodes(c)]
    return any(isinstance(n, ir.RunLength) or (isinstance(n, ir.ReflectedPosition) and n.from_length) for n in nodes)


def _reads(expr: object, scope: tuple[str, ...], conditions: tuple[ir.PositionCondition, ...]):
    """Every position a token is read at, with the enclosing conditions and variables there."""
    if isinstance(expr, ir.Token):
        if isinstance(expr.position, ir.ArgPosition):
            inner = (*scope, expr.position.variable)
            yield ir.PositionVariable(expr.position.variable), conditions + expr.position.conditions, inner
        else:
            yield expr.position, conditions, scope
    if isinstance(expr, ir.Reduce):
        scope, conditions = (*scope, *expr.variables), conditions + expr.conditions
    elif isinstance(expr, ir.ArgPosition):
        scope, conditions = (*scope, expr.variable), conditions + expr.conditions
    for child in ir.children(expr):
        if not isinstance(child, ir.PositionCondition):
            yield from _reads(child, scope, conditions)


def _read_is_causal(program: ir.Program, position: object, conditions: tuple, scope: tuple[str, ...]) -> bool:
    return not after_query_possible(scope, conditions, position, program.token_variable, program.length)  # type: ignore[arg-type]
