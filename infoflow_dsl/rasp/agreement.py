"""A compiled model of a RASP program against RASP's own evaluator, position by position.

Where the evaluator's output is None (an Aggregate that selects nothing and has no default) or
the evaluator raises (a categorical Aggregate of strings that selects several positions: a
mean of strings), the program's output is undefined there and nothing is compared; the
counts say how many such positions and sequences were skipped.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .evaluation import evaluate
from .expressions import RASPExpr


@dataclass(frozen=True)
class Agreement:
    """How a model's outputs compare with RASP's evaluator over some inputs."""

    positions: int          # positions compared
    wrong_tokens: int       # token outputs that differ
    worst_error: float      # largest |model − evaluator| over numeric outputs
    undefined: int          # positions where the evaluator gives None
    raised: int             # sequences on which the evaluator raises
    first_wrong: tuple[tuple[Any, ...], int, Any, Any] | None = None  # (input, position, model, evaluator)

    def exact(self, eps: float) -> bool:
        return self.wrong_tokens == 0 and self.worst_error <= eps


def every_input(vocabulary: Sequence[Hashable], longest: int) -> Iterator[tuple[Hashable, ...]]:
    """Every sequence of lengths 1..``longest``."""
    for n in range(1, longest + 1):
        yield from itertools.product(vocabulary, repeat=n)


def random_inputs(vocabulary: Sequence[Hashable], length: int, count: int, seed: int = 0) -> list[tuple[Hashable, ...]]:
    chooser = random.Random(seed)
    return [tuple(chooser.choice(list(vocabulary)) for _ in range(length)) for _ in range(count)]


def agreement(rasp_program: RASPExpr, model: Any, program: Any, inputs: Sequence[Sequence[Hashable]],
              evaluator: Callable[[Any, list[Any]], list[Any]] = evaluate) -> Agreement:
    """``model`` (compiled from ``program`` = ``from_rasp(rasp_program, ...)``) on ``inputs``
    against ``rasp_program`` evaluated by ``evaluator`` (this package's; Tracr's own
    ``rasp.evaluate`` where the benchmark runs Tracr beside it)."""
    from ..oracle.answers import decode
    from ..oracle.tokens import encode

    positions = wrong = undefined = raised = 0
    worst, first = 0.0, None
    by_length: dict[int, list[tuple[Hashable, ...]]] = {}
    for sequence in inputs:
        by_length.setdefault(len(sequence), []).append(tuple(sequence))
    for group in by_length.values():
        with torch.no_grad():
            outputs = decode(program, model(encode(program, [list(s) for s in group])))
        for sequence, got in zip(group, outputs, strict=True):
            try:
                want = evaluator(rasp_program, list(sequence))
            except Exception:  # the evaluator's own failure: the output is undefined on this input
                raised += 1
                continue
            for index, (g, w) in enumerate(zip(got, want, strict=True)):
                if w is None:
                    undefined += 1
                    continue
                positions += 1
                if program.token_output:
                    if g != w:
                        wrong += 1
                        first = first or (sequence, index, g, w)
                else:
                    error = abs(float(g) - float(w)) if g is not None else float("inf")
                    if error > worst:
                        worst = error
                        first = (sequence, index, g, w) if error > 0 else first
    return Agreement(positions, wrong, worst, undefined, raised, first)
