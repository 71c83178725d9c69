"""Embedding columns the others span share their coordinates (compiler/superposition/spans.py):
found from the embedding's tables alone, checked here on the streams (the folded direction's
value is the combination of the ones it was folded onto, at every token row and stage it is
alive), on the outputs, and through ``compile --residual`` below what ``disguise --compress``
reaches, exact against the reference."""

from __future__ import annotations

import torch
from compiled import dense_float64, every_input, plain_float64

import infoflow_dsl as ifl
from infoflow_dsl.compiler.compress import drop_unread_writes, lifetimes
from infoflow_dsl.compiler.superposition import features_alive
from infoflow_dsl.compiler.superposition.spans import combination, embedding_columns, spanned
from infoflow_dsl.transformer.model import CompiledTransformer

torch.set_num_threads(1)

#: sort_unique over five tokens: the width's key side reads thresholds [x(r) < v] of the token,
#: which the token's own indicators x = v (read by the final fetch) span
SORT_UNIQUE = ("input x : token {1, 2, 3, 4, 5}\nlength T = 6\n"
               "target(t) = x(argmin_<s> |(sum_<r> [x(r) < x(s)]) - (t - 1)|)\n")
#: Tracr's sort over three tokens: the final fetch's query reads the position's steps, one more
#: column than the T positions need beside ``one``
SORT = ("input x : token {1, 2, 3}\nlength T = 5\n"
        "let rank(s) = sum_<r> [x(r) < x(s) or (x(r) == x(s) and r < s)]\n"
        "target(t) = x(argmin_<s> |rank(s) - (t - 1)|)\n")


def test_a_tokens_thresholds_fold_onto_its_indicators_with_the_same_streams() -> None:
    """Every folded column j holds Σ a_i·h_i in the plain model at every token row of every
    stage before the FFN that erases it; the folded model leaves every other direction's stream
    as it was, holds 0 in j, and answers as the plain model does; F drops by the folds."""
    plain = plain_float64(SORT_UNIQUE)
    tensors, config = dense_float64(plain), plain.card
    labels = list(config.labels)
    folded, spans = spanned(tensors, config)
    names = {labels[j] for j in spans.terms}
    assert "tok:[x(t) < 3]" in names  # [x < 3] = [x = 1] + [x = 2]: the indicators span it
    model = CompiledTransformer(config, folded, dtype=torch.float64)
    x = every_input(5, 4)
    kept = [i for i in range(len(labels)) if i not in spans.terms]
    with torch.no_grad():
        wide, narrow = plain.residual_stream(x), model.residual_stream(x)
        for layer, (before, after) in enumerate(zip(wide, narrow, strict=True)):  # after the embedding, each layer
            assert float((before[..., kept] - after[..., kept]).abs().max()) <= 1e-12  # readers changed, writers not
            for j, terms in spans.terms.items():
                assert not after[..., j].any()
                if 2 * layer < spans.ends[j]:  # the stream after layer l - 1 is stage 2l's
                    formed = sum(a * before[:, :-1, i] for i, a in terms)  # the token rows
                    assert torch.equal(before[:, :-1, j], formed), (labels[j], layer)
        assert float((model(x) - plain(x)).abs().max()) <= 1e-12
    assert features_alive(folded, config) < features_alive(tensors, config)


def test_the_columns_of_a_per_token_model_leave_out_the_rows_only_its_readout_adds() -> None:
    plain = plain_float64(SORT_UNIQUE)
    tensors = dense_float64(plain)
    vocabulary, positions = tensors["embed.W_E"].shape[0], tensors["pos_embed.W_pos"].shape[0]
    assert embedding_columns(tensors, per_token=True).shape == (vocabulary + positions - 1, plain.d_model + 1)
    assert embedding_columns(tensors, per_token=False).shape == (vocabulary + positions + 1, plain.d_model + 1)


def test_a_combination_is_kept_only_where_it_is_exact_in_binary_fractions() -> None:
    basis = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    target = torch.tensor([0.5, 2.0, 0.0], dtype=torch.float64)
    columns = torch.cat([basis, target[:, None]], dim=1)
    assert combination(columns, 3, [0, 1]) == ((0, 0.5), (1, 2.0))
    columns[0, 3] = 0.1  # 1/10 is no binary fraction: the fold would round
    assert combination(columns, 3, [0, 1]) is None
    columns[0, 3], columns[2, 3] = 0.5, 1.0  # outside the basis's span
    assert combination(columns, 3, [0, 1]) is None


def test_the_folded_columns_take_sort_below_what_compress_reaches_exactly() -> None:
    """Tracr's sort over three tokens: its peak (the final fetch: the rank's steps, the position's
    steps its query reads, the token's indicators it copies) holds no categorical group worth
    superposing, but one position step the others and ``one`` span; compile --residual goes
    below F with it and is exact on every input up to length 5."""
    plain = plain_float64(SORT)
    alive = features_alive(dense_float64(plain), plain.card)
    model = ifl.compile(ifl.parse_program(SORT, "sort.iflow"), samples=0, dtype="float64", residual=alive - 1)
    record = model.config["superposition"]
    assert model.d_model < alive == record["features_alive"]
    assert record["spanned"] and record["features_alive_folded"] < alive
    program = ifl.parse_program(SORT, "sort.iflow")
    for n in range(1, 6):
        x = every_input(3, n)
        with torch.no_grad():
            assert torch.equal(model(x).argmax(-1).double(), ifl.evaluate(program, x))


def test_tight_lifetimes_of_the_supporters_cover_the_folded_column() -> None:
    """A column is folded only onto directions alive at least as long (else a reader of j after
    an eraser of i would read another feature)."""
    plain = plain_float64(SORT)
    tensors, config = dense_float64(plain), plain.card
    _, spans = spanned(tensors, config)
    tight = dict(tensors)
    drop_unread_writes(tight, len(list(config.labels)), len(config.layers))
    ends = {f.index: f.end for f in lifetimes(tight, list(config.labels), len(config.layers))}
    assert spans.terms
    for j, terms in spans.terms.items():
        assert all(ends[i] >= ends[j] for i, _ in terms)
