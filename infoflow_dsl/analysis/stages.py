"""The one stage clock: when a value exists in the residual stream, and which layer can read it.

Every stage of the compiler (the schedule, both lowerings, the report's graph) counts time the
same way, here:

- stage 0: the embedding's linear part (``W_E [x; 1] + P``, a token's table row);
- stage 1: the embedding's ReLU block (``W_E2 relu(W_E1 [x; 1] + b_E1)``);
- stage 2l: layer l's attention (``h ← h + Σ heads``), for l ≥ 1;
- stage 2l + 1: layer l's FFN.

A head of layer l reads the residual stream before that layer, so it can read a value of stage
S ≤ 2l − 1: the first such layer is ``layer_for(S) = ⌊S/2⌋ + 1``. An FFN of layer l reads what
its layer's attention left, S ≤ 2l: ``ffn_layer(S) = max(1, ⌈S/2⌉)``, and what it computes
exists from ``ffn_stage(ffn_layer(S))`` = :func:`next_ffn` (S) on. Linear maps cost no stage:
they fold into the matrices that read them.
"""

from __future__ import annotations

import math

EMBEDDING = 0  # the embedding's linear part (token table rows, the positional code)
EMBEDDING_FFN = 1  # the embedding's ReLU block


def attention_stage(layer: int) -> int:
    """The stage of layer ``layer``'s heads' outputs: 2l."""
    return 2 * layer


def ffn_stage(layer: int) -> int:
    """The stage of layer ``layer``'s FFN outputs: 2l + 1."""
    return 2 * layer + 1


def layer_for(stage: int) -> int:
    """The first layer whose attention can read what exists at ``stage``: 2l − 1 ≥ stage."""
    return stage // 2 + 1


def ffn_layer(stage: int) -> int:
    """The first layer (≥ 1) whose FFN can read what exists at ``stage``: 2l ≥ stage."""
    return max(1, math.ceil(stage / 2))


def next_ffn(stage: int) -> int:
    """The first FFN stage (odd) after ``stage``: where a nonlinear function of it exists."""
    return stage + 1 if stage % 2 == 0 else stage + 2


def after_ffns(stage: int, count: int) -> int:
    """The stage ``count`` FFN stages after ``stage`` (``count`` = 1: :func:`next_ffn`)."""
    for _ in range(count):
        stage = next_ffn(stage)
    return stage


def layers_for_output(stage: int) -> int:
    """Layers needed for the readout to hold a value produced at ``stage``."""
    return max(math.ceil((stage - 1) / 2), 0) if stage % 2 else stage // 2


def layer_of(stage: int) -> int:
    """The layer a stage ≥ 2 belongs to (its attention or its FFN); 0 for the embedding."""
    return stage // 2
