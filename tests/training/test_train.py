"""train: the loss falls, the saved model loads and checks, --init reproduces the compiled model
exactly before training, positions are learned only when read, the masked loss and the NMSE
follow their definitions, and bad flags exit 2 with nothing written."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import compiled
import pytest
import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.measure.vectors import model_inputs
from infoflow_dsl.training.train import (
    MAX_STEPS,
    OUTPUT_SIDE,
    STANDARDISATION_SEED,
    Distribution,
    Standardisation,
    TrainError,
    TrainSettings,
    batch_seed,
    build_model,
    draw_inputs,
    learning_rate_factor,
    model_nmse,
    nmse,
    parse_distribution,
    reads_positions,
    squared_error,
    target_variance,
    train,
    validation_seed,
)
from infoflow_dsl.transformer import sparse as sparse_module
from infoflow_dsl.verify.check import check_model

ROOT = Path(__file__).resolve().parents[2]
D_RETRIEVAL = str(ROOT / "compiled_examples" / "d_retrieval.iflow")
TOY = TrainSettings(heads=(4,), d_model=16, d_head=4, d_mlp=16, steps=150, batch=128, lr=3e-3, validation=512)


@pytest.fixture(scope="module")
def trained() -> ifl.CompiledTransformer:
    """A toy run: the 4-retrieval target at T = 4."""
    return train(compiled.program("d_retrieval", 4), TOY, quiet=True)


def test_the_validation_loss_falls(trained) -> None:
    first, last = trained.history[0][1], trained.history[-1][1]
    assert trained.final_nmse == last
    assert last < 0.2 * first, trained.history
    assert trained.model.config["trained"]["final_nmse"] == float(f"{last:.6g}")
    assert trained.history[-1][0] == TOY.steps


def test_the_saved_model_loads_checks_and_measures_the_same_nmse(trained, tmp_path) -> None:
    program = compiled.program("d_retrieval", 4)
    path = tmp_path / "toy.safetensors"
    ifl.save(trained.model, path)
    loaded = ifl.load(path, device="cpu")
    x = draw_inputs(program, TOY.dist, 256, seed=5)
    with torch.no_grad():
        assert torch.equal(loaded(x.float()), trained.model(x.float()))
    assert loaded.config["trained"]["heads"] == [4] and loaded.config["trained"]["steps"] == TOY.steps
    assert not any(p.requires_grad for p in loaded.parameters())
    result = check_model(loaded, program, samples=200, eps=math.inf, progress=False)
    assert result.within and result.worst_error > 0
    code, out, err = run_cli(["check", str(path), "--samples", "200"])
    assert (code, err) == (0, ""), err
    reported = float(out.split("NMSE")[1].split()[0])
    expected = model_nmse(loaded, program, model_inputs(program, 200, 0, corners=0))
    assert reported == pytest.approx(expected, rel=1e-2)
    assert "a-priori bound none" in out and "measured only" in out
    code, out, _ = run_cli(["check", str(path), "--samples", "200", "--eps", "1e-9"])
    assert code == 3 and "ABOVE ε" in out
    code, _, err = run_cli(["check", str(path), "--trace"])
    assert code == 2 and "trained" in err
    code, _, err = run_cli(["circuit", str(path)])
    assert code == 2 and "trained" in err


def test_the_transformer_lens_wrapper_runs_a_trained_model(trained) -> None:
    from infoflow_dsl.transformer.lens import hooked

    x = draw_inputs(compiled.program("d_retrieval", 4), TOY.dist, 16, seed=9).float()
    y, cache = hooked(trained.model).run_with_cache(x)
    with torch.no_grad():
        torch.testing.assert_close(y, trained.model(x))
    assert "blocks.0.attn.hook_pattern" in cache


def test_init_pads_the_compiled_model_with_zeros_and_computes_the_same_function() -> None:
    program = compiled.program("d_retrieval", 4)
    model = compiled.model("d_retrieval", 1e-2, "float32", 4)
    settings = TrainSettings(heads=(6, 1), d_model=model.d_model + 5, d_head=2, d_mlp=3, steps=0, validation=256)
    padded, trainable = build_model(program, settings, model)
    assert all(t.requires_grad for t in trainable)
    assert padded.d_model == model.d_model + 5 and [len(layer["heads"]) for layer in padded.config["layers"]] == [6, 1]
    x = model_inputs(program, 300, seed=2)
    with torch.no_grad():
        torch.testing.assert_close(padded(x.float()), model(x.float()), rtol=1e-5, atol=1e-5)
    result = train(program, settings, model, quiet=True)
    assert result.final_nmse == pytest.approx(model_nmse(model, program, draw_inputs(
        program, settings.dist, settings.validation, validation_seed(settings.seed))), rel=1e-3)
    with pytest.raises(TrainError, match="more than --d-model"):
        build_model(program, replace(settings, d_model=4), model)
    with pytest.raises(TrainError, match="heads per layer"):
        build_model(program, replace(settings, heads=(1,)), model)


def test_init_from_a_model_holding_its_relu_matrices_sparse_trains_them_dense(monkeypatch) -> None:
    monkeypatch.setattr(sparse_module, "SPARSE_HOLD_SIZE", 64)
    program = compiled.program("min_pairwise", 8)
    init = ifl.compile(program, eps=1e-2, dtype="float32", samples=0)
    assert init.blocks[0].mlp.W_out.is_sparse
    settings = TrainSettings(heads=(1, 1), d_model=init.d_model, d_head=4, d_mlp=4, steps=0, validation=64)
    padded, trainable = build_model(program, settings, init)
    assert not any(t.is_sparse for t in padded.state_dict().values()) and all(t.requires_grad for t in trainable)
    assert torch.equal(padded.blocks[0].mlp.W_out[:init.d_mlp[0]], init.blocks[0].mlp.W_out.to_dense())
    x = model_inputs(program, 64, seed=3).float()
    with torch.no_grad():
        torch.testing.assert_close(padded(x), init(x), rtol=1e-5, atol=1e-5)


def test_positions_are_learned_only_when_the_target_reads_them(device: str) -> None:
    assert not reads_positions(compiled.program("d_retrieval", 4))
    assert reads_positions(compiled.program("last_plus_first"))
    assert reads_positions(compiled.program("causal_sum"))
    assert reads_positions(compiled.program("previous_token"))  # x(t - 1): an offset
    settings = replace(TOY, steps=3, validation=32, device=device)
    plain = train(compiled.program("d_retrieval", 4), settings, quiet=True)
    assert not bool(plain.model.pos_embed.W_pos.any())
    positional = train(compiled.program("last_plus_first"), settings, quiet=True)
    assert bool(positional.model.pos_embed.W_pos.any())
    assert positional.parameters == positional.model.parameter_count() + positional.model.pos_embed.W_pos.numel()


def test_the_loss_leaves_undefined_targets_out_and_nmse_divides_by_the_variance() -> None:
    predicted = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    target = torch.tensor([[1.5, float("nan"), 2.0], [0.0, float("nan"), 4.0]])
    mse, count = squared_error(predicted, target)
    assert int(count) == 4 and float(mse) == pytest.approx((0.25 + 1 + 0 + 1) / 4)
    y = torch.randn(1000, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * torch.tensor([1, 2, 3])
    assert nmse(y.mean(dim=0).expand_as(y), y, components=True) == pytest.approx(1.0)
    assert nmse(y, y, components=True) == 0.0
    with pytest.raises(TrainError, match="outputs"):
        squared_error(predicted, target[:, :2])


def test_distributions_and_the_schedule() -> None:
    assert parse_distribution("uniform") == Distribution()
    assert parse_distribution("normal") == Distribution("normal", 1.0)
    assert parse_distribution("normal:0.5") == Distribution("normal", 0.5)
    for bad in ("gauss", "normal:x", "normal:-1", "normal:nan"):
        with pytest.raises(TrainError):
            parse_distribution(bad)
    program = compiled.program("d_retrieval", 16)
    x = draw_inputs(program, Distribution("normal", 2.0), 4000, seed=3)
    assert x.shape == (4000, 16, 4) and float(x.std()) == pytest.approx(2.0, rel=0.02)
    assert torch.equal(x, draw_inputs(program, Distribution("normal", 2.0), 4000, seed=3))
    assert float(draw_inputs(program, Distribution(), 100, seed=3).abs().max()) <= 1.0
    factors = [learning_rate_factor(s, 100) for s in range(100)]
    assert factors[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert all(a >= b for a, b in itertools.pairwise(factors[4:])) and factors[-1] < 1e-3


def test_cli_train_writes_a_model_that_loads(tmp_path) -> None:
    out = tmp_path / "m.safetensors"
    code, stdout, err = run_cli(["train", D_RETRIEVAL, "--T", "4", "--heads", "2", "--layers", "2", "--d-model", "8",
                                 "--d-head", "4", "--d-mlp", "8", "--steps", "5", "--validation", "64",
                                 "--dist", "normal:0.5", "-o", str(out)])
    assert (code, err) == (0, ""), err
    model = ifl.load(out)
    assert [len(layer["heads"]) for layer in model.config["layers"]] == [2, 2] and model.T == 4
    assert model.config["trained"]["dist"] == "normal:0.5"
    assert f"{model.config['trained']['final_nmse']:.3g}" in stdout


@pytest.mark.parametrize("flags", [
    ["--heads", "0"], ["--heads", "2,2", "--layers", "3"], ["--heads", "1", "--dist", "gauss"],
    ["--heads", "1", "--steps", "0"], ["--heads", "1", "--lr", "-1"], ["--heads", "1", "--init", "missing.st"],
    ["--heads", "1", "--T", "0"], ["--heads", "1", "--device", "nonsense"], [],
])
def test_cli_train_rejects_bad_flags_with_exit_2_and_writes_nothing(tmp_path, flags) -> None:
    out = tmp_path / "m.safetensors"
    code, _, err = run_cli(["train", D_RETRIEVAL, "--steps", "2", *flags, "-o", str(out)]
                                if "--steps" not in flags else ["train", D_RETRIEVAL, *flags, "-o", str(out)])
    assert code == 2 and err.strip() and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_init_from_a_model_of_another_target_is_a_usage_error(tmp_path) -> None:
    other = tmp_path / "other.safetensors"
    ifl.save(compiled.model("min_pairwise", 1e-2, "float32"), other)
    code, _, err = run_cli(["train", D_RETRIEVAL, "--heads", "8", "--d-model", "64", "--steps", "1",
                            "--init", str(other), "-o", str(tmp_path / "m.safetensors")])
    assert code == 2 and "--init" in err and not (tmp_path / "m.safetensors").exists()


def test_a_per_token_target_trains_on_its_defined_positions_and_checks(tmp_path, device: str) -> None:
    program = compiled.program("previous_token", 6)  # target(t : t >= 2) = x(t - 1): NaN at t = 1
    assert program.per_token
    settings = TrainSettings(heads=(2,), d_model=16, d_head=8, d_mlp=16, steps=200, batch=64, lr=1e-2,
                             validation=256, device=device)
    result = train(program, settings, quiet=True)
    assert result.model.config["output"] == "token" and result.model.device.type == device
    x = draw_inputs(program, settings.dist, 8, seed=1)
    with torch.no_grad():
        assert result.model(x.float()).shape == evaluate_shape(program, x)
    assert result.final_nmse < 0.5 * result.history[0][1], result.history
    path = tmp_path / "per_token.safetensors"
    ifl.save(result.model, path)
    code, out, err = run_cli(["check", str(path), "--samples", "100"])
    assert (code, err) == (0, ""), err
    assert "NMSE" in out


def evaluate_shape(program: ifl.Program, x: torch.Tensor) -> torch.Size:
    return ifl.evaluate(program, x).shape


@pytest.mark.parametrize("name, heads", [("frac_prevs", (1,)), ("reverse", (1, 1))])
def test_a_token_program_trains_the_token_family_and_checks(name: str, heads: tuple[int, ...], tmp_path,
                                                           device: str) -> None:
    """Ids in (W_E a learned table [V, D]), the positional code learned; a token output regresses
    its V scores onto the reference token's one-hot; the saved model loads, runs and checks."""
    from programs import TRACR_DIR

    program = ifl.load_program(TRACR_DIR / f"{name}.iflow", length=6)
    settings = TrainSettings(heads=heads, d_model=16, d_head=8, d_mlp=16, steps=120, batch=64, lr=1e-2,
                             validation=256, device=device)
    result = train(program, settings, quiet=True)
    model = result.model
    assert model.config["input"] == "tokens" and model.embed.W_E.shape == (program.vocabulary.size, 16)
    assert model.pos_embed.W_pos.abs().sum() > 0
    assert result.best_nmse < result.history[0][1]
    ids = ifl.encode(program, [program.vocabulary.names[:3]])
    expected = (1, 3, program.vocabulary.size) if program.token_output else (1, 3)
    assert tuple(model(ids).shape) == expected
    path = tmp_path / f"{name}.safetensors"
    ifl.save(model, path)
    code, out, err = run_cli(["check", str(path), "--samples", "50"])
    assert code in (0, 3) and "Traceback" not in err
    assert "measured only" in out or "WRONG answers" in out  # a trained model has no ε: measured, not judged


def test_a_bracket_over_vectors_is_refused_by_train_with_a_located_reason(tmp_path) -> None:
    path = tmp_path / "bracket.iflow"
    path.write_text("input x : R^2\nlength T = 4\nmargin 0.1\ntarget sum_<s> [x(s)[1] < 0]\n", encoding="utf-8")
    code, _out, err = run_cli(["train", str(path), "--heads", "1", "--steps", "1", "-o", str(tmp_path / "m")])
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"{path}:4:16: error: ") and "not trained yet over vectors" in err


def test_the_default_peak_learning_rate_is_the_papers_1e_3() -> None:
    assert TrainSettings(heads=(1,)).lr == 1e-3
    from infoflow_dsl.cli.main import build_parser

    arguments = build_parser().parse_args(["train", D_RETRIEVAL, "--heads", "1"])
    assert arguments.lr == 1e-3
    sweep_arguments = build_parser().parse_args(["sweep", D_RETRIEVAL, "--heads", "1", "-o", "out"])
    assert sweep_arguments.lr == 1e-3


def test_the_nmse_is_unchanged_by_the_standardisation_and_the_model_outputs_y(device: str) -> None:
    generator = torch.Generator().manual_seed(4)
    y = 16.0 + 3.9 * torch.randn(2000, 3, dtype=torch.float64, generator=generator) * torch.tensor([1.0, 2.0, 0.5])
    predicted = y + 0.3 * torch.randn(2000, 3, dtype=torch.float64, generator=generator)
    standard = Standardisation.estimate(y, components=True)
    z = standard.forward(y, components=True)
    assert z.mean(dim=0).abs().max() < 1e-12 and target_variance(z, components=True) == pytest.approx(1.0)
    assert nmse(standard.forward(predicted, True), z, True) == pytest.approx(nmse(predicted, y, True), rel=1e-12)
    torch.testing.assert_close(standard.inverse(z, True), y)
    program = compiled.program("intrinsic_2", 4)  # a target with mean ≈ 4 and std ≈ 2 on N(0, I)
    settings = replace(TOY, heads=(2, 2), steps=30, dist=Distribution("normal", 1.0), device=device)
    result = train(program, settings, quiet=True)
    assert abs(result.standardisation.mean[0]) > 1.0 and result.standardisation.scale > 1.0
    x_val = draw_inputs(program, settings.dist, settings.validation, validation_seed(settings.seed))
    assert model_nmse(result.model, program, x_val) == pytest.approx(result.final_nmse, rel=1e-4)
    trained = result.model.config["trained"]
    assert trained["target_scale"] == result.standardisation.scale and trained["target_mean"] == list(
        result.standardisation.mean)


def test_a_run_reports_its_best_validation_point_beside_its_last(device: str) -> None:
    program = compiled.program("d_retrieval", 4)
    points: list[tuple[int, float]] = []
    result = train(program, replace(TOY, steps=40, lr=3e-2, device=device), quiet=True,
                   on_validation=lambda step, value: points.append((step, value)))
    assert tuple(points) == result.history and result.history[-1] == (40, result.final_nmse)
    after_start = result.history[1:]
    assert (result.best_step, result.best_nmse) == min(after_start, key=lambda p: (p[1], p[0]))
    assert result.best_nmse <= result.final_nmse and result.best_step >= 1  # step 0 is not a training point
    trained = result.model.config["trained"]
    assert (trained["best_nmse"], trained["best_step"]) == (float(f"{result.best_nmse:.6g}"), result.best_step)


def test_padding_that_learns_keeps_the_output_bit_for_bit_and_the_padded_weights_move() -> None:
    program = compiled.program("d_retrieval", 4)
    init = compiled.model("d_retrieval", 1e-2, "float32", 4)
    settings = TrainSettings(heads=(6, 1), d_model=init.d_model + 4, d_head=init.blocks[0].attn.W_Q.shape[2] + 2,
                             d_mlp=init.d_mlp[0] + 3, steps=0, validation=256)
    learning, _ = build_model(program, settings, init)
    zeros, _ = build_model(program, settings, init, learning_padding=False)
    x = model_inputs(program, 300, seed=2).float()
    with torch.no_grad():
        assert torch.equal(learning(x), zeros(x))  # bit for bit: every added unit, head, direction writes 0
        torch.testing.assert_close(learning(x), init(x), rtol=1e-5, atol=1e-5)
    before = {name: t.detach().clone() for name, t in learning.state_dict().items()}
    regions = padded_regions(init, before)
    assert {name.rsplit(".", 1)[1] for name in regions} >= {"W_Q", "W_K", "W_V", "W_O", "W_in", "W_out", "W_E", "W_U"}
    for name, region in regions.items():  # input side random, output side 0
        leaf = name.rsplit(".", 1)[1]
        if leaf in OUTPUT_SIDE:
            assert not bool(before[name][region].any()), name
        elif leaf != "W_K":
            assert bool(before[name][region].all()), name
    result = train(program, replace(settings, steps=5, lr=1e-2), init, quiet=True)
    after = result.model.state_dict()
    for name, region in regions.items():
        if name.endswith(("b_U", "W_pos")):
            continue  # b_U has no padded entries; W_pos is not learned (d_retrieval reads no position)
        assert not torch.equal(after[name][region], before[name][region]), f"{name}: the padded weights did not move"


def padded_regions(init: ifl.CompiledTransformer, padded: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per tensor, a bool mask of the entries outside ``init``'s corner (tensors with any)."""
    state = init.state_dict()
    regions = {}
    for name, tensor in padded.items():
        region = torch.ones_like(tensor, dtype=torch.bool)
        if name in state:
            region[tuple(slice(0, s) for s in state[name].shape)] = False
        if bool(region.any()):
            regions[name] = region
    return regions


def test_device_sampling_and_targets_equal_the_host_path(device: str) -> None:
    for program, dist in ((compiled.program("d_retrieval", 8), Distribution()),
                          (compiled.program("intrinsic_2", 8), Distribution("normal", 2.0)),
                          (compiled.program("triangle_center", 4), Distribution())):  # a ball domain
        if dist.kind == "uniform":
            host = ifl.sample_inputs(program, 64, seed=11)
        else:  # the host path: a CPU generator
            host = 2.0 * torch.randn((64, program.length, program.dimension), dtype=torch.float64,
                                     generator=torch.Generator().manual_seed(11))
        drawn = draw_inputs(program, dist, 64, seed=11, device=device)
        assert drawn.device.type == device and drawn.dtype == torch.float64
        if device == "cpu":
            assert torch.equal(drawn, host)
        target = ifl.evaluate(program, drawn)
        assert target.device.type == device and target.dtype == torch.float64
        torch.testing.assert_close(target.cpu(), ifl.evaluate(program, drawn.cpu()), rtol=1e-12, atol=1e-12)


def test_seed_streams_are_disjoint() -> None:
    """No training batch of any run draws with a held-out set's seed or the standardisation's: run
    seed 1's first batch once shared the validation set's seed (seed·1,000,003 + 1 = 1 + 1,000,003)."""
    runs, steps = range(4), (0, 1, 2, 39_999, 2**32 - 2)
    batches = {batch_seed(seed, step) for seed in runs for step in steps}
    held_out = {validation_seed(seed) for seed in runs} | {STANDARDISATION_SEED}
    assert len(batches) == len(runs) * len(steps) and len(held_out) == len(runs) + 1
    assert not batches & held_out
    program = ifl.load_program(ROOT / "compiled_examples" / "d_retrieval.iflow", length=4)
    for settings in (TrainSettings(heads=(1,), seed=-1), TrainSettings(heads=(1,), steps=MAX_STEPS + 1)):
        with pytest.raises(TrainError, match="seed layout"):
            train(program, settings, quiet=True)
