"""Compression of the residual below its number of features (infoflow_dsl/compiler/compress.py):
each dimension carries its features one after another, the stream at every layer boundary is the
plain model's on the feature alive there, the output is the plain model's, and the truth of the
compressed model has erasers that an ablation needs."""

from __future__ import annotations

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
from infoflow_dsl.compiler.compress import ERASER
from infoflow_dsl.pipeline.reading import program_of

COMPRESSED = ["tracr/reverse", "tracr/sort", "tracr/shuffle_dyck2", "tracr/hist", "min_pairwise", "nearest_neighbour"]


@cache
def compressed(name: str) -> ifl.CompiledTransformer:
    return disguise(shipped(name).double(), compress=True)


def _touched(tensor: torch.Tensor, axis: int) -> set[int]:
    """The residual indices (along ``axis``) where ``tensor`` has a nonzero entry."""
    moved = (tensor if tensor.dim() > 1 else tensor[None]).movedim(axis, -1)
    return {int(i) for i in torch.nonzero(moved.reshape(-1, moved.shape[-1]).ne(0).any(0)).flatten()}


def alive_at_once(model: ifl.CompiledTransformer) -> int:
    """The most features alive after one stage, by a scan of the plain weights written for this
    test: stages 0 (embedding), 2l + 1 (layer l's heads), 2l + 2 (its FFN), 2L + 1 (unembedding);
    a feature is alive on [w, e): w its first write, r its last read after w, e = r at an FFN,
    r + 1 after heads, the end after the unembedding; a feature no stage after w reads is never
    alive (its writes feed nothing)."""
    t = {n: (v.to_dense() if v.is_sparse else v) for n, v in model.state_dict().items()}
    layers = len(model.config["layers"])
    writes: dict[int, list[int]] = {}
    reads: dict[int, list[int]] = {}
    for name in ("embed.W_E", "embed.W_E2", "embed.cls", "pos_embed.W_pos"):
        for i in _touched(t[name], -1):
            writes.setdefault(i, []).append(0)
    for layer in range(layers):
        p = f"blocks.{layer}."
        for stage, readers, writers in ((2 * layer + 1, ("attn.W_Q", "attn.W_K", "attn.W_V"), ("attn.W_O",)),
                                        (2 * layer + 2, ("mlp.W_in",), ("mlp.W_out", "mlp.b_out"))):
            for name in readers:
                for i in _touched(t[p + name], -2):
                    reads.setdefault(i, []).append(stage)
            for name in writers:
                for i in _touched(t[p + name], -1):
                    writes.setdefault(i, []).append(stage)
    for i in _touched(t["unembed.W_U"], -2):
        reads.setdefault(i, []).append(2 * layers + 1)
    spans = []
    for i, stages in writes.items():
        after = [r for r in reads.get(i, []) if r > min(stages)]
        if after:
            r = max(after)
            spans.append((min(stages), 2 * layers + 2 if r == 2 * layers + 1 else r + r % 2))
    return max(sum(w <= s < e for w, e in spans) for s in range(2 * layers + 2))


@pytest.mark.parametrize("name", COMPRESSED)
def test_the_features_alive_at_once_each_dimension_the_plain_streams_feature_alive_there(name: str) -> None:
    """Read off the two models' residual streams, not the compression's record: as many dimensions
    as features alive at once under tight lifetimes (:func:`alive_at_once`), and at the embedding
    and after each layer, every dimension of the compressed stream equals, on every input, the
    plain stream at one of the features its label names, or is 0 (between an eraser and the next
    feature), up to the rounding of a dimension handed on in one FFN (old + (new − old), float64);
    the output is the plain model's."""
    plain, small = shipped(name).double(), compressed(name)
    features, labels = plain.config["residual_labels"], small.config["residual_labels"]
    assert small.d_model == alive_at_once(plain) < plain.d_model == len(features)
    assert small.config["disguised"]["compression"] == {
        "features": len(features), "dimensions": len(labels), "erased": sum(label.count(" | ") for label in labels)}
    x = model_inputs_of(name, 64, 3, 6)
    x = x.double() if x.is_floating_point() else x
    with torch.no_grad():
        streams = zip(plain.residual_stream(x), small.residual_stream(x), strict=True)
        for boundary, (wide, narrow) in enumerate(streams):
            for dimension, label in enumerate(labels):
                column = narrow[..., dimension]
                candidates = [wide[..., features.index(f)] for f in label.split(" | ")]
                assert any(bool((column - c).abs().max() <= 1e-12) for c in candidates) or not column.any(), \
                    (boundary, label)
        assert float((small(x) - plain(x)).abs().max()) <= 1e-9


def test_an_eraser_is_two_units_that_an_ablation_needs() -> None:
    """reverse shares two dimensions: its FFN gains two eraser units per shared dimension (pos:first's,
    handed in that FFN to table1, which it writes; len:length[1]'s, a0.h0's, taken by
    h2:position[1] in the next heads), and under zero ablation an edge that only exists through the
    sharing (the FFN's eraser reaching the output, cancelling a0.h0's len:length[1] under
    h2:position[1]) is necessary: without it len:length[1] stays in what the output reads."""
    model = compressed("tracr/reverse")
    assert model.config["residual_labels"][6:8] == ["pos:first | table1", "len:length[1] | h2:position[1]"]
    erasers = [block for layer in model.config["layers"] for block in layer["mlp"]
               if block["name"].startswith("eraser")]
    assert [b["units"] for b in erasers] == [4] and all(ERASER in b["computes"] for b in erasers)
    graph = ifl.circuit_graph(model)  # checked against the weights: no rotation
    shared = {e.name for e in graph.edges if e.role.startswith("compression")}
    assert {"a0.h0->output<out>", "m0->output<out>"} <= shared
    truth = TruthMeasurement(EdgeForward(model, graph), program_of(model), 100, seed=2).ablation("zero")
    assert "m0->output<out>" in truth.necessary and truth.outside_error == 0.0


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


def test_what_distract_and_merge_add_for_nothing_to_read_keeps_its_writes() -> None:
    """Tight lifetimes drop a write nothing reads, but not the distractors' nor a merged program's
    (written so that nothing reads them): with compress, the last layer's distractor head and units
    still write, and so does the merged program's output; the model still computes the plain one."""
    plain = shipped("tracr/reverse").double()
    model = disguise(plain, merge=[shipped("tracr/reverse").double()], distract=2, compress=True)
    last = len(model.config["layers"]) - 1
    heads = [h["name"] for h in model.config["layers"][last]["heads"]]
    tensors = model.state_dict()
    assert tensors[f"blocks.{last}.attn.W_O"][heads.index(f"distractor:{last}")].ne(0).any()
    units = [b for b in model.config["layers"][last]["mlp"]]
    start = sum(b["units"] for b in units[:[b["name"] for b in units].index(f"distractor:{last}")])
    assert tensors[f"blocks.{last}.mlp.W_out"][start:start + 2].ne(0).any()
    outputs = [i for i, label in enumerate(model.config["residual_labels"])
               if any(part.startswith("reverse:") for part in label.split(" | "))
               and tensors[f"blocks.{last}.attn.W_O"][..., i].ne(0).any()]
    assert outputs  # the merged reverse's fetched tokens, written by its last heads, read by nothing
    x = model_inputs_of("tracr/reverse", 64, 3, 6)
    with torch.no_grad():
        assert float((model(x) - plain(x)).abs().max()) <= 1e-9
