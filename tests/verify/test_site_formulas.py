"""The circuit map is ground truth, so it must not lie (issue 65, point 6): every site of every
shipped model, and of token programs compiled from the example table, read from a run's cache
on random inputs, is within its bound of what it says it computes, evaluated exactly, at every
row it claims.

What a site says it computes (docs/ground-truth.md, "Where each value lives"):
- ``comparison``: its node's exact value (``node_reference``);
- ``expression``: its sub-expression at the row (``expression_reference``), constants and the
  unembedding's bias included;
- ``ffn`` with a function: that function of its argument as the run computed it;
- ``ffn`` without one (a token construction's inner block): one of its ``values``, or nothing.

Tolerance: a site is read in float64 off the cached activations, Σ wᵢ·hᵢ + c over at most a few
dozen terms of size at most 10³: its own rounding is below 10² · 10³ · 2⁻⁵³ ≈ 10⁻¹¹, so
``READ_TOLERANCE`` = 10⁻⁹ covers it; the model's own arithmetic (float32 or float64) is in
the bound.
"""

from __future__ import annotations

from functools import cache

import pytest
import torch
from compiled import EXTRA_COMPILED
from compiled import program as table_program
from programs import TOKEN_EXTRA
from shipped_models import SHIPPED, shipped

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.oracle.evaluate import retrieval_margin
from infoflow_dsl.oracle.tokens import random_ids
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.verify.sites import CircuitSite, expression_reference, ffn_reference, node_reference

READ_TOLERANCE = 1e-9
BATCH = 24
#: token programs of the table (TOKEN_EXTRA) and vector ones with every site kind
TABLE_TOKENS = [p.name for p in TOKEN_EXTRA]
TABLE_VECTORS = ["causal_sum", "relu_min_max_abs", "tok_prefix_mean_times_own", "tok_global_top2"]
assert set(TABLE_VECTORS) <= set(EXTRA_COMPILED)


@cache
def source_program(name: str) -> ifl.Program:
    """A program of the table: the token table's (TOKEN_EXTRA) or the vector one's."""
    token = {p.name: p for p in TOKEN_EXTRA}.get(name)
    return table_program(name) if token is None else ifl.parse_program(token.source, token.path)


@cache
def table_model(name: str) -> ifl.CompiledTransformer:
    return ifl.compile(source_program(name), eps=1e-3, dtype="float32", device="cpu", samples=0)


def _inputs(model: ifl.CompiledTransformer, program: ifl.Program, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, kept): random ids at the full length T for a token program, random inputs and
    the corners for one over vectors; ``kept`` marks the inputs (or, per token, rows) that meet
    the program's declared margin (all where it has none)."""
    if program.over_tokens:
        x = random_ids(program, BATCH, seed=seed, length=program.length)
        return x, torch.ones(x.shape[0], dtype=torch.bool)
    x = model_inputs(program, BATCH, seed=seed).to(model.dtype)
    if program.margin is None:
        return x, torch.ones(x.shape[0], dtype=torch.bool)
    return x, retrieval_margin(program, x.double()) >= program.margin


def _reference(site: CircuitSite, program: ifl.Program, x: torch.Tensor, nodes: dict[str, torch.Tensor],
               cache_: object) -> torch.Tensor | None:
    """What the site says it holds, exactly, at its rows (NaN where it claims nothing); None for
    a site that states its values only."""
    if site.kind == "expression":
        return expression_reference(site, program, x)
    if site.kind == "comparison":
        node, _, component = site.name.partition("[")
        return nodes[node] if not component else nodes[node][..., int(component[:-1]) - 1]
    return ffn_reference(site, cache_) if site.function else None


def _values_error(site: CircuitSite, got: torch.Tensor) -> torch.Tensor:
    """The distance of each read value to the nearest of the site's stated values (0 where it
    states none: such a site claims nothing)."""
    if site.values is None:
        return torch.zeros_like(got)
    values = torch.tensor(site.values, dtype=torch.float64)
    return (got[..., None] - values).abs().min(-1).values


def site_errors(model: ifl.CompiledTransformer, program: ifl.Program, seed: int) -> dict[str, tuple[float, float]]:
    """Each site's largest |read − what it says it computes| over the claimed rows of a random
    batch, and its bound: name -> (error, bound)."""
    torch.set_num_threads(1)
    x, kept = _inputs(model, program, seed)
    sites = ifl.circuit(model)
    hooks = {s.hook for s in sites} | {s.argument.hook for s in sites if s.argument is not None}
    nodes = node_reference(program, x) if any(s.kind == "comparison" for s in sites) else {}
    with torch.no_grad():
        _, run = ifl.hooked(model).run_with_cache(x, names_filter=lambda name: name in hooks)
    errors = {}
    for site in sites:
        got = site.read(run)
        want = _reference(site, program, x, nodes, run)
        if want is None:
            error = _values_error(site, got)
        else:
            if site.site == "token" and want.dim() == 1:  # one value per sequence, held at every token
                want = want[:, None].expand_as(got)
            assert want.shape == got.shape, site.name
            error = (got - want).abs()
            error = torch.where(torch.isfinite(want), error, 0.0)  # an empty range: undefined, not claimed
        rows = kept.reshape(-1, *[1] * (error.dim() - 1)) if kept.dim() == 1 else kept
        error = torch.where(rows if site.site == "token" or kept.dim() == 1 else rows.all(-1), error, 0.0)
        errors[f"{site.name} ({site.computes})"] = (float(error.max()), site.bound)
    return errors


def _assert_within(errors: dict[str, tuple[float, float]]) -> None:
    over = {name: f"{error:.3g} > {bound:.3g}" for name, (error, bound) in errors.items()
            if not error <= bound + READ_TOLERANCE}
    assert not over, over


@pytest.mark.parametrize("name", [n for n in SHIPPED if "disguised" not in n])
def test_every_site_of_a_shipped_model_holds_its_formula(name):
    model = shipped(name)
    _assert_within(site_errors(model, program_of(model), seed=65))


@pytest.mark.parametrize("name", TABLE_TOKENS + TABLE_VECTORS)
def test_every_site_of_a_table_program_holds_its_formula(name):
    _assert_within(site_errors(table_model(name), source_program(name), seed=66))


def test_count_a_output_site_includes_the_unembedding_bias():
    """count_a's steps1 is sum_<s> [x(s) == "a"] with b_U = 1 folded in (it read 1 less), and
    the head before it is named for the mean it holds."""
    sites = {s.name: s for s in ifl.circuit(shipped("tracr/count_a"))}
    assert sites["steps1"].computes == 'sum_<s> [x(s) == "a"]' and sites["steps1"].value.constant == 1.0
    assert sites["h1"].computes == 'mean_<s> [x(s) == "a"]'
