"""The shipped compiled models (compiled_examples/), loaded once per test process."""

from __future__ import annotations

from functools import cache

from programs import EXAMPLES_DIR

import infoflow_dsl as ifl

SHIPPED = sorted(str(p.relative_to(EXAMPLES_DIR).with_suffix("")) for p in EXAMPLES_DIR.rglob("*.safetensors"))
#: a few of them for the measured tests: token programs of one to four layers, and vectors
MEASURED = ["tracr/reverse", "tracr/frac_prevs", "tracr/sort", "tracr/hist", "min_pairwise", "induction"]


@cache
def shipped(name: str) -> ifl.CompiledTransformer:
    return ifl.load(EXAMPLES_DIR / f"{name}.safetensors")


@cache
def graph(name: str) -> ifl.EdgeGraph:
    return ifl.circuit_graph(shipped(name))
