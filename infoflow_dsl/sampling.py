"""Inputs drawn from a program's declared domain.

``in [a, b]``: every coordinate uniform on [a, b], independently. ``in ball(r)``: every token
uniform in the Euclidean ball of radius r (a Gaussian direction times r·U^(1/d)). All draws
come from a seeded ``torch.Generator`` on the CPU, so they are the same on every run.
"""

from __future__ import annotations

import torch

from .typed import Ball, Box, Program


def sample_inputs(program: Program, count: int, seed: int = 0, length: int | None = None) -> torch.Tensor:
    """``count`` sequences from the domain: shape (count, T, d), float64."""
    length = program.length if length is None else length
    generator = torch.Generator().manual_seed(seed)
    shape = (count, length, program.dimension)
    domain = program.domain
    if isinstance(domain, Box):
        uniform = torch.rand(shape, generator=generator, dtype=torch.float64)
        return domain.low + (domain.high - domain.low) * uniform
    assert isinstance(domain, Ball)
    direction = torch.randn(shape, generator=generator, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True).clamp_min(1e-300)
    radius = torch.rand((count, length, 1), generator=generator, dtype=torch.float64) ** (1.0 / program.dimension)
    return domain.radius * radius * direction
