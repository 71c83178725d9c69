"""The typed view of a model's config (infoflow_dsl/transformer/config.py): the fields it reads,
every fault it names, and the tensor shapes it implies."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from handmade_models import random_config, random_tensors, random_token_model
from programs import EXAMPLES_DIR

from infoflow_dsl.language.typed import Vocabulary
from infoflow_dsl.transformer.config import ModelConfig
from infoflow_dsl.transformer.io import load
from infoflow_dsl.transformer.model import CompiledTransformer


def _config_and_tensors():
    config = random_config(masks_per_layer=[[[], [["key", "<", "query"]]], []])
    return config, random_tensors(config, ffn_widths=[3, 2])


def test_the_view_holds_the_fields_with_their_defaults() -> None:
    config = random_config(masks_per_layer=[[[], [["key", "<", "query-1"], [2, "==", "last"]]], []], t=5, d=3,
                           d_model=7, output_shape=[2])
    spec = ModelConfig.from_json(config)
    assert (spec.T, spec.d, spec.d_model, spec.output_shape) == (5, 3, 7, (2,))
    assert (spec.min_length, spec.exact_length_only, spec.per_token) == (1, False, False)
    assert spec.head_names == (("h0.0", "h0.1"), ())
    assert spec.masks == (((), (("key", "<", "query-1"), (2, "==", "last"))), ())
    token = ModelConfig.from_json(config | {"output": "token", "min_length": 2, "exact_length_only": True})
    assert (token.per_token, token.min_length, token.exact_length_only) == (True, 2, True)


def test_a_model_reads_its_fields_through_the_view_and_keeps_the_dict_as_given() -> None:
    path = EXAMPLES_DIR / "previous_token.safetensors"
    model = load(path)
    spec = ModelConfig.from_json(model.config)
    assert model.spec == spec
    assert (model.T, model.d, model.d_model, model.output_shape, model.per_token, model.min_length) == (
        spec.T, spec.d, spec.d_model, spec.output_shape, spec.per_token, spec.min_length)
    assert any(mask for layer in spec.masks for mask in layer)  # a previous-token head: key == query-1
    stored = json.loads(path.read_bytes()[8:8 + int.from_bytes(path.read_bytes()[:8], "little")])
    assert model.config == json.loads(stored["__metadata__"]["infoflow"])


def test_expected_shapes_name_every_tensor_with_free_widths() -> None:
    spec = ModelConfig.from_json(random_config(masks_per_layer=[[[], []], []], t=4, d=2, d_model=6))
    shapes = spec.expected_shapes()
    assert shapes["pos_embed.W_pos"] == (5, 6) and shapes["embed.W_E"] == (3, 6)
    assert shapes["blocks.0.attn.W_Q"] == (2, 6, "E_0") and shapes["blocks.1.attn.W_O"] == (0, "V_1", 6)
    assert shapes["blocks.1.mlp.W_in"] == (6, "M_1") and shapes["unembed.W_U"] == (6, 1)
    assert len(shapes) == 6 + 2 * 9 + 2


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda c, t: t.pop("blocks.0.attn.W_K"), "missing tensor.*blocks.0.attn.W_K"),
    (lambda c, t: t.update({"blocks.2.attn.W_Q": torch.zeros(1)}), "unexpected tensor.*blocks.2.attn.W_Q"),
    (lambda c, t: t.update({"blocks.0.attn.W_Q": torch.zeros(2, 8, 4)}), "width E_0 is"),
    (lambda c, t: t.update({"blocks.0.attn.W_O": torch.zeros(3, 2, 8)}), r"blocks.0.attn.W_O has shape \[3, 2, 8\]"),
    (lambda c, t: t.update({"blocks.1.mlp.b_in": torch.zeros(5)}), "width M_1"),
    (lambda c, t: t.update({"pos_embed.W_pos": torch.zeros(6, 8)}), "pos_embed.W_pos"),
    (lambda c, t: t.update({"embed.cls": torch.zeros(8, 1)}), "expected rank 1"),
    (lambda c, t: c.pop("d_model"), "d_model"),
    (lambda c, t: c.update(T=0), "'T'.*positive integer"),
    (lambda c, t: c.update(output_shape=[2, 2]), "output_shape"),
    (lambda c, t: c.update(exact_length_only="yes"), "exact_length_only"),
    (lambda c, t: c.update(output="every"), "'readout' or 'token'"),
    (lambda c, t: c.update(layers={}), r"config\['layers'\] must be a list"),
    (lambda c, t: c["layers"][0]["heads"][1].pop("name"), "a string 'name'"),
    (lambda c, t: c["layers"][0]["heads"][1].update(mask="key < query"), "'mask' must be a list"),
    (lambda c, t: c["layers"][0]["heads"][1].update(mask=[["key", "<>", "query"]]), "unknown mask operator"),
    (lambda c, t: c["layers"][0]["heads"][1].update(mask=[["key", "<", "first"]]), "mask side"),
    (lambda c, t: c["layers"][0]["heads"][1].update(mask=[["key", "<", True]]), "mask side"),
    (lambda c, t: c["layers"][0]["heads"][1].update(mask=[["key", "<"]]), "left, op, right"),
    (lambda c, t: c["layers"][0].pop("heads"), "'heads'"),
])
def test_constructor_rejects_inconsistent_weights(mutate, message: str) -> None:
    config, tensors = _config_and_tensors()
    CompiledTransformer(config, tensors)
    mutate(config, tensors)
    with pytest.raises(ValueError, match=message):
        CompiledTransformer(config, tensors)


@pytest.mark.parametrize("bad", [0, 7, "3", True])
def test_min_length_must_lie_in_1_to_t(bad: object) -> None:
    config = random_config()
    assert ModelConfig.from_json(config | {"min_length": 6}).min_length == 6
    with pytest.raises(ValueError, match="min_length"):
        ModelConfig.from_json(config | {"min_length": bad})


def test_a_config_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        ModelConfig.from_json([])


# ---------------------------------------------------------------------------- token models (language v3)


def _token_config_and_tensors() -> tuple[dict, dict]:
    model = random_token_model(seed=1)
    return copy.deepcopy(model.config), {name: t.clone() for name, t in model.state_dict().items()}


def test_a_token_config_holds_its_vocabulary_and_a_table_embedding() -> None:
    config, _ = _token_config_and_tensors()
    spec = ModelConfig.from_json(config)
    assert spec.token_input and spec.token_output and spec.vocabulary == Vocabulary(("a", "b", "c", "d"))
    shapes = spec.expected_shapes()
    assert shapes["embed.W_E"] == (4, 8) and shapes["embed.W_E1"] == (4, 0) and shapes["embed.b_E1"] == (0,)
    assert shapes["embed.W_E2"] == (0, 8) and shapes["unembed.W_U"] == (8, 4)
    numeric = ModelConfig.from_json(config | {"vocabulary": {"names": ["1", "2", "3.5", "4"], "values": [1, 2, 3.5, 4]},
                                              "token_output": False, "output_shape": []})
    assert numeric.vocabulary == Vocabulary(("1", "2", "3.5", "4"), (1.0, 2.0, 3.5, 4.0)) and not numeric.token_output
    vectors = ModelConfig.from_json(random_config())
    assert vectors.vocabulary is None and not vectors.token_input and not vectors.token_output
    assert ModelConfig.from_json(random_config() | {"input": "vectors"}) == vectors


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda c, t: c.update(input="ids"), "'vectors' or 'tokens'"),
    (lambda c, t: c.pop("vocabulary"), r"config\['vocabulary'\] must be an object"),
    (lambda c, t: c.update(vocabulary={"names": []}), "non-empty list of distinct strings"),
    (lambda c, t: c.update(vocabulary={"names": ["a", "a", "b", "c"]}), "distinct strings"),
    (lambda c, t: c.update(vocabulary={"names": ["a", "b", "c", 4]}), "distinct strings"),
    (lambda c, t: c.update(vocabulary={"names": list("abcd"), "values": [1, 2, 3]}), "4 distinct numbers"),
    (lambda c, t: c.update(vocabulary={"names": list("abcd"), "values": [1, 2, 3, True]}), "4 distinct numbers"),
    (lambda c, t: c.update(vocabulary={"names": list("abcd"), "values": [1, 2, 3, float("nan")]}),
     "4 distinct numbers"),
    (lambda c, t: c.update(vocabulary={"names": list("abcd"), "values": [1, 2, 2, 3]}), "4 distinct numbers"),
    (lambda c, t: c.update(vocabulary={"names": list("abc")}), "vocabulary's size 3, got d = 4"),
    (lambda c, t: c.update(token_output="yes"), "token_output"),
    (lambda c, t: c.update(output_shape=[3]), r"output_shape'\] must be \[4\]"),
    (lambda c, t: c.update(input="vectors"), "need \"input\": \"tokens\""),
    (lambda c, t: c["layers"][1]["heads"][0].update(mask=[["key", "<", "last"]]),
     r"layer 1 head 0 \(h1.0\).*run-time length"),
    (lambda c, t: c["layers"][0]["heads"][2].update(mask=[["query", "==", "last-1"]]), "layer 0 head 2"),
    (lambda c, t: t.update({"embed.W_E": torch.zeros(5, 8)}), r"embed.W_E has shape \[5, 8\], expected \[4, 8\]"),
    (lambda c, t: t.update({"embed.W_E1": torch.zeros(4, 2), "embed.b_E1": torch.zeros(2),
                            "embed.W_E2": torch.zeros(2, 8)}), r"embed.W_E1 has shape \[4, 2\], expected \[4, 0\]"),
])
def test_a_bad_token_config_is_refused(mutate, message: str) -> None:
    config, tensors = _token_config_and_tensors()
    CompiledTransformer(config, tensors)
    mutate(config, tensors)
    with pytest.raises(ValueError, match=message):
        CompiledTransformer(config, tensors)
