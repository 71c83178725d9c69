"""The stable-sort idiom written in RASP (our own programs, after issue 65): a key x + c·i made
by a SequenceMap, compared by a selector, exact at N and 2N (the code before the fix answered
93-98% of these inputs wrong). The expected answers are Tracr's semantics written out here in
Python, independent of the evaluator."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch

import infoflow_dsl as ifl
from infoflow_dsl import rasp
from infoflow_dsl.rasp.library import make_sort_unique

VOCABULARY = [0, 1, 2, 3]


def _keys(c: float) -> rasp.SOp:
    return rasp.SequenceMap(lambda x, i: x + c * i, rasp.tokens, rasp.indices)


def sorted_tokens(c: float) -> rasp.SOp:
    return make_sort_unique(rasp.tokens, _keys(c))


def smaller_keys(c: float) -> rasp.SOp:
    keys = _keys(c)
    return rasp.numerical(rasp.SelectorWidth(rasp.Select(keys, keys, rasp.Comparison.LT)))


def expected(kind: str, c: float, tokens: list[int]) -> list[int]:
    """Tracr's answer: the count of smaller keys, or the token whose key has i smaller ones."""
    keys = [x + c * i for i, x in enumerate(tokens)]
    counts = [sum(1 for k in keys if k < q) for q in keys]
    if kind == "width":
        return counts
    return [tokens[counts.index(i)] for i in range(len(tokens))]


BUILDERS: dict[str, Callable[[float], rasp.SOp]] = {"sort": sorted_tokens, "width": smaller_keys}


@pytest.mark.parametrize("length", [5, 10])
@pytest.mark.parametrize(("kind", "c"), [("sort", 0.3), ("width", 0.1), ("width", 1e-10)])
def test_a_sort_key_is_exact_at_n_and_2n(kind: str, c: float, length: int) -> None:
    program = ifl.from_rasp(BUILDERS[kind](c), VOCABULARY, length, name=f"{kind}_{c}")
    model = ifl.compile(program, samples=0)
    inputs = [list(row) for size in range(1, 5) for row in itertools.product(range(4), repeat=size)]
    inputs += torch.randint(0, 4, (100, length), generator=torch.Generator().manual_seed(0)).tolist()
    for size in sorted({len(row) for row in inputs}):
        ids = torch.tensor([row for row in inputs if len(row) == size])
        want = torch.tensor([expected(kind, c, [VOCABULARY[i] for i in row]) for row in ids.tolist()])
        output = model(ids)
        if program.token_output:
            want = torch.tensor([[VOCABULARY.index(v) for v in row] for row in want.tolist()])
            assert torch.equal(output.argmax(-1).reshape(want.shape), want)
        else:
            error = (output.double().reshape(want.shape) - want).abs().max()
            assert float(error) <= model.config["a_priori_bound"]
        assert torch.equal(torch.as_tensor(ifl.evaluate(program, ids)).reshape(want.shape).to(want.dtype), want)
