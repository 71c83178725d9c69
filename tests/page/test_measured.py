"""The numbers on a model's page (ε, bound, measured error, parameters, β, patterns, the graph's
bounds) equal the model's config and a recomputation by another path: TransformerLens hooks
for the patterns, the circuit map for the bounds, the state dict for the parameters, the
compile's own measurement for the errors. On three shipped pages: a readout target
(min_pairwise), a per-token target with masks and a token retrieval (induction), and a vector
target with an embedding FFN (nearest_neighbour)."""

from __future__ import annotations

import math
from functools import cache

import pytest
import torch
from pages import page_data, page_measured
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import CORNERS, errors_on, model_inputs
from infoflow_dsl.page import model_page
from infoflow_dsl.page.measured import (
    PATTERN_SCALE,
    UNMEASURED_SAMPLES,
    head_reads,
    mask_text,
    parameters_section,
    side_text,
)
from infoflow_dsl.pipeline.reading import program_of

CHECKED = ["min_pairwise", "induction", "nearest_neighbour"]


@cache
def shipped(name: str) -> tuple[ifl.CompiledTransformer, dict, dict]:
    page = (EXAMPLES_DIR / f"{name}.html").read_text(encoding="utf-8")
    return ifl.load(EXAMPLES_DIR / f"{name}.safetensors", device="cpu"), page_data(page), page_measured(page)


def rounding_slack(config: dict, digits: int = 3) -> float:
    """How far the float32 forward's error may move between CPUs (twice the budget's rounding
    share, as test_examples allows), plus half a unit of the digits stored, relative to ε."""
    return 2 * config["error_budget"]["rounding"] + 0.5 * 10 ** (math.floor(math.log10(config["eps"])) - digits + 1)


@pytest.mark.parametrize("name", CHECKED)
def test_page_numbers_are_the_configs(name):
    model, data, _ = shipped(name)
    config = model.config
    assert data["model"]["eps"] == config["eps"]
    assert data["model"]["a_priori_bound"] == config["a_priori_bound"]
    assert data["model"]["measured_error"] == config["measured_error"]["max_error"]
    heads = [head for layer in config["layers"] for head in layer["heads"]]
    assert [h["beta"] for h in data["heads"]] == [h["beta"] for h in heads]
    assert [h["name"] for h in data["heads"]] == [h["name"] for h in heads]
    assert [r["name"] for r in data["residual"]] == config["residual_labels"]
    for h in data["heads"]:  # what a head reads: the directions of the nonzero rows of its projections
        attn = model.blocks[h["layer"] - 1].attn
        rows = sum(getattr(attn, w).detach()[h["index"]].abs().sum(dim=1) for w in ("W_Q", "W_K", "W_V"))
        assert h["reads"] == [config["residual_labels"][i] for i in range(len(rows)) if rows[i] > 0]
    assert data["program"]["source"] == config["program"]["source"]


@pytest.mark.parametrize("name", CHECKED)
def test_graph_bounds_are_the_circuit_maps(name):
    model, data, _ = shipped(name)
    boxes = {n["name"]: n for n in data["graph"]}
    for site in ifl.circuit(model):
        assert boxes[site.name.split("[")[0]]["bound"] == site.bound


@pytest.mark.parametrize("name", CHECKED)
def test_patterns_are_transformer_lens_patterns(name):
    """The page's patterns (4 decimals) against ``hook_pattern`` through TransformerLens, on the
    stored weights in float64 and the examples regenerated from the page's seed. (float64, as
    the page: at β ~ 1e5 the float32 scores of two nearly tied keys round differently from CPU to
    CPU, which moves min_pairwise's readout pattern by 0.004.)"""
    model, data, _ = shipped(name)
    attention = data["attention"]
    x = ifl.sample_inputs(program_of(model), len(attention["examples"]), seed=attention["seed"])
    assert attention["examples"] == [[[round(float(v), 4) for v in t] for t in example] for example in x]
    weights = {name: t.to_dense() if t.is_sparse else t for name, t in model.state_dict().items()}
    in_float64 = ifl.CompiledTransformer(model.config, weights, device="cpu", dtype=torch.float64)
    _, cache_ = ifl.hooked(in_float64).run_with_cache(x)
    index = 0
    for layer in range(model.n_layers):
        pattern = cache_[f"blocks.{layer}.attn.hook_pattern"].to(torch.float64)  # (B, H, T+1, T)
        for h in range(pattern.shape[1]):
            page = torch.tensor([example[index] for example in attention["patterns"]], dtype=torch.float64)
            gap = (page / PATTERN_SCALE - pattern[:, h].reshape(pattern.shape[0], -1)).abs().max()
            assert gap <= 0.5 / PATTERN_SCALE + 1e-9, (layer, h, float(gap))
            index += 1
    assert index == len(data["heads"]) and attention["scale"] == PATTERN_SCALE


@pytest.mark.parametrize("name", CHECKED)
def test_measured_errors_are_the_compiles_measurement(name):
    """Each input's |model − reference| on the inputs the compile measured, recomputed here,
    within the float32 rounding another CPU may add; the worst is the config's measured error."""
    model, _, measured = shipped(name)
    config = model.config
    stored = config["measured_error"]
    error, kept = errors_on(model, program_of(model), model_inputs(program_of(model), stored["samples"],
                                                                  stored["seed"]))
    slack = rounding_slack(config)
    page = torch.tensor(measured["errors"], dtype=torch.float64)
    assert page.shape == error[kept].shape and measured["excluded_by_margin"] == int((~kept).sum())
    assert float((page - error[kept]).abs().max()) <= slack
    assert abs(max(measured["errors"]) - stored["max_error"]) <= slack
    assert measured["worst"]["error"] == max(measured["errors"]) <= config["a_priori_bound"] <= config["eps"]


@pytest.mark.parametrize("name", CHECKED)
def test_example_outputs_are_the_models_and_the_references(name):
    model, data, measured = shipped(name)
    program = program_of(model)
    x = ifl.sample_inputs(program, len(data["attention"]["examples"]), seed=data["attention"]["seed"])
    reference = ifl.evaluate(program, x)
    output = model(x.to(torch.float32)).to(torch.float64)
    shown_reference, shown_model = (numbers(measured["examples"][key]) for key in ("reference", "model"))
    defined = ~reference.isnan()
    assert torch.equal(shown_reference.isnan(), reference.isnan())
    assert torch.allclose(shown_reference[defined], reference[defined], rtol=1e-3, atol=1e-12)
    assert torch.allclose(shown_model[defined], output[defined], rtol=1e-3, atol=1e-6)


def numbers(values: list) -> torch.Tensor:
    """Nested lists from a page (None: undefined) as a float64 tensor (NaN: undefined)."""
    if not isinstance(values, list):
        return torch.tensor(float("nan") if values is None else values, dtype=torch.float64)
    return torch.stack([numbers(v) for v in values])


@pytest.mark.parametrize("name", CHECKED)
def test_parameters_sum_to_the_models_counts(name):
    model, data, _ = shipped(name)
    parameters = data["parameters"]
    assert parameters == parameters_section(model)
    assert parameters["total"] == model.parameter_count() and parameters["nonzero"] == model.nonzero_parameter_count()
    for table in ("layers", "constructions"):
        assert sum(r["total"] for r in parameters[table]) == model.parameter_count()
        assert sum(r["nonzero"] for r in parameters[table]) == model.nonzero_parameter_count()
    for index, block in enumerate(model.blocks):
        attention = next(r for r in parameters["layers"] if r["name"] == f"layer {index + 1} attention")
        assert attention["total"] == sum(p.numel() for p in block.attn.parameters())


def test_every_parameter_of_a_head_is_counted_once():
    """min_pairwise's heads: W_Q, W_K, W_V (D × E or V), W_O (V × D) and β, per head."""
    model, _, _ = shipped("min_pairwise")
    heads = [r for r in parameters_section(model)["constructions"] if r["name"].startswith("head ")]
    expected = [sum(getattr(block.attn, n)[h].numel() for n in ("W_Q", "W_K", "W_V", "W_O", "beta"))
                for block in model.blocks for h in range(block.attn.W_Q.shape[0])]
    assert [r["total"] for r in heads] == expected


def test_head_reads_are_the_nonzero_rows_of_its_projections():
    """min_pairwise's first head compares <x(t1), x(t2)>: it reads the input coordinates x[1..4]
    alone; the readout head reads the FFN squares that form c1's value."""
    model, _, _ = shipped("min_pairwise")
    labels = model.config["residual_labels"]
    assert [labels[i] for i in head_reads(model, 1, 0)] == ["x[1]", "x[2]", "x[3]", "x[4]"]
    squares = [block["output"] for block in model.config["layers"][0]["mlp"]]
    assert [labels[i] for i in head_reads(model, 2, 0)] == ["one", *squares]


def test_masks_in_words():
    assert side_text("query-1") == "t−1" and side_text("last") == "T" and side_text(3) == "3"
    assert side_text("key+2") == "s+2"
    assert mask_text([["key", "==", "query-1"]]) == "s == t−1"
    assert mask_text([[2, "<=", "key"], ["key", "<", "query"]]) == "2 <= s and s < t"
    assert mask_text([]) == "none"


def test_a_model_compiled_without_measuring_gets_a_page_that_measures_it():
    """``compile(..., samples=0)`` stores no measured error: the page says so and measures
    UNMEASURED_SAMPLES random inputs and the corners itself; the deep square route (more layers
    than the schedule) draws every head of the model."""
    program = ifl.load_program(EXAMPLES_DIR / "min_pairwise.iflow", length=8)
    model = ifl.compile(program, eps=1e-2, samples=0, ffn="deep", device="cpu")
    page = model_page(model)
    data, measured = page_data(page), page_measured(page)
    assert data["model"]["measured_error"] is None and "compiled without measuring" in page
    assert len(measured["errors"]) + measured["excluded_by_margin"] == UNMEASURED_SAMPLES + CORNERS
    assert max(measured["errors"]) <= model.config["a_priori_bound"]
    assert len(data["heads"]) == sum(len(layer["heads"]) for layer in model.config["layers"])
    assert data["model"]["layers"] == len(model.config["layers"]) > data["analysis"]["layers"]
