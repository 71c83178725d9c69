"""approximations: the square routes (wide, deep, auto) alone, then through the whole compiler."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from compiled import CANONICAL_EFFICIENT, EXTRA_COMPILED, model, program

import infoflow_dsl as ifl
from infoflow_dsl.compiler.approximations import DEEP, WIDE, Approximation, choose_square
from infoflow_dsl.compiler.circuit import LinearForm
from infoflow_dsl.measure.measurement import measure_error
from infoflow_dsl.measure.vectors import budgeted_samples, errors_on, model_inputs

ROUNDOFF = 2.0**-53


def _names() -> callable:
    counter = iter(range(1_000_000))
    return lambda offset, stem: f"L{offset}:{stem}{next(counter)}"


def _run(approximation: Approximation, u: np.ndarray) -> np.ndarray:
    """Evaluate an approximation's levels in order (each level reads u and earlier levels), float64."""
    values = {"u": u}

    def read(form: LinearForm) -> np.ndarray:
        return form.constant + sum(c * values[d] for d, c in form.terms)

    for level in sorted(approximation.levels, key=lambda lv: lv.offset):
        outputs = np.stack([unit.coefficient * np.maximum(read(unit.input), 0.0) for unit in level.units])
        values[level.direction] = outputs.sum(axis=0)  # pairwise summation, as a matmul sums
    return read(approximation.form)


INTERVALS = [(0.0, 1.0), (-1.0, 1.0), (-3.0, 0.5), (2.0, 7.0), (-0.25, -0.125)]


@pytest.mark.parametrize("route,tolerance", [(WIDE, 1e-2), (WIDE, 1e-5), (DEEP, 1e-2), (DEEP, 1e-5), (DEEP, 1e-12)],
                         ids=["wide-1e-2", "wide-1e-5", "deep-1e-2", "deep-1e-5", "deep-1e-12"])
@pytest.mark.parametrize("low,high", INTERVALS)
def test_a_route_interpolates_u_squared_from_above_within_its_tolerance(route, low, high, tolerance):
    approximation = route.build(LinearForm.of("u"), max(abs(low), abs(high)), low, high, tolerance, _names(),
                                ROUNDOFF, "u^2")
    u = np.concatenate([np.linspace(low, high, 20_001), np.random.default_rng(0).uniform(low, high, 20_000)])
    gap = _run(approximation, u) - u * u
    slack = 2 * approximation.rounding  # the route's own rounding estimate, with the compiler's safety factor
    assert approximation.error <= tolerance * (1 + 1e-12)  # wide: h²/4 with h = 2√τ, up to rounding
    assert gap.min() >= -slack and gap.max() <= approximation.error + slack
    assert gap.max() >= 0.5 * approximation.error - slack  # the stated error is attained, not a loose bound


@pytest.mark.parametrize("low,high", INTERVALS)
def test_deep_uses_the_fewest_tent_levels_and_two_units_per_layer(low, high):
    width = high - low
    for tolerance in (1e-1, 1e-3, 1e-6, 1e-10):
        m = DEEP.levels(low, high, tolerance)
        assert width * width * 4.0 ** -(m + 1) <= tolerance
        assert m == 0 or width * width * 4.0 ** -m > tolerance
        approximation = DEEP.build(LinearForm.of("u"), 1.0, low, high, tolerance, _names(), ROUNDOFF, "u^2")
        assert approximation.depth == m
        assert all(len(level.units) == 2 for level in approximation.levels)
        assert [level.offset for level in approximation.levels] == list(range(m))


def test_deep_units_grow_with_log_one_over_tolerance_and_wide_with_its_inverse_square_root():
    deep = [DEEP.units(-1.0, 1.0, 4.0 ** -k) for k in range(2, 12)]
    wide = [WIDE.units(-1.0, 1.0, 4.0 ** -k) for k in range(2, 12)]
    assert np.diff(deep).tolist() == [2] * 9  # two units per factor 4
    assert all(b == 2 * a for a, b in itertools.pairwise(wide))  # twice the units per factor 4


def test_deep_rounding_does_not_grow_with_the_levels():
    """Each level doubles the rounding of the one before, but enters with weight 4^-s."""
    roundings = [DEEP.build(LinearForm.of("u"), 1.0, -1.0, 1.0, 4.0 ** -k, _names(), 2.0**-24, "u^2").rounding
                 for k in (4, 8, 16)]
    assert max(roundings) <= 1.5 * min(roundings)


def test_auto_picks_the_route_with_fewer_parameters():
    for tolerance in (1e-1, 1e-2, 1e-4, 1e-8):
        chosen = choose_square("auto", [(-1.0, 1.0)], tolerance, 1)
        counts = {r.name: r.parameters(-1.0, 1.0, tolerance, 1) for r in (WIDE, DEEP)}
        assert counts[chosen.name] == min(counts.values())
    assert choose_square("auto", [(-1.0, 1.0)], 1e-8, 1) is DEEP
    assert choose_square("wide", [(-1.0, 1.0)], 1e-8, 1) is WIDE and choose_square("deep", [(0, 1)], 1, 1) is DEEP


# ----------------------------------------------------------------------------- through the compiler

MIN_PAIRWISE_EPS = (1e-2, 1e-4, 1e-6, 1e-8)


def _min_pairwise(eps: float, ffn: str, dtype: str = "float64") -> ifl.CompiledTransformer:
    return ifl.compile(program("min_pairwise", 64), eps=eps, dtype=dtype, device="cpu", samples=0, ffn=ffn)


@pytest.fixture(scope="module")
def deep_min_pairwise() -> dict[float, ifl.CompiledTransformer]:
    return {eps: _min_pairwise(eps, "deep") for eps in MIN_PAIRWISE_EPS}


@pytest.mark.parametrize("eps", MIN_PAIRWISE_EPS)
def test_deep_min_pairwise_is_within_eps_on_the_budgeted_inputs_and_corners(deep_min_pairwise, eps):
    """As many random inputs as compile's own measurement takes (its budget of work), and the corners."""
    model, target = deep_min_pairwise[eps], program("min_pairwise", 64)
    assert model.config["ffn"] == "deep" and model.config["a_priori_bound"] <= eps
    assert measure_error(model, target, budgeted_samples(model, target))["max_error"] <= eps


def test_deep_min_pairwise_parameters_grow_linearly_in_log_one_over_eps(deep_min_pairwise):
    counts = np.array([deep_min_pairwise[eps].nonzero_parameter_count() for eps in MIN_PAIRWISE_EPS], dtype=float)
    logs = np.array([math.log10(1 / eps) for eps in MIN_PAIRWISE_EPS])
    slope, intercept = np.polyfit(logs, counts, 1)
    assert counts[2] <= 5_000  # at ε = 1e-6
    assert slope > 0 and np.abs(counts - (slope * logs + intercept)).max() <= 0.05 * counts.max()
    layers = [len(deep_min_pairwise[eps].config["layers"]) for eps in MIN_PAIRWISE_EPS]
    assert layers == sorted(layers) and layers[0] > 2  # the tent levels are extra attention-free layers
    extra = [layer for layer in deep_min_pairwise[1e-6].config["layers"] if not layer["heads"]]
    assert extra and all(layer["mlp"] for layer in extra)


def test_deep_models_keep_the_schedule_in_their_config(deep_min_pairwise):
    model = deep_min_pairwise[1e-4]
    schedule = model.config["schedule"]
    assert schedule["layers"] == len(model.config["layers"])
    assert schedule["heads"] == [len(layer["heads"]) for layer in model.config["layers"]]
    placed = {row["head"]: row["layer"] for row in schedule["table"]}
    for index, layer in enumerate(model.config["layers"]):
        assert all(placed[head["name"]] == index + 1 for head in layer["heads"])


def test_deep_below_what_float32_honours_is_refused_with_the_smallest_eps():
    with pytest.raises(ifl.CompileError, match="smallest ε it can is about"):
        _min_pairwise(1e-9, "deep", "float32")


def test_an_unknown_route_is_refused():
    with pytest.raises(ifl.CompileError, match="--ffn must be one of"):
        _min_pairwise(1e-2, "sideways")


def test_the_cli_compiles_deep_and_check_and_trace_accept_the_file(tmp_path, capsys):
    from infoflow_dsl.cli.main import run

    source = tmp_path / "min_pairwise.iflow"
    source.write_text(program("min_pairwise").source, encoding="utf-8")
    out = tmp_path / "deep.safetensors"
    assert run(["compile", str(source), "--ffn", "deep", "--eps", "1e-4", "--dtype", "float64", "--samples", "500",
                "-o", str(out)]) == 0
    model = ifl.load(out, device="cpu")
    assert model.config["ffn"] == "deep" and len(model.config["layers"]) > 2
    capsys.readouterr()
    assert run(["check", str(out), "--samples", "500", "--trace"]) == 0
    printed = capsys.readouterr().out
    assert "within ε" in printed and "the model follows its circuit at every layer" in printed


def test_the_cli_refuses_an_unknown_route_with_exit_2(tmp_path, capsys):
    from infoflow_dsl.cli.main import run

    source = tmp_path / "p.iflow"
    source.write_text(program("min_pairwise").source, encoding="utf-8")
    assert run(["compile", str(source), "--ffn", "sideways"]) == 2
    assert "invalid choice: 'sideways'" in capsys.readouterr().err and not source.with_suffix(".safetensors").exists()


def test_wide_models_store_no_route_and_deep_ones_round_trip_through_the_file_format(tmp_path):
    from infoflow_dsl.transformer.io import model_to_bytes

    assert "ffn" not in _min_pairwise(1e-2, "wide").config
    model = _min_pairwise(1e-2, "deep")
    path = tmp_path / "m.safetensors"
    path.write_bytes(model_to_bytes(model))
    again = ifl.load(path, device="cpu")
    x = torch.randn(64, 64, 4, dtype=torch.float64).clamp(-1, 1)
    assert torch.equal(model(x), again(x)) and model_to_bytes(again) == model_to_bytes(model)
    assert model_to_bytes(_min_pairwise(1e-2, "deep")) == model_to_bytes(model)  # deterministic


def test_analyze_reports_the_cost_law_and_layers_of_each_route():
    routes = ifl.analyze(program("min_pairwise")).cost()["routes"]
    assert set(routes) == {"wide", "deep", "auto"}
    assert routes["wide"]["layers"] == 2 and "ε^-1/2" in routes["wide"]["law"]
    assert "log(1/ε)" in routes["deep"]["law"] and routes["deep"]["square_steps"] == 1
    deep = _min_pairwise(1e-6, "deep")
    # the deep layer count obeys analyze's bound L + S·(m − 1), m the most tent levels of any square
    blocks = [*deep.config["embedding_mlp"], *(b for layer in deep.config["layers"] for b in layer["mlp"])]
    m = max(int(b["computes"].split(" ")[0][5:]) for b in blocks if b["computes"].startswith("tent^"))
    assert len(deep.config["layers"]) <= routes["deep"]["base_layers"] + routes["deep"]["square_steps"] * (m - 1)


# ----------------------------------------------------------------------------- every efficient program

#: Random inputs per model (plus corners): the canonical examples get more, the table fewer
#: (a deep model's forward is slower: its residual stream has a direction per tent level).
CANONICAL_SAMPLES, TABLE_SAMPLES = 500, 150


def _worst(compiled: ifl.CompiledTransformer, name: str, samples: int) -> float:
    target = program(name)
    error, kept = errors_on(compiled, target, model_inputs(target, samples, seed=5, corners=64))
    assert int(kept.sum()) >= samples // 2
    return float(error[kept].max())


@pytest.mark.parametrize("eps", [1e-3, 1e-6], ids=["eps3", "eps6"])
@pytest.mark.parametrize("name", CANONICAL_EFFICIENT + EXTRA_COMPILED)
def test_every_efficient_program_compiles_deep_within_eps(name, eps):
    compiled = model(name, eps, "float64", ffn="deep")
    assert compiled.config["a_priori_bound"] <= eps
    samples = CANONICAL_SAMPLES if name in CANONICAL_EFFICIENT else TABLE_SAMPLES
    assert _worst(compiled, name, samples) <= compiled.config["a_priori_bound"]


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT + EXTRA_COMPILED)
def test_auto_needs_no_more_parameters_than_the_better_route(name):
    counts = {ffn: model(name, 1e-3, "float64", ffn=ffn).nonzero_parameter_count() for ffn in ("wide", "deep", "auto")}
    assert counts["auto"] <= 1.05 * min(counts["wide"], counts["deep"]), counts
    deep = model(name, 1e-6, "float64", ffn="deep").nonzero_parameter_count()
    assert model(name, 1e-6, "float64", ffn="auto").nonzero_parameter_count() <= 1.05 * deep


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_deep_float32_canonical_is_within_eps_or_refused_with_the_smallest_eps(name):
    try:
        compiled = model(name, 1e-3, "float32", ffn="deep")
    except ifl.CompileError as error:
        assert "the smallest ε it can is about" in str(error)
        return
    assert _worst(compiled, name, TABLE_SAMPLES) <= 1e-3
