"""Attention over repeated rows (repeated_rows.py) against the plain computations.

Acceptance: the distinct rows of a sequence, with their counts, are its rows exactly (as a
multiset); attention over them is the softmax over all T' rows to 1e-12 (float64, β up to 1e6);
a model whose heads see repeated keys computes what the loop-based reference computes, its
readout-only forward has the bits of its full one, and training (autograd) keeps the fused
kernel; at the real thresholds a compiled min_pairwise takes the path on corners and not on
random inputs, and agrees with the fused kernel to float32 rounding.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import compiled
import pytest
import torch
from handmade_models import random_model, reference_forward
from hypothesis import given, settings
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.transformer import repeated_rows
from infoflow_dsl.transformer.repeated_rows import distinct_attention, distinct_keys, distinct_rows


@contextmanager
def always_distinct() -> Iterator[None]:
    """Look for repeated rows in every sequence, however short, and use them however many."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(repeated_rows, "MIN_LENGTH", 1)
        patch.setattr(repeated_rows, "SPARSITY", 1)
        yield


def pooled(count: int, length: int, pool: int, width: int, seed: int, dtype: torch.dtype = torch.float64
           ) -> torch.Tensor:
    """``count`` sequences of ``length`` rows, each row drawn from ``pool`` random rows: (count, length, width)."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randn(pool, width, generator=generator, dtype=dtype)
    return rows[torch.randint(0, pool, (count, length), generator=generator)]


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 3), length=st.integers(1, 40), pool=st.integers(1, 8), width=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_distinct_rows_are_the_rows_with_their_counts(count: int, length: int, pool: int, width: int,
                                                      seed: int) -> None:
    rows = pooled(count, length, pool, width, seed)
    with always_distinct():
        distinct = distinct_rows(rows)
    assert distinct is not None
    for sequence, kept, counts in zip(rows, distinct.rows, distinct.counts, strict=True):
        real = counts > 0
        assert bool((kept[~real] == kept[0]).all())  # padding repeats the first row
        assert float(counts.sum()) == length
        for row in torch.unique(sequence, dim=0):
            occurrences = int((sequence == row).all(dim=-1).sum())
            assert float(counts[(kept == row).all(dim=-1)].sum()) == occurrences
        assert bool((kept[real][:, None] == sequence[None]).all(dim=-1).any(dim=1).all())  # no row made up


def test_distinct_rows_only_when_few_and_long() -> None:
    length = repeated_rows.MIN_LENGTH
    few = pooled(2, length, length // repeated_rows.SPARSITY, 3, seed=1)
    distinct = distinct_rows(few)
    assert distinct is not None and distinct.rows.shape[1] <= length // repeated_rows.SPARSITY
    assert distinct_rows(pooled(2, length, 10 * length, 3, seed=1)) is None  # nearly all distinct
    assert distinct_rows(few[:, :length - 1]) is None  # too short to pay for the sort
    mixed = torch.cat([few[:1], pooled(1, length, 10 * length, 3, seed=2)])
    assert distinct_rows(mixed) is None  # one sequence with many rows decides for the call


@settings(max_examples=40, deadline=None)
@given(heads=st.integers(1, 3), queries=st.integers(1, 6), length=st.integers(1, 30), pool=st.integers(1, 5),
       beta=st.sampled_from([0.0, 1.0, 30.0, 1e6]), seed=st.integers(0, 2**16))
def test_distinct_attention_is_the_softmax_over_every_row(heads: int, queries: int, length: int, pool: int,
                                                          beta: float, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    q = beta * torch.randn(2, heads, queries, 3, generator=generator, dtype=torch.float64)  # (B, H, N, E)
    kv = pooled(2 * heads, length, pool, 5, seed + 1).view(2, heads, length, 5)  # (B, H, T', E+V)
    k, v = kv[..., :3], kv[..., 3:]
    with always_distinct():
        keys = distinct_keys(q, k, v, None)
    assert keys is not None
    expected = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v  # (B, H, N, V)
    torch.testing.assert_close(distinct_attention(q, keys), expected, rtol=0, atol=1e-12)


def test_not_under_a_mask_or_autograd() -> None:
    q, k, v = (torch.randn(1, 1, 4, 2) for _ in range(3))
    with always_distinct():
        assert distinct_keys(q, k, v, None) is not None
        assert distinct_keys(q, k, v, torch.ones(1, 4, 4, dtype=torch.bool)) is None
        assert distinct_keys(q.requires_grad_(), k, v, None) is None
        with torch.no_grad():
            assert distinct_keys(q, k, v, None) is not None


def repeating_model() -> ifl.CompiledTransformer:
    """A random unmasked float64 model without position embeddings: repeated tokens give its
    heads repeated keys and values."""
    model = random_model(seed=4, masks_per_layer=[[[], []], [[]]], t=12)
    with torch.no_grad():
        model.pos_embed.W_pos.zero_()
    return model


def test_a_model_over_repeated_keys_matches_the_loop_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    model = repeating_model()
    x = pooled(5, 12, 3, 2, seed=7)  # (B, T, d): three distinct tokens
    calls: list[int] = []
    real = repeated_rows.distinct_attention
    monkeypatch.setattr(repeated_rows, "distinct_attention", lambda q, keys: calls.append(1) or real(q, keys))
    with always_distinct(), torch.no_grad():
        y = model(x)
        streams = model.residual_stream(x)
    assert calls
    torch.testing.assert_close(y, reference_forward(model, x), rtol=0, atol=1e-12)
    assert torch.equal(model.readout(streams[-1]), y)  # the readout row alone: the same bits


@pytest.fixture(scope="module")
def long_min_pairwise() -> ifl.CompiledTransformer:
    return compiled.model("min_pairwise", 1e-3, "float32", length=repeated_rows.MIN_LENGTH)


def test_corners_of_a_long_sequence_take_the_distinct_rows(long_min_pairwise: ifl.CompiledTransformer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    model = long_min_pairwise
    program = compiled.program("min_pairwise", repeated_rows.MIN_LENGTH)
    corners = model_inputs(program, 0, seed=0, corners=6)  # the first repeat one token, the rest 2^4 tokens
    random = model_inputs(program, 4, seed=0, corners=0)
    used: list[int] = []
    real = repeated_rows.distinct_attention
    monkeypatch.setattr(repeated_rows, "distinct_attention", lambda q, keys: used.append(1) or real(q, keys))
    with torch.no_grad():
        model(random.float())
        assert not used
        y = model(corners.float())
        assert used
        monkeypatch.setattr(repeated_rows, "MIN_LENGTH", 10**9)
        fused = model(corners.float())
    torch.testing.assert_close(y, fused, rtol=0, atol=1e-5)
    truth = ifl.evaluate(program, corners)
    assert float((y.double() - truth).abs().max()) <= model.config["eps"]
