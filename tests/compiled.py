"""Compiled models shared by the tests (compiling is cheap, measuring is not: each model once)."""

from __future__ import annotations

from functools import cache, lru_cache

from programs import by_name

import infoflow_dsl as ifl

#: Every efficient canonical example.
CANONICAL_EFFICIENT = [
    "min_pairwise", "intrinsic_2", "intrinsic_3", "intrinsic_4", "intrinsic_5", "intrinsic_6", "d_retrieval",
    "kth_largest", "first_three", "nearest_neighbour",
]

#: Further programs that together use every construct of the compiler (see test_pipeline's coverage test).
EXTRA_COMPILED = [
    "mean_token", "sum_scaled", "pairwise_distinct", "ordered_pairs", "causal_sum", "window", "equal_positions",
    "second_largest", "argmax_token", "last_plus_first", "relu_min_max_abs", "bilinear_randn", "projection_matrix",
    "squared_distance_ball", "nested_macros", "triple_sum_mean", "shadowed_sum_of_maxes", "norms_away_from_zero",
]


@cache
def program(name: str, length: int | None = None) -> ifl.Program:
    example = by_name(name)
    return ifl.parse_program(example.source, example.path, length=length)


@lru_cache(maxsize=8)
def model(name: str, eps: float, dtype: str, length: int | None = None) -> ifl.CompiledTransformer:
    return ifl.compile(program(name, length), eps=eps, dtype=dtype, device="cpu", samples=0)
