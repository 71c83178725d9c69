"""Compression of the residual below its number of features (infoflow_dsl/compiler/compress.py):
each dimension carries its features one after another, the stream at every layer boundary is the
plain model's on the feature alive there, the output is the plain model's, and the truth of the
compressed model has erasers that an ablation needs."""

from __future__ import annotations

import copy
import re
from functools import cache

import pytest
import torch
from cli_runner import run_cli
from programs import EXAMPLES_DIR
from shipped_models import model_inputs_of, shipped

import infoflow_dsl as ifl
from infoflow_dsl.circuits.disguise import disguise
from infoflow_dsl.circuits.patching import EdgeForward
from infoflow_dsl.circuits.truth import TruthMeasurement
from infoflow_dsl.compiler.compress import ERASER, compress_residual
from infoflow_dsl.pipeline import program_of

COMPRESSED = ["tracr/reverse", "tracr/sort", "tracr/shuffle_dyck2", "min_pairwise", "nearest_neighbour"]


@cache
def compressed(name: str) -> ifl.CompiledTransformer:
    return disguise(shipped(name), compress=True)


@pytest.mark.parametrize("name", COMPRESSED)
def test_fewer_dimensions_than_features_each_the_plain_streams_feature_alive_there(name: str) -> None:
    """Read off the two models' residual streams, not the compression's record: at the embedding and
    after each layer, every dimension of the compressed stream equals, on every input, the plain
    stream at one of the features its label names, or is 0 (between an eraser and the next feature)."""
    plain, small = shipped(name), compressed(name)
    features, labels = plain.config["residual_labels"], small.config["residual_labels"]
    assert small.d_model < plain.d_model == len(features)
    assert small.config["disguised"]["compression"] == {
        "features": len(features), "dimensions": len(labels), "erased": sum(label.count(" | ") for label in labels)}
    x = model_inputs_of(name, 64, 3, 6)
    with torch.no_grad():
        streams = zip(plain.residual_stream(x), small.residual_stream(x), strict=True)
        for boundary, (wide, narrow) in enumerate(streams):
            for dimension, label in enumerate(labels):
                column = narrow[..., dimension]
                candidates = [wide[..., features.index(f)] for f in label.split(" | ")]
                assert any(torch.equal(column, c) for c in candidates) or not column.any(), (boundary, label)
    with torch.no_grad():
        assert torch.equal(small(x).argmax(-1), plain(x).argmax(-1)) if plain.token_output else bool(
            ((small(x).double() - plain(x).double()).abs() <= 1e-5).all())


def test_an_eraser_is_two_units_that_an_ablation_needs() -> None:
    """reverse shares two dimensions: its FFN gains two eraser units per shared dimension, and under
    zero ablation an edge that only exists through the sharing (the embedding's write of pos:first
    reaching the output, which the eraser cancels) is necessary: without it the eraser's −pos:first
    lands in the output's dimension."""
    model = compressed("tracr/reverse")
    erasers = [block for layer in model.config["layers"] for block in layer["mlp"]
               if block["name"].startswith("eraser")]
    assert [b["units"] for b in erasers] == [4] and all(ERASER in b["computes"] for b in erasers)
    graph = ifl.circuit_graph(model)  # checked against the weights: no rotation
    shared = {e.name for e in graph.edges if e.role.startswith("compression")}
    assert "input->output<out>" in shared
    truth = TruthMeasurement(EdgeForward(model, graph), program_of(model), 100, seed=2).ablation("zero")
    assert "input->output<out>" in truth.necessary and truth.outside_error == 0.0


def test_the_cli_compresses_and_says_by_how_much(tmp_path) -> None:
    out = tmp_path / "sort.safetensors"
    code, text, err = run_cli(["disguise", str(EXAMPLES_DIR / "tracr/sort.safetensors"), "--compress", "--rotate",
                               "-o", str(out)])
    assert code == 0, err
    record = ifl.load(out, device="cpu").config["disguised"]["compression"]
    said = re.search(r"residual: (\d+) features in (\d+) dimensions \((\d+) erased", text)
    assert said and [int(n) for n in said.groups()] == [record["features"], record["dimensions"], record["erased"]]
    assert record["features"] == shipped("tracr/sort").d_model > record["dimensions"]
    code, text, err = run_cli(["check", str(out), "--samples", "200"])
    assert code == 0 and "every answer right" in text, err


@pytest.mark.parametrize("name", ["tracr/hist", "tracr/sort"])
def test_tight_lifetimes_take_fewer_dimensions_each_the_plain_streams_feature_alive_there(name: str) -> None:
    """``tight=True`` (what compile --residual uses): writes nothing reads dropped, a dimension
    handed on in the FFN that erases it. Fewer dimensions than the default, and still every
    dimension of the stream is, at every layer boundary, the plain stream at one of its
    features or 0; the output is the plain model's."""
    plain = shipped(name).double()
    tensors = {n: (t.to_dense() if t.is_sparse else t).double() for n, t in plain.state_dict().items()}
    config = copy.deepcopy(plain.config)
    compress_residual(tensors, config, tight=True)
    small = ifl.CompiledTransformer(config, tensors, dtype=torch.float64)
    features, labels = plain.config["residual_labels"], config["residual_labels"]
    assert small.d_model < compressed(name).d_model
    x = model_inputs_of(name, 64, 3, 6)
    with torch.no_grad():
        for boundary, (wide, narrow) in enumerate(zip(plain.residual_stream(x), small.residual_stream(x), strict=True)):
            for dimension, label in enumerate(labels):
                column = narrow[..., dimension]
                candidates = [wide[..., features.index(f)] for f in label.split(" | ")]
                assert any(bool((column - c).abs().max() <= 1e-12) for c in candidates) or not column.any(), \
                    (boundary, label)
        assert float((small(x) - plain(x)).abs().max()) <= 1e-9
