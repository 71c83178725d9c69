"""Shared test set-up: one torch thread, a larger first garbage-collector generation, and
hypothesis's deterministic profile under CI (which hypothesis loads by itself when CI=true).

The compiler and the analysis build large trees of small frozen objects (an interpolant of a
wide square is a million ``ReLUUnit`` s, an analysis thousands of IR nodes) that all survive:
with Python's default first-generation threshold (700 allocations) the collector rescans them
over and over. 10,000 (``infoflow_dsl.collector.FIRST_GENERATION``, what compile, analyze and
relower set while they build) keeps the collector on and the tests' memory as it was, and measured
15-25% less time on compile-and-analyze work (the two thresholds alternated in one process,
3 repeats each); the tests' assertions are untouched.

``device``: a fixture parametrised over the devices present, ``cpu`` and, where a GPU is, ``cuda``
(the cuda case is generated only there, never skipped elsewhere): every test that runs a model,
trains or measures takes it, so the same assertions run on the GPU (``scripts/gpu_check.sh``).
"""

from __future__ import annotations

import gc

import pytest
import torch

from infoflow_dsl.collector import FIRST_GENERATION

torch.set_num_threads(1)
gc.set_threshold(FIRST_GENERATION, 10, 10)  # what compile and analyze set, for every test

#: the devices a test that runs a model is generated for: cpu, and cuda where a GPU is present
DEVICES = ("cpu", *(("cuda",) if torch.cuda.is_available() else ()))


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    """Each device present (:data:`DEVICES`): the test runs once per device."""
    return str(request.param)
