"""Inputs drawn from a program's declared domain.

``in [a, b]``: every coordinate uniform on [a, b], independently. ``in ball(r)``: every token
uniform in the Euclidean ball of radius r (a Gaussian direction times r·U^(1/d)). All draws
come from a seeded ``torch.Generator``, on the CPU unless a device is named, so they are the
same on every run on that device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..language.load import count_argument, program_argument
from ..language.typed import Ball, Box, Program
from .tokens import random_ids

if TYPE_CHECKING:
    from ..language.load import ProgramSource


def sample_inputs(program: ProgramSource, count: int, seed: int = 0, length: int | None = None,
                  device: str | torch.device = "cpu") -> torch.Tensor:
    """``count`` sequences from the domain: shape (count, T, d), float64, drawn on ``device``; for a
    token program uniformly random token ids, (count, length) int64 (``length`` in 1..T, default T).

    Args:
        program: a checked program, or the path of a ``.iflow`` file.
        count: how many sequences (≥ 0).
        seed: the seed.
        length: a token program's sequence length (1..T, default T).
        device: where to draw them.

    Returns:
        (count, T, d) float64 inputs, or (count, length) int64 token ids.

    Raises:
        ValueError: a negative count or a length outside 1..T.
    """
    program = program_argument(program, "sample_inputs")
    count = count_argument(count, "the number of inputs")
    if program.over_tokens:
        return random_ids(program, count, seed, length)
    length = program.length if length is None else length
    generator = torch.Generator(device=device).manual_seed(seed)
    shape = (count, length, program.dimension)
    on: dict[str, Any] = {"generator": generator, "dtype": torch.float64, "device": device}
    domain = program.domain
    if isinstance(domain, Box):
        uniform = torch.rand(shape, **on)
        return domain.low + (domain.high - domain.low) * uniform
    assert isinstance(domain, Ball)
    direction = torch.randn(shape, **on)
    direction = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True).clamp_min(1e-300)
    radius = torch.rand((count, length, 1), **on) ** (1.0 / program.dimension)
    return domain.radius * radius * direction


def domain_corners(program: Program, count: int, seed: int = 0, length: int | None = None) -> torch.Tensor:
    """Extreme inputs: (count, T, d), float64.

    Box: every coordinate at a or b (the first 2^d sequences repeat one corner token at every
    position, so all scores tie; the rest are random corners). Ball: tokens on the sphere of
    radius r (the first 2d sequences repeat ±r·e_i).
    """
    length = program.length if length is None else length
    d = program.dimension
    generator = torch.Generator().manual_seed(seed)
    domain = program.domain
    if isinstance(domain, Box):
        bits = torch.randint(0, 2, (count, length, d), generator=generator, dtype=torch.int64)
        for k in range(min(count, 2**d if d <= 12 else 0)):
            pattern = torch.tensor([(k >> i) & 1 for i in range(d)], dtype=torch.int64)
            bits[k] = pattern.expand(length, d)
        return domain.low + (domain.high - domain.low) * bits.to(torch.float64)
    assert isinstance(domain, Ball)
    points = torch.randn((count, length, d), generator=generator, dtype=torch.float64)
    points = domain.radius * points / torch.linalg.vector_norm(points, dim=-1, keepdim=True).clamp_min(1e-300)
    for k in range(min(count, 2 * d)):
        axis = torch.zeros(d, dtype=torch.float64)
        axis[k // 2] = domain.radius * (1 if k % 2 == 0 else -1)
        points[k] = axis.expand(length, d)
    return points
