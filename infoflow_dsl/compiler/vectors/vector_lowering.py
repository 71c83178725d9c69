"""Stage 4, lower: an :class:`~infoflow_dsl.analysis.schedule.Schedule` -> a
:class:`~infoflow_dsl.compiler.circuit.Circuit` within ε.

One lowering (:func:`lower_schedule`) builds, on a :class:`~.builder.CircuitBuilder`, the fetch
heads (``fetch``), then each comparison node's head (``retrieval``, ``uniform``), then the
output expression (``values``), under one allocation of error shares; the error budget
(``budget.fit_budget``) repeats it until the a-priori bound meets ε. The output is read by the
unembedding, which sums its directions: one more rounding, √D·|y|·ϱ.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ... import progress
from ...analysis.causality import is_causal
from ...analysis.schedule import Schedule
from ...analysis.stages import layers_for_output
from ...errors import CompileError
from ...language import typed as ir
from ..approximations import ROUTES
from ..circuit import Circuit, ErrorBudget, NodeValue, readout_rounding
from .budget import BudgetFit, RoundingLimit, fit_budget
from .builder import CircuitBuilder
from .fetch import position_head, presence_head
from .quantity import ErrorShares, ErrorVec, Quantity
from .retrieval import comparison_head
from .uniform import uniform_head
from .values import values

UNIT_ROUNDOFF = {torch.float64: 2.0**-53, torch.float32: 2.0**-24}


def _read_out(builder: CircuitBuilder, q: Quantity) -> Quantity:
    """q as the unembedding reads it: plus the rounding of its sum, √(D+1)·(|q| + Σ|coefficients|)·ϱ."""
    rounding = readout_rounding(q.form, q.magnitude, builder.unit_roundoff)
    return Quantity(form=q.form, stage=q.stage, low=q.low, high=q.high, error=q.error.plus(ErrorVec.rounded(rounding)))


def lower_schedule(builder: CircuitBuilder, schedule: Schedule) -> list[Quantity]:
    """Every head of ``schedule`` and the output on ``builder``: the output's components as read out."""
    for head in schedule.heads:
        if head.kind == "position":
            position_head(builder, head)
        elif head.kind == "presence":
            presence_head(builder, head)
    by_name = {h.name: h for h in schedule.heads}
    for node in schedule.tree.nodes:
        if len(node.variables) != 1:
            raise CompileError(f"{node.quoted} compares several positions jointly")
        construction = uniform_head if node.kind in ("sum", "mean") else comparison_head
        construction(builder, node, by_name[node.name])
    tree = schedule.tree
    return [_read_out(builder, q) for q in values(builder, tree.output, tree.output_site)]


def lower(program: ir.Program, schedule: Schedule, eps: float, dtype: torch.dtype = torch.float64,
          route: str = "wide", gathered: bool = False) -> Circuit:
    """The circuit of an efficient target, with a-priori error ≤ eps in ``dtype``.

    ``route`` picks how squares are built (``approximations.ROUTES``): deep squares take extra
    attention-free layers, and every head that reads one waits for its last level.
    ``gathered``: the schedule of compile's gather route (``unroll``), whose comparisons read
    gathered fixed positions, so the order-of-comparison verdict does not apply to it.

    Raises :class:`CompileError` for a target the verdict calls inefficient, and for an ε
    below what the dtype's rounding allows, saying the smallest ε (within a factor 2^(1/4))
    that it can honour: finer grids need more units, whose sums round more, so that limit
    is found by trying.
    """
    if route not in ROUTES:
        raise CompileError(f"--ffn must be one of {', '.join(ROUTES)}, got {route!r}")
    if route != "wide" and schedule.budget is not None:
        raise CompileError(f"--ffn {route} adds layers, which a head budget (--heads) fixes; use --ffn wide")
    if schedule.problems and not gathered:
        problem = schedule.problems[0]
        raise CompileError(f"the target is inefficient: {problem.message}; {problem.law}. Compile it with "
                           f"--allow-inefficient (allow_inefficient=True) for the gather route, whose size grows "
                           f"with T (analyze's fallback says how)")
    if not eps > 0:
        raise CompileError(f"ε must be positive, got {eps}")
    roundoff = UNIT_ROUNDOFF[dtype]

    def fit(bound: float) -> BudgetFit[CircuitBuilder]:
        def attempt(shares: ErrorShares) -> tuple[CircuitBuilder, list[Quantity]]:
            builder = CircuitBuilder(program=program, shares=shares, unit_roundoff=roundoff, route=route,
                                     gathered=gathered)
            return builder, lower_schedule(builder, schedule)

        found = fit_budget(bound, attempt)
        if found is None:
            raise CompileError(f"could not meet ε = {bound:g}: the error budget did not converge")
        return found

    try:
        return _circuit(program, schedule, fit(eps), eps)
    except RoundingLimit as limit:
        dtype_name = str(dtype).replace("torch.", "")
        smallest = _two_digits_up(_smallest_eps(eps, fit))  # what is printed compiles
        other = "" if dtype == torch.float64 else " (or --dtype float64)"
        raise CompileError(f"ε = {eps:g} is below what {dtype_name} can honour for this program (its rounding alone "
                           f"may reach {limit.rounding:.2g}); the smallest ε it can is about {smallest:.2g}: compile "
                           f"with --eps {smallest:.2g}{other}") from None


def _two_digits_up(value: float) -> float:
    """``value`` rounded up to two significant digits (6.1035e-05 -> 6.2e-05)."""
    unit = 10.0 ** (math.floor(math.log10(value)) - 1)
    return math.ceil(value / unit - 1e-9) * unit


#: the grid the smallest feasible ε is looked for on: 2^(k/4), the same whatever ε was asked for
EPS_GRID_STEPS_PER_OCTAVE = 4


def _smallest_eps(eps: float, fit: Callable[[float], BudgetFit[CircuitBuilder]]) -> float:
    """The first point of the fixed grid 2^(k/4) above ``eps`` at which ``fit`` meets its
    rounding: the same answer for every ε asked for below it (a grid anchored at ``eps`` made the
    suggestion move with the request). At most 80 steps (a factor 2^20)."""
    progress.stage("looking for the smallest ε this dtype can honour")
    step = math.ceil(EPS_GRID_STEPS_PER_OCTAVE * math.log2(eps) + 1e-9)
    candidate = 2.0 ** (step / EPS_GRID_STEPS_PER_OCTAVE)
    for k in range(step, step + 80):
        candidate = 2.0 ** (k / EPS_GRID_STEPS_PER_OCTAVE)
        if candidate <= eps:
            continue
        try:
            fit(candidate)
            return candidate
        except RoundingLimit:
            continue
    return candidate


def _min_length(builder: CircuitBuilder) -> int:
    """The shortest input the fetches allow: k for x(k), 1 + k for x(T − k); at most T (an
    unrolled range fetches x(T + 1) for a tuple its condition excludes, whose value no output
    reads: the measurement holds the model to its bound either way)."""
    fixed = [p.index for p, _ in builder.fetched if isinstance(p, ir.FixedPosition)]
    fixed += [1 - p.offset for p, _ in builder.fetched if isinstance(p, ir.LastPosition) and p.offset]
    return min(max(fixed, default=1), builder.length)


def _circuit(program: ir.Program, schedule: Schedule, fit: BudgetFit[CircuitBuilder], eps: float) -> Circuit:
    builder, outputs = fit.builder, fit.outputs
    shares = [(f"head {h.name}", h.error) for h in builder.heads if h.error]
    shares += [(f"ffn {b.name}", b.error) for b in builder.blocks if b.error]
    exact = any(n.kind == "sum" for n in schedule.tree.nodes)
    node_values = tuple(
        NodeValue(name=node.name, forms=tuple(q.form for q in results), stage=max(q.stage for q in results),
                  bound=max(builder.error(q.error) for q in results))
        for node, results in ((n, builder.results[n.name]) for n in schedule.tree.nodes)
    )
    layers = max([schedule.layers, *(h.layer for h in builder.heads), *(b.layer for b in builder.blocks),
                  *(layers_for_output(q.stage) for q in outputs)])
    return Circuit(
        dimension=program.dimension, length=program.length, directions=tuple(builder.directions),
        heads=tuple(builder.heads), blocks=tuple(builder.blocks), output=tuple(q.form for q in outputs),
        output_shape=program.output_shape, layers=layers, theta=builder.theta,
        budget=ErrorBudget(eps=eps, shares=tuple(shares), rounding=fit.rounding, bound=fit.bound),
        exact_length_only=exact, min_length=_min_length(builder), output_site=schedule.tree.output_site,
        causal=is_causal(program), values=node_values,
    )
