"""Helpers for the lowering's unit tests (tests/compiler/vectors/): a builder for a program, a
model from what was built on it, and inputs over a grid of the domain."""

from __future__ import annotations

import torch

import infoflow_dsl as ifl
from infoflow_dsl.analysis.schedule import Schedule, build_schedule
from infoflow_dsl.analysis.stages import layers_for_output
from infoflow_dsl.analysis.tree import build_tree
from infoflow_dsl.compiler.assemble import assemble
from infoflow_dsl.compiler.circuit import Circuit, ErrorBudget
from infoflow_dsl.compiler.vectors.builder import CircuitBuilder
from infoflow_dsl.compiler.vectors.quantity import ErrorShares, Quantity
from infoflow_dsl.compiler.vectors.vector_lowering import UNIT_ROUNDOFF
from infoflow_dsl.language import typed as ir
from infoflow_dsl.oracle.sampling import domain_corners, sample_inputs


def program(source: str) -> ir.Program:
    return ifl.parse_program(source.strip() + "\n", "unit.iflow")


def schedule_of(checked: ir.Program) -> Schedule:
    return build_schedule(build_tree(checked), None, checked.margin)


def builder(checked: ir.Program, share: float = 1e-3, route: str = "wide", gathered: bool = False,
            dtype: torch.dtype = torch.float64) -> CircuitBuilder:
    """A builder whose every source gets the share ``share``."""
    return CircuitBuilder(program=checked, shares=ErrorShares(default=share), unit_roundoff=UNIT_ROUNDOFF[dtype],
                          route=route, gathered=gathered)


def model(built: CircuitBuilder, outputs: list[Quantity], site: str = "readout") -> ifl.CompiledTransformer:
    """The float64 model of what ``built`` holds, reading ``outputs`` at ``site`` (readout or token)."""
    layers = max([1, *(h.layer for h in built.heads), *(b.layer for b in built.blocks),
                  *(layers_for_output(q.stage) for q in outputs)])
    circuit = Circuit(
        dimension=built.program.dimension, length=built.length, directions=tuple(built.directions),
        heads=tuple(built.heads), blocks=tuple(built.blocks), output=tuple(q.form for q in outputs),
        output_shape=() if len(outputs) == 1 else (len(outputs),), layers=layers, theta=built.theta,
        budget=ErrorBudget(eps=1.0, shares=(), rounding=0.0, bound=0.0), output_site=site)
    config, tensors = assemble(circuit, torch.float64)
    return ifl.CompiledTransformer(config, tensors, dtype=torch.float64)


def run(compiled: ifl.CompiledTransformer, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return compiled(x)


def inputs(checked: ir.Program, count: int = 256, seed: int = 0) -> torch.Tensor:
    """Random inputs from the domain, then its corners: (N, T, d), float64."""
    return torch.cat([sample_inputs(checked, count, seed=seed), domain_corners(checked, 32, seed=seed + 1)])


def grid(low: float, high: float, points: int, length: int, dimension: int) -> torch.Tensor:
    """Inputs whose every token's coordinates run over a dense grid of [low, high]: (points, T, d);
    coordinate i of sequence n is the grid's point (n + 7i) mod points, so pairs of coordinates vary."""
    values = torch.linspace(low, high, points, dtype=torch.float64)
    index = torch.arange(points)[:, None, None] + 7 * torch.arange(dimension) + 3 * torch.arange(length)[:, None]
    return values[index % points]
