"""Compiled models shared by the tests (compiling is cheap, measuring is not: each model once)."""

from __future__ import annotations

import itertools
from functools import cache, lru_cache

import torch
from programs import by_name

import infoflow_dsl as ifl

#: Every efficient canonical example.
CANONICAL_EFFICIENT = [
    "min_pairwise", "intrinsic_2", "intrinsic_3", "intrinsic_4", "intrinsic_5", "intrinsic_6", "d_retrieval",
    "kth_largest", "first_three", "nearest_neighbour",
    "running_max", "prefix_mean", "previous_token", "induction", "causal_similarity",
]

#: The per-token programs of the table the verdict calls efficient (tok_prefix_top2 is order 3).
PER_TOKEN_COMPILED = [
    "tok_own_projection", "tok_own_square", "tok_global_max", "tok_centered", "tok_next_token", "tok_two_back",
    "tok_offset_product", "tok_prefix_min", "tok_nearest_earlier", "tok_window_max", "tok_lagged_max",
    "tok_suffix_max", "tok_global_top2", "tok_argmax_prefix", "tok_nearest_other", "tok_prefix_mean_times_own",
    "tok_fixed_position", "tok_last_two", "tok_matvec_running_mean", "tok_relu_after_max", "tok_similarity_sum",
]

#: Further programs that together use every construct of the compiler (the coverage test in
#: tests/pipeline/test_compiling.py).
EXTRA_COMPILED = [
    "mean_token", "sum_scaled", "pairwise_distinct", "ordered_pairs", "causal_sum", "window", "equal_positions",
    "second_largest", "argmax_token", "last_plus_first", "relu_min_max_abs", "bilinear_randn", "projection_matrix",
    "squared_distance_ball", "nested_macros", "triple_sum_mean", "shadowed_sum_of_maxes", "norms_away_from_zero",
    *PER_TOKEN_COMPILED,
]


@cache
def program(name: str, length: int | None = None) -> ifl.Program:
    example = by_name(name)
    return ifl.parse_program(example.source, example.path, length=length)


@lru_cache(maxsize=8)
def model(name: str, eps: float, dtype: str, length: int | None = None, ffn: str = "wide") -> ifl.CompiledTransformer:
    return ifl.compile(program(name, length), eps=eps, dtype=dtype, device="cpu", samples=0, ffn=ffn)


@lru_cache(maxsize=8)
def plain_float64(source: str) -> ifl.CompiledTransformer:
    """A program's plain model in float64, unmeasured (the superposition tests' baseline)."""
    return ifl.compile(ifl.parse_program(source, "p.iflow"), samples=0, dtype="float64")


def dense_float64(model: ifl.CompiledTransformer) -> dict[str, torch.Tensor]:
    """The model's tensors, dense, in float64 (what compiler/superposition takes)."""
    return {n: (t.to_dense() if t.is_sparse else t).double() for n, t in model.state_dict().items()}


def smallest_residual(program: ifl.Program, dtype: str | None = "float64") -> int:
    """The smallest D compile --residual certifies: what --residual 1's refusal names (1 where
    it is not refused)."""
    from infoflow_dsl.errors import CompileError

    try:
        ifl.compile(program, samples=0, dtype=dtype, residual=1)
    except CompileError as refused:
        return int(str(refused).split(" is ")[-1].split(" ")[0])
    return 1


def every_input(tokens: int, length: int) -> torch.Tensor:
    """(tokens ** length, length) int64: every sequence of ``length`` ids below ``tokens``."""
    return torch.tensor(list(itertools.product(range(tokens), repeat=length)), dtype=torch.int64)

