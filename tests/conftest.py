"""Shared test set-up: one torch thread, a larger first garbage-collector generation, and
hypothesis's deterministic profile under CI (which hypothesis loads by itself when CI=true).

The compiler and the analysis build large trees of small frozen objects (an interpolant of a
wide square is a million ``ReLUUnit`` s, an analysis thousands of IR nodes) that all survive:
with Python's default first-generation threshold (700 allocations) the collector rescans them
over and over. 10,000 (``infoflow_dsl.collector.FIRST_GENERATION``, what compile, analyze and
relower set while they build) keeps the collector on and the tests' memory as it was, and measured
15-25% less time on compile-and-analyze work (the two thresholds alternated in one process,
3 repeats each); the tests' assertions are untouched.
"""

from __future__ import annotations

import gc

import torch

from infoflow_dsl.collector import FIRST_GENERATION

torch.set_num_threads(1)
gc.set_threshold(FIRST_GENERATION, 10, 10)  # what compile and analyze set, for every test
