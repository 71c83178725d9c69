"""A training run's settings: the input distribution, the model's widths and the optimiser's,
head budgets, and the seed layout that keeps every run's batches, held-out set and the
standardisation draw apart (run seed s owns the block s·2^34 + [1, 2^33])."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import TrainError

SEED_BLOCK = 2**34  # run seed s owns the generator seeds s·2^34 + [1, 2^33]: disjoint blocks for s ≥ 0
STANDARDISATION_SEED = 3 * 2**32  # the fixed draw that estimates μ and σ: offset 3·2^32 of block 0, used by no run
STANDARDISATION_DRAW = 4096
MAX_STEPS = 2**32  # a run's training seeds s·2^34 + [1, 2^32] stay below its validation seed s·2^34 + 2^33
MAX_SEED = 2**29 - 1  # the largest run seed whose block stays below 2^63: (2^29 − 1)·2^34 + 2^33 < 2^63
WARMUP_FRACTION = 0.05
EVALUATIONS = 20  # validation points over a run (plus the last step)


def batch_seed(seed: int, step: int) -> int:
    """The generator seed of training step ``step`` (0-based) of run seed ``seed``: s·2^34 + step + 1.
    Steps below 2^32 stay in the run's own block, apart from its validation seed and every other run's."""
    return seed * SEED_BLOCK + step + 1


def validation_seed(seed: int) -> int:
    """The generator seed of run seed ``seed``'s held-out set: s·2^34 + 2^33, never a training step's seed
    (of this run or any other) nor another run's validation seed."""
    return seed * SEED_BLOCK + 2**33


# ---------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Distribution:
    """Where training inputs come from: the declared domain (``uniform``) or N(0, σ² I)."""

    kind: str = "uniform"
    sigma: float = 1.0

    def __str__(self) -> str:
        return "uniform" if self.kind == "uniform" else f"normal:{self.sigma:g}"


def parse_distribution(text: str) -> Distribution:
    """``uniform``, ``normal`` or ``normal:σ`` (σ > 0)."""
    if text == "uniform":
        return Distribution()
    kind, _, sigma_text = text.partition(":")
    if kind != "normal":
        raise TrainError(f"expected --dist uniform, normal or normal:σ, got {text!r}")
    try:
        sigma = float(sigma_text) if sigma_text else 1.0
    except ValueError:
        raise TrainError(f"expected --dist normal:σ with a number σ, got {text!r}") from None
    if not (math.isfinite(sigma) and sigma > 0):
        raise TrainError(f"expected --dist normal:σ with σ > 0, got {text!r}")
    return Distribution("normal", sigma)


@dataclass(frozen=True)
class TrainSettings:
    """One training run. ``heads``: heads per layer (its length is the number of layers)."""

    heads: tuple[int, ...]
    d_model: int = 32
    d_head: int = 8
    d_mlp: int = 32
    steps: int = 1000
    batch: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-2
    seed: int = 0
    dist: Distribution = field(default_factory=Distribution)
    validation: int = 4096
    device: str = "cpu"
    init: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["heads"] = list(self.heads)
        data["dist"] = str(self.dist)
        data["layers"] = len(self.heads)
        data["warmup_fraction"] = WARMUP_FRACTION
        data["schedule"] = "linear warm-up, cosine decay"
        data["optimizer"] = "AdamW"
        return data


def head_budget(heads: tuple[int, ...], layers: int | None) -> tuple[int, ...]:
    """Heads per layer: a single count repeats over ``layers``; otherwise the lengths must agree."""
    if any(h < 0 for h in heads) or sum(heads) == 0:
        raise TrainError(f"heads per layer must be ≥ 0 and not all 0, got {','.join(map(str, heads))}")
    if layers is None:
        return heads
    if len(heads) == 1:
        return heads * layers
    if len(heads) != layers:
        raise TrainError(f"--heads {','.join(map(str, heads))} gives {len(heads)} layers, but --layers is {layers}")
    return heads
