"""Weights held sparse and the ReLU blocks' sparse products (infoflow_dsl/transformer/sparse.py): which
matrices are held sparse, the CSR products against the dense ones, and a held-sparse model against
its dense copy, bit for bit."""

from __future__ import annotations

import compiled
import pytest
import torch
from handmade_models import random_model

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.transformer import sparse as sparse_module
from infoflow_dsl.transformer.io import model_from_bytes, model_to_bytes
from infoflow_dsl.transformer.model import CompiledTransformer
from infoflow_dsl.transformer.sparse import (
    RELU_MATRICES,
    holds_sparse,
    nonzero_entries,
    relu_block,
    sparse_nonzero,
    sparse_weights,
)


def test_only_large_very_sparse_relu_matrices_are_held_sparse() -> None:
    size = sparse_module.SPARSE_HOLD_SIZE
    rows = 1024
    columns = size // rows
    assert holds_sparse("blocks.0.mlp.W_in", (rows, columns), size // 20)
    assert holds_sparse("blocks.12.mlp.W_out", (columns, rows), 1)
    assert holds_sparse("embed.W_E1", (rows, columns), 0) and holds_sparse("embed.W_E2", (columns, rows), 7)
    assert not holds_sparse("blocks.0.mlp.W_in", (rows, columns), size // 10 + 1)  # 10% dense
    assert not holds_sparse("blocks.0.mlp.W_in", (rows, columns - 1), 1)  # one column under the size
    for other in ("blocks.0.attn.W_Q", "embed.W_E", "unembed.W_U", "blocks.0.mlp.b_in", "xblocks.0.mlp.W_in"):
        assert not holds_sparse(other, (rows, columns), 1)


HELD_SPARSE_PROGRAMS = ["min_pairwise", "intrinsic_3", "nearest_neighbour", "tok_nearest_earlier", "causal_similarity"]


def _dense_copy(model: CompiledTransformer) -> CompiledTransformer:
    tensors = {name: t.to_dense() if t.is_sparse else t for name, t in model.state_dict().items()}
    return CompiledTransformer(model.config, tensors, dtype=model.dtype, sparse=False)


@pytest.mark.parametrize("name", HELD_SPARSE_PROGRAMS)
def test_a_model_holding_its_relu_matrices_sparse_computes_the_bits_of_the_dense_one(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the size threshold lowered so that table programs qualify: the compile holds exactly
    the ReLU matrices under 10% dense sparse (counted on the dense copy), outputs, hooks' values
    and counts equal the dense model's bit for bit, and the file is the same bytes."""
    program = compiled.program(name)
    expected_bytes = model_to_bytes(ifl.compile(program, eps=1e-3, dtype="float32", samples=0))
    monkeypatch.setattr(sparse_module, "SPARSE_HOLD_SIZE", 64)
    held = ifl.compile(program, eps=1e-3, dtype="float32", samples=0)
    dense = _dense_copy(held)
    sparse_names = {n for n, t in held.state_dict().items() if t.is_sparse}
    qualifying = {n for n, t in dense.state_dict().items() if RELU_MATRICES.match(n) and t.numel() >= 64
                  and int(torch.count_nonzero(t)) < 0.1 * t.numel()}
    assert sparse_names == qualifying and sparse_names, sorted(sparse_names)
    assert not any(t.is_sparse for t in dense.state_dict().values())
    x = model_inputs(program, 48, seed=2)
    with torch.no_grad():
        assert held(x).numpy().tobytes() == dense(x).numpy().tobytes()
        for mine, theirs in zip(held.residual_stream(x), dense.residual_stream(x), strict=True):
            assert torch.equal(mine, theirs)
    assert held.nonzero_parameter_count() == dense.nonzero_parameter_count()
    assert held.parameter_count() == dense.parameter_count() and held.d_mlp == dense.d_mlp
    assert model_to_bytes(held) == model_to_bytes(dense) == expected_bytes
    assert model_to_bytes(held, dense=True) == model_to_bytes(dense, dense=True)
    for data in (model_to_bytes(held), model_to_bytes(held, dense=True)):  # either file: held sparse again
        loaded = model_from_bytes(data)
        assert {n for n, t in loaded.state_dict().items() if t.is_sparse} == sparse_names
        with torch.no_grad():
            assert torch.equal(loaded(x), held(x))


def test_weights_held_sparse_refuse_gradients_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse_module, "SPARSE_HOLD_SIZE", 64)
    held = ifl.compile(compiled.program("min_pairwise"), eps=1e-2, samples=0)
    held.blocks[0].mlp.W_in.requires_grad_(True)
    with pytest.raises(ValueError, match=r"held sparse are frozen.*sparse=False"):
        held(model_inputs(compiled.program("min_pairwise"), 2, seed=0))


def _relu_weights(rows: int, width: int, out: int, density: float, seed: int) -> tuple[torch.Tensor, ...]:
    """A ReLU block's (w_in, b_in, w_out) in float64, each entry nonzero with probability ``density``."""
    generator = torch.Generator().manual_seed(seed)

    def sparse_random(*shape: int) -> torch.Tensor:
        values = torch.randn(*shape, generator=generator, dtype=torch.float64)
        return values * (torch.rand(*shape, generator=generator, dtype=torch.float64) < density)

    return sparse_random(rows, width), sparse_random(width), sparse_random(width, out)


@pytest.mark.parametrize("density", [0.02, 0.5])
def test_relu_block_is_the_dense_formula_in_either_product(density: float) -> None:
    """relu(h w_in + b_in) w_out: by CSR copies when under SPARSE_DENSITY nonzero, else dense;
    either way the formula, and the CSR copies hold the nonzero entries only."""
    w_in, b_in, w_out = _relu_weights(6, 300, 5, density, seed=1)
    h = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    owner = torch.nn.Module()
    got = relu_block(owner, h, w_in, b_in, w_out)
    torch.testing.assert_close(got, torch.relu(h @ w_in + b_in) @ w_out, rtol=0, atol=1e-12)
    products = sparse_weights(owner, w_in, b_in, w_out)
    assert (products is not None) == (density < sparse_module.SPARSE_DENSITY)
    if products is not None:
        reads, writes = products.reads.tolist(), products.writes.tolist()
        assert reads == [i for i in range(6) if w_in[i].any()] and writes == [j for j in range(5) if w_out[:, j].any()]
        assert torch.equal(products.w_in_t.to_dense(), torch.cat([w_in[reads], b_in[None]]).T)  # (M, k + 1)
        assert torch.equal(products.w_out_t.to_dense(), w_out[:, writes].T)  # (j, M)
        assert products.w_in_t.values().numel() == nonzero_entries(w_in) + nonzero_entries(b_in)


@pytest.mark.parametrize("density", [0.02, 0.5])
def test_an_accelerators_chunks_give_the_cpus_bits(density: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU cuts the block's rows into chunks of HIDDEN_CHUNK hidden activations (many here), an
    accelerator into DEVICE_HIDDEN_CHUNK (one): the same outputs (run here on the CPU with the
    accelerator's size). The CSR products sum each row's terms in one order whatever the chunk:
    the same bits; a dense product's blocking follows its row count: the same to rounding."""
    assert sparse_module.hidden_chunk(torch.device("cpu")) == sparse_module.HIDDEN_CHUNK
    assert sparse_module.hidden_chunk(torch.device("cuda")) == sparse_module.DEVICE_HIDDEN_CHUNK
    w_in, b_in, w_out = _relu_weights(6, 300, 5, density, seed=3)
    h = torch.randn(8, 1000, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    assert 8 * 1000 * 300 > 4 * sparse_module.HIDDEN_CHUNK  # at least four chunks on the CPU
    on_cpu = relu_block(torch.nn.Module(), h, w_in, b_in, w_out)
    monkeypatch.setattr(sparse_module, "hidden_chunk", lambda device: sparse_module.DEVICE_HIDDEN_CHUNK)
    one_chunk = relu_block(torch.nn.Module(), h, w_in, b_in, w_out)
    if density < sparse_module.SPARSE_DENSITY:
        assert torch.equal(one_chunk, on_cpu)
    torch.testing.assert_close(one_chunk, on_cpu, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_the_products_over_touched_directions_are_the_full_csr_products_bit_for_bit(seed: int) -> None:
    """Dropping the directions no unit reads or writes keeps every nonzero term in its order:
    the same bits as CSR products over the whole stream (the products before the cut)."""
    w_in, b_in, w_out = _relu_weights(40, 300, 30, 0.01, seed=seed)
    w_in[::3] = 0.0  # directions nobody reads or writes
    w_out[:, 1::4] = 0.0
    h = torch.randn(5, 7, 40, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    flat = h.reshape(35, 40)
    w_in_t = torch.cat([w_in, b_in[None]]).T.contiguous().to_sparse_csr()  # (M, D_in + 1)
    hidden = torch.sparse.mm(w_in_t, torch.cat([flat, flat.new_ones(35, 1)], dim=1).T.contiguous()).relu()
    whole = torch.sparse.mm(w_out.T.contiguous().to_sparse_csr(), hidden).T  # (N, D_out)
    assert torch.equal(relu_block(torch.nn.Module(), h, w_in, b_in, w_out).reshape(35, 30), whole)


def test_relu_block_taps_its_hidden_units_and_uses_what_the_tap_returns() -> None:
    w_in, b_in, w_out = _relu_weights(6, 40, 5, 0.05, seed=3)
    h = torch.randn(2, 3, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    seen: dict[str, torch.Tensor] = {}

    def tap(name: str, value: torch.Tensor) -> torch.Tensor:
        seen[name] = value
        return torch.zeros_like(value) if name == "mlp.hook_post" else value

    out = relu_block(torch.nn.Module(), h, w_in, b_in, w_out, tap, "mlp.")
    torch.testing.assert_close(seen["mlp.hook_pre"], h @ w_in + b_in, rtol=0, atol=1e-12)
    assert torch.equal(seen["mlp.hook_post"], torch.relu(seen["mlp.hook_pre"]))
    assert torch.equal(out, torch.zeros(2, 3, 5, dtype=torch.float64))


def test_sparse_nonzero_drops_explicit_zeros_and_keeps_the_values() -> None:
    dense = torch.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
    coo = torch.sparse_coo_tensor(torch.tensor([[0, 0, 1, 1], [0, 1, 0, 2]]), torch.tensor([0.0, 1.5, -2.0, 3.0]),
                                  (2, 3), check_invariants=True)
    for tensor in (dense, coo):
        held = sparse_nonzero(tensor)
        assert held.is_sparse and held.is_coalesced() and held.values().tolist() == [1.5, -2.0, 3.0]
        assert torch.equal(held.to_dense(), dense)
        assert nonzero_entries(tensor) == 3


def test_frozen_sparse_products_are_cached_per_version() -> None:
    model = random_model(seed=1, ffn_widths=[40, 0, 40])
    mlp = model.blocks[0].mlp
    mlp.W_in.data[:, 2:] = 0.0  # 5% nonzero together with W_out
    mlp.W_out.data[2:] = 0.0
    first = sparse_weights(mlp, mlp.W_in, mlp.b_in, mlp.W_out)
    assert first is not None and sparse_weights(mlp, mlp.W_in, mlp.b_in, mlp.W_out) is first
    with torch.no_grad():
        mlp.W_in.mul_(2.0)  # an in-place edit: a new version, new copies
    again = sparse_weights(mlp, mlp.W_in, mlp.b_in, mlp.W_out)
    assert again is not None and again is not first
    assert torch.equal(again.w_in_t.to_dense()[:, :-1], mlp.W_in[again.reads].T)
