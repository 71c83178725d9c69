"""The compiled model (infoflow_dsl/transformer/model.py) against a slow loop-based reference and by hand-built
weights. Its config (config.py), masks (masks.py) and sparse products (sparse.py) have their own test files."""

from __future__ import annotations

import math

import pytest
import torch
from handmade_models import (
    TOKEN_SOURCES,
    random_config,
    random_model,
    random_tensors,
    random_token_model,
    reference_forward,
    reference_streams,
    token_model,
    token_program,
)

from infoflow_dsl.transformer.config import ModelConfig
from infoflow_dsl.transformer.model import CompiledTransformer


def inputs(batch: int, length: int, d: int = 2, seed: int = 1, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(batch, length, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("output_shape", [[], [1], [3]])
def test_forward_shapes(output_shape: list[int], device: str) -> None:
    model = random_model(output_shape=output_shape).to(device)
    for length in (1, 3, model.T):
        y = model(inputs(4, length))
        assert y.shape == ((4,) if output_shape == [] else (4, output_shape[0]))
        assert y.dtype == torch.float64 and y.device.type == device
        assert torch.isfinite(y).all()
        streams = model.residual_stream(inputs(4, length))
        assert len(streams) == len(model.config["layers"]) + 1
        assert all(s.shape == (4, length + 1, model.d_model) for s in streams)


def test_state_dict_names_and_parameters() -> None:
    model = random_model()
    assert list(model.state_dict()) == list(ModelConfig.from_json(model.config).expected_shapes())
    names = {name for name, _ in model.named_parameters()}
    assert "pos_embed.W_pos" not in names  # a fixed code: a buffer, not a parameter
    assert names == set(model.state_dict()) - {"pos_embed.W_pos"}
    assert not any(p.requires_grad for p in model.parameters())
    assert dict(model.named_buffers()).keys() == {"pos_embed.W_pos"}


# ---------------------------------------------------------------------------- against the slow reference


@pytest.mark.parametrize("output_shape", [[], [2]])
def test_matches_slow_reference_float64(output_shape: list[int], device: str) -> None:
    model = random_model(seed=3, output_shape=output_shape)
    on_device = random_model(seed=3, output_shape=output_shape).to(device)
    for length in (1, 2, 4, model.T):
        x = inputs(3, length, seed=length)
        ref_streams = reference_streams(model, x)
        for got, want in zip(on_device.residual_stream(x), ref_streams, strict=True):
            torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1e-12)
        torch.testing.assert_close(on_device(x).cpu(), reference_forward(model, x), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------- hand-designed weights


def max_model(t: int, beta: float, dtype: torch.dtype) -> CompiledTransformer:
    """One head: the readout token queries with a constant, keys and values read x[0]: y ~ max_t x(t)[0].
    Residual directions: 0 = x[0], 1 = constant 1, 2 = the answer, 3..4 = positional code."""
    config = {"T": t, "d": 1, "d_model": 5, "output_shape": [],
              "layers": [{"heads": [{"name": "max", "mask": []}]}]}
    z = torch.zeros
    w_e = z(2, 5)
    w_e[0, 0] = w_e[1, 1] = 1.0  # rows: x[0], the appended 1
    angles = torch.arange(1, t + 2, dtype=torch.float64) * 0.3
    w_pos = z(t + 1, 5, dtype=torch.float64)
    w_pos[:, 3], w_pos[:, 4] = torch.cos(angles), torch.sin(angles)
    w_q, w_k, w_v, w_o = z(1, 5, 1), z(1, 5, 1), z(1, 5, 1), z(1, 1, 5)
    w_q[0, 1, 0] = w_k[0, 0, 0] = w_v[0, 0, 0] = w_o[0, 0, 2] = 1.0
    w_u = z(5, 1)
    w_u[2, 0] = 1.0
    tensors = {
        "embed.W_E": w_e, "embed.W_E1": z(2, 0), "embed.b_E1": z(0), "embed.W_E2": z(0, 5),
        "embed.cls": torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0]), "pos_embed.W_pos": w_pos,
        "blocks.0.attn.W_Q": w_q, "blocks.0.attn.W_K": w_k, "blocks.0.attn.W_V": w_v, "blocks.0.attn.W_O": w_o,
        "blocks.0.attn.beta": torch.tensor([beta]),
        "blocks.0.mlp.W_in": z(5, 0), "blocks.0.mlp.b_in": z(0), "blocks.0.mlp.W_out": z(0, 5),
        "blocks.0.mlp.b_out": z(5),
        "unembed.W_U": w_u, "unembed.b_U": z(1),
    }
    return CompiledTransformer(config, tensors, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_sharp_attention_picks_the_maximum(dtype: torch.dtype, device: str) -> None:
    beta = 1e6
    model = max_model(t=16, beta=beta, dtype=dtype).to(device)
    x = torch.rand(64, 16, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 1
    for length in (1, 5, 16):
        y = model(x[:, :length]).double().cpu()
        true = x[:, :length, 0].max(dim=1).values
        # the Gibbs mean of the values lies within (T'-1) R / (e beta) below the maximum (R = 2 the range)
        bound = (length - 1) * 2.0 / (math.e * beta) + (1e-12 if dtype == torch.float64 else 1e-6)
        assert ((true - y) <= bound).all() and ((y - true) <= bound).all()
    # ties and near-ties with a small beta: exactly the softmax mean
    soft = max_model(t=3, beta=2.0, dtype=torch.float64)
    x = torch.tensor([[[0.5], [-1.0], [0.25]]], dtype=torch.float64)
    p = torch.softmax(2.0 * x[0, :, 0], dim=0)
    torch.testing.assert_close(soft(x), (p * x[0, :, 0]).sum().reshape(1), rtol=0, atol=1e-15)


def test_huge_beta_keeps_precision_in_float32() -> None:
    """With beta = 1e8 in float32, two keys 1e-6 apart are still told apart."""
    model = max_model(t=4, beta=1e8, dtype=torch.float32)
    x = torch.tensor([[[0.3], [0.300001], [0.1], [-0.2]]])
    assert abs(float(model(x)[0]) - 0.300001) < 1e-7


# ---------------------------------------------------------------------------- inputs


@pytest.mark.parametrize(("x", "message"), [
    (torch.zeros(2, 3), "rank 2"),
    (torch.zeros(2, 3, 2, 1), "rank 4"),
    (torch.zeros(2, 3, 5), "d = 2"),
    (torch.zeros(2, 7, 2), "exceeds the compiled maximum T = 6"),
    (torch.zeros(2, 0, 2), "length is 0"),
    (torch.zeros(2, 3, 2, dtype=torch.int64), "floating dtype"),
    (torch.zeros(2, 3, 2, dtype=torch.bool), "floating dtype"),
])
def test_bad_inputs_raise(x: torch.Tensor, message: str) -> None:
    model = random_model()
    with pytest.raises(ValueError, match=message):
        model(x)
    with pytest.raises(ValueError, match=message):
        model.residual_stream(x)


def test_non_tensor_input_raises() -> None:
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        random_model()([[[0.0, 0.0]]])


def test_exact_length_only() -> None:
    model = random_model(exact_length_only=True)
    assert model(inputs(2, 6)).shape == (2,)
    with pytest.raises(ValueError, match="exactly T = 6"):
        model(inputs(2, 5))


def test_min_length() -> None:
    config = random_config() | {"min_length": 3}
    model = CompiledTransformer(config, random_tensors(config))
    assert model(inputs(2, 3)).shape == (2,)
    with pytest.raises(ValueError, match="below the minimum length 3"):
        model(inputs(2, 2))


def test_inputs_are_cast_to_the_model_dtype() -> None:
    model32 = random_model(seed=2, dtype=torch.float32)
    model64 = random_model(seed=2, dtype=torch.float64)
    x = inputs(3, 5)
    y32 = model32(x)
    assert y32.dtype == torch.float32
    torch.testing.assert_close(y32.double(), model64(x), rtol=0, atol=1e-5)
    assert torch.equal(model32(x.half()), model32(x.half().float()))
    assert model64(x.float()).dtype == torch.float64


def test_batch_rows_are_independent(device: str) -> None:
    model = random_model(seed=4, output_shape=[2]).to(device)
    x = inputs(5, 4)
    rows = torch.cat([model(x[i : i + 1]) for i in range(5)])
    torch.testing.assert_close(model(x), rows, rtol=0, atol=1e-13)


# ---------------------------------------------------------------------------- residual stream, counts, devices


def test_residual_stream_is_consistent_with_forward() -> None:
    model = random_model(seed=6, output_shape=[3])
    x = inputs(4, 5)
    streams = model.residual_stream(x)
    assert torch.equal(model.readout(streams[-1]), model(x))
    h = streams[-1][:, -1]
    assert torch.equal(model(x), h @ model.unembed.W_U + model.unembed.b_U)


def test_parameter_counts() -> None:
    config = random_config(t=6, d=2, d_model=8)
    tensors = random_tensors(config, m_embed=3, e=3, v=2, ffn_widths=[4, 0, 5])
    heads = [7, 7, 0]
    want = (3 * 8 + 3 * 3 + 3 + 3 * 8 + 8) + sum(h * (8 * 3 * 2 + 8 * 2 + 2 * 8 + 1) for h in heads) \
        + sum(8 * m + m + m * 8 + 8 for m in (4, 0, 5)) + (8 + 1)
    model = CompiledTransformer(config, tensors)
    assert model.parameter_count() == want  # pos_embed.W_pos (7 x 8) is not counted
    assert model.nonzero_parameter_count() == want
    tensors["blocks.0.attn.W_Q"][2:5] = 0.0
    tensors["pos_embed.W_pos"][:] = 0.0
    model = CompiledTransformer(config, tensors)
    assert model.parameter_count() == want
    assert model.nonzero_parameter_count() == want - 3 * 8 * 3


def test_constructor_copies_its_tensors() -> None:
    config = random_config()
    tensors = random_tensors(config, ffn_widths=[4, 4, 4])
    model = CompiledTransformer(config, tensors, dtype=torch.float64)
    before = model(inputs(2, 3))
    tensors["embed.W_E"].add_(1.0)
    config["layers"][0]["heads"][0]["mask"] = [["key", "==", 1]]
    assert torch.equal(model(inputs(2, 3)), before)


def test_to_device_and_dtype(device: str) -> None:
    x = inputs(2, 4)
    ref = random_model(seed=7)(x)
    model = random_model(seed=7).to(device)
    assert model.device.type == device and model.pos_embed.W_pos.device.type == device
    torch.testing.assert_close(model(x).cpu(), ref, rtol=0, atol=1e-12)
    config = random_config()
    built = CompiledTransformer(config, random_tensors(config, seed=7), device=device, dtype=torch.float64)
    assert all(t.device.type == device for t in built.state_dict().values())
    torch.testing.assert_close(built(x).cpu(), ref, rtol=0, atol=1e-12)
    as32 = random_model(seed=7).to(torch.float32)
    assert as32.dtype == torch.float32 and as32(x).dtype == torch.float32


def test_fine_tuning_by_flipping_requires_grad() -> None:
    model = random_model(seed=8, dtype=torch.float32)
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = inputs(8, 6, dtype=torch.float32)
    loss0 = (model(x) ** 2).mean()
    loss0.backward()
    opt.step()
    assert (model(x) ** 2).mean() < loss0


# ---------------------------------------------------------------------------- layers without heads or units


def test_zero_heads_and_zero_widths() -> None:
    """FFN-only layers, FFN width 0 and an embedding without its ReLU block contribute exactly what they should."""
    model = random_model(seed=9, masks_per_layer=[[], []], m_embed=0, ffn_widths=[0, 0])
    x = inputs(2, 3)
    streams = model.residual_stream(x)
    for i in (1, 2):
        assert torch.equal(streams[i], streams[i - 1] + model.blocks[i - 1].mlp.b_out)
    xe = torch.cat([x, torch.ones(2, 3, 1, dtype=torch.float64)], dim=-1)
    assert torch.equal(streams[0][:, :3], xe @ model.embed.W_E + model.pos_embed.W_pos[:3])


# ---------------------------------------------------------------------------- token models (language v3)

TOKEN_KINDS = [pytest.param(token_output, per_token, id=f"{'token' if token_output else 'numeric'}-"
                            f"{'per-token' if per_token else 'sequence'}")
               for token_output in (True, False) for per_token in (True, False)]


def random_ids(batch: int, length: int, size: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, size, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(("token_output", "per_token"), TOKEN_KINDS)
def test_token_model_matches_the_slow_reference_at_every_length(token_output: bool, per_token: bool,
                                                               device: str) -> None:
    model = random_token_model(seed=5, token_output=token_output, per_token=per_token)
    on_device = random_token_model(seed=5, token_output=token_output, per_token=per_token).to(device)
    assert model.token_input and model.token_output == token_output and model.vocabulary.names == ("a", "b", "c", "d")
    for length in range(1, model.T + 1):
        ids = random_ids(3, length, 4, seed=length)
        for got, want in zip(on_device.residual_stream(ids), reference_streams(model, ids), strict=True):
            torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1e-12)
        y = on_device(ids).cpu()
        site = (3, length) if per_token else (3,)
        assert y.shape == (*site, 4) if token_output else y.shape == site
        torch.testing.assert_close(y, reference_forward(model, ids), rtol=0, atol=1e-12)


def test_token_embedding_is_the_one_hot_product_with_the_table() -> None:
    """h_tok = W_E[ids] + W_pos[:T'] is one_hot(ids) @ W_E + W_pos[:T'] (docs/design.md, "The compiled model")."""
    model = random_token_model(seed=2)
    ids = random_ids(5, 4, 4)
    one_hot = torch.nn.functional.one_hot(ids, 4).to(torch.float64)  # (B, T', V)
    expected = one_hot @ model.embed.W_E + model.pos_embed.W_pos[:4]  # (B, T', D)
    torch.testing.assert_close(model.residual_stream(ids)[0][:, :4], expected, rtol=0, atol=1e-15)
    readout = (model.embed.cls + model.pos_embed.W_pos[4]).expand(5, -1)  # (B, D)
    torch.testing.assert_close(model.residual_stream(ids)[0][:, 4], readout, rtol=0, atol=0)


@pytest.mark.parametrize("name", list(TOKEN_SOURCES))
def test_hand_built_token_models_compute_their_programs(name: str) -> None:
    """Every hand-built token model against the reference evaluator, on every input of every length."""
    from infoflow_dsl.measure.tokens import every_sequence
    from infoflow_dsl.oracle.answers import answers
    from infoflow_dsl.oracle.evaluate import evaluate

    model, program = token_model(name), token_program(name)
    for length in range(1, program.length + 1):
        ids = every_sequence(program.vocabulary.size, length)
        y, want = model(ids), evaluate(program, ids)
        if program.token_output:
            assert torch.equal(answers(program, y), want)
        else:
            torch.testing.assert_close(y, want, rtol=0, atol=1e-15, equal_nan=True)


@pytest.mark.parametrize(("ids", "error", "message"), [
    (torch.zeros(2, 3), ValueError, "integer dtype"),
    (torch.zeros(2, 3, dtype=torch.bool), ValueError, "integer dtype"),
    (torch.zeros(2, 3, 1, dtype=torch.int64), ValueError, "rank 3"),
    (torch.zeros(3, dtype=torch.int64), ValueError, "rank 1"),
    (torch.zeros(2, 0, dtype=torch.int64), ValueError, "length is 0"),
    (torch.zeros(2, 7, dtype=torch.int64), ValueError, "exceeds the compiled maximum T = 6"),
    (torch.tensor([[0, 4]]), ValueError, r"0\.\.3 .*got ids from 0 to 4"),
    (torch.tensor([[-1, 2]]), ValueError, r"0\.\.3"),
    ([[0, 1]], TypeError, "torch.Tensor of token ids"),
])
def test_bad_token_inputs_raise(ids: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        random_token_model()(ids)


def test_token_ids_of_any_integer_dtype_are_read_as_int64() -> None:
    model = random_token_model(seed=4)
    ids = random_ids(2, 5, 4)
    assert torch.equal(model(ids.to(torch.int32)), model(ids))
    assert torch.equal(model(ids.to(torch.uint8)), model(ids))


def test_token_model_attributes_and_repr() -> None:
    model = random_token_model(values=(1.0, 2.0, 3.5, 4.0), names=("1", "2", "3.5", "4"), token_output=False)
    assert model.vocabulary.values == (1.0, 2.0, 3.5, 4.0) and not model.token_output and model.d == 4
    assert model.embed.W_E.shape == (4, model.d_model) and model.d_mlp_embedding == 0
    assert 'vocabulary={1, 2, 3.5, 4}' in repr(model)
    vectors = random_model()
    assert vectors.vocabulary is None and not vectors.token_input and not vectors.token_output
