"""The shipped compiled models (compiled_examples/), loaded once per test process."""

from __future__ import annotations

from functools import cache

import torch
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.oracle.tokens import random_ids
from infoflow_dsl.pipeline.reading import program_of

SHIPPED = sorted(str(p.relative_to(EXAMPLES_DIR).with_suffix("")) for p in EXAMPLES_DIR.rglob("*.safetensors"))
#: a few of them for the measured tests: token programs of one to four layers, and vectors
MEASURED = ["tracr/reverse", "tracr/frac_prevs", "tracr/sort", "tracr/hist", "min_pairwise", "induction"]


@cache
def shipped(name: str) -> ifl.CompiledTransformer:
    return ifl.load(EXAMPLES_DIR / f"{name}.safetensors")


@cache
def graph(name: str) -> ifl.EdgeGraph:
    return ifl.circuit_graph(shipped(name))


def model_inputs_of(name: str, count: int, seed: int, length: int = 6) -> torch.Tensor:
    """Inputs of shipped model ``name``: random ids of ``length`` (at most T) for a token model,
    random inputs and the corners at T for one over vectors, in the model's dtype."""
    model = shipped(name)
    program = program_of(model)
    if program.over_tokens:
        return random_ids(program, count, seed=seed, length=min(program.length, length))
    return model_inputs(program, count, seed=seed).to(model.dtype)
