"""Directions that always hold the same value share one coordinate (compiler/superposition/duplicates.py):
found from the writers alone, checked here on the streams: after folding, the kept direction
holds the value both held, the duplicate holds 0, and the output is the plain model's."""

from __future__ import annotations

import pytest
import torch
from shipped_models import EXAMPLES_DIR, model_inputs_of

import infoflow_dsl as ifl
from infoflow_dsl.compiler.superposition.duplicates import merged
from infoflow_dsl.compiler.tokens.builder import TokenCircuitBuilder

torch.set_num_threads(1)


def _named_twice(self: TokenCircuitBuilder, name: str, values: tuple[float, ...]) -> str:
    """The builder's token columns before they were kept one per value (stop 57): a token
    indicator x(t) == v is its own column beside the one-hot x=v, as Tracr's sort had them."""
    self.token_columns.setdefault(name, values)
    return self.direction(name)


def test_tracr_sorts_token_indicators_named_twice_are_folded_into_one_with_the_same_streams(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TokenCircuitBuilder, "token_column", _named_twice)
    plain = ifl.compile(EXAMPLES_DIR / "tracr" / "sort.iflow", eps=1e-3, dtype=torch.float64, samples=0)
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in plain.state_dict().items()}
    folded, aliases = merged(tensors, plain.card)
    labels = plain.config["residual_labels"]
    assert {labels[j]: labels[i] for j, i in aliases.items()}["tok:[x(t) == 2]"] == "x=2"
    model = ifl.CompiledTransformer(plain.card, folded, dtype=torch.float64)
    x = model_inputs_of("tracr/sort", 64, 3, 6)
    with torch.no_grad():
        for wide, narrow in zip(plain.residual_stream(x), model.residual_stream(x), strict=True):
            for j, i in aliases.items():
                assert torch.equal(wide[..., i], wide[..., j])  # the plain model holds them equal
                assert torch.equal(narrow[..., i], wide[..., i]) and not narrow[..., j].any()
        assert float((model(x) - plain(x)).abs().max()) <= 1e-12
