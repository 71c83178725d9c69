"""check: random, corner, near-tie and adversarial verification, the layer-by-layer trace, and
robust loading of model files."""

from __future__ import annotations

import contextlib
import io
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from compiled import CANONICAL_EFFICIENT, program
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.cli.main import run
from infoflow_dsl.oracle.evaluate import retrieval_margin
from infoflow_dsl.pipeline.reading import program_of
from infoflow_dsl.verify.check import check_model, clip_to_domain, near_ties, trace


def _shipped(name: str) -> ifl.CompiledTransformer:
    return ifl.load(EXAMPLES_DIR / f"{name}.safetensors")


SHIPPED = {name: _shipped(name) for name in CANONICAL_EFFICIENT}


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_models_are_within_eps_on_generated_inputs(name, device):
    from infoflow_dsl.pipeline.devices import on_device

    model = on_device(SHIPPED[name], device)
    program = program_of(model)
    domain = program.domain  # a ball is sampled in its bounding box, then projected into it
    low, high = (domain.low, domain.high) if hasattr(domain, "low") else (-domain.radius, domain.radius)
    eps = model.config["eps"]

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(arrays(np.float64, (program.length, program.dimension), elements=st.floats(low, high)))
    def within(x: np.ndarray) -> None:
        batch = clip_to_domain(program, torch.from_numpy(x)[None])
        covered = torch.ones((), dtype=torch.bool)
        if program.margin is not None:  # (1,) or, per token, (1, T): the positions the margin covers
            covered = retrieval_margin(program, batch) >= program.margin
            assume(bool(covered.any()))
        with torch.no_grad():
            truth = ifl.evaluate(program, batch)  # NaN where a per-token target is undefined
            error = (model(batch).double().cpu() - truth).abs()
        if error.dim() > covered.dim():
            covered = covered.reshape(*covered.shape, *[1] * (error.dim() - covered.dim()))
        error = torch.where(covered & ~truth.isnan(), error, 0.0)
        assert float(error.max()) <= eps

    within()


def _perturb(model: ifl.CompiledTransformer, tensor: str) -> str:
    """Scale the largest entry of ``tensor`` by 1.01; return its index as text."""
    weights = dict(model.named_parameters())[tensor]
    index = torch.unravel_index(weights.abs().argmax(), weights.shape)
    with torch.no_grad():
        weights[index] *= 1.01
    return str(tuple(int(i) for i in index))


@pytest.mark.parametrize(("name", "tensor", "named"), [
    ("min_pairwise", "blocks.0.attn.W_V", "head c1 of layer 1"),
    ("relu_min_max_abs", "blocks.0.mlp.W_out", "FFN block L1:r"),
    ("first_three", "blocks.0.attn.W_V", "head p"),
])
def test_a_weight_perturbed_by_one_percent_is_caught_and_traced(tmp_path: Path, capsys, name, tensor, named):
    model = ifl.compile(program(name), eps=1e-3, dtype="float64", samples=0)
    _perturb(model, tensor)
    path = tmp_path / "perturbed.safetensors"
    ifl.save(model, path)
    assert run(["check", str(path), "--samples", "2000", "--trace"]) == 3
    out = capsys.readouterr().out
    assert "ABOVE ε" in out
    trace_line = next(line for line in out.splitlines() if "trace" in line)
    assert named in trace_line, trace_line


@pytest.mark.parametrize("name", ["min_pairwise", "kth_largest", "nearest_neighbour", "intrinsic_2"])
def test_a_correct_model_follows_its_circuit(name):
    model = SHIPPED[name]
    program = program_of(model)
    x = ifl.sample_inputs(program, 32, seed=4)
    assert trace(model, program, x) is None


def test_adversarial_search_beats_random_sampling_and_stays_within_eps():
    model = SHIPPED["min_pairwise"]
    result = check_model(model, program_of(model), samples=2000, adversarial=150, progress=False)
    assert result.adversarial_worst is not None
    assert result.adversarial_worst > result.random_worst  # found by the search, not by sampling
    assert result.worst_error <= model.config["eps"] and result.within


@pytest.mark.parametrize("name", ["kth_largest", "first_three", "nearest_neighbour"])
def test_check_passes_correct_models_through_the_cli(capsys, name):
    assert run(["check", str(EXAMPLES_DIR / f"{name}.safetensors"), "--samples", "1000", "--adversarial", "30"]) == 0
    out = capsys.readouterr().out
    assert "verdict          within ε" in out and "worst input" in out


def test_near_ties_put_two_tokens_within_a_millionth_of_each_other():
    program = program_of(SHIPPED["min_pairwise"])
    x = near_ties(program, 50, seed=1)
    distances = torch.cdist(x, x) + torch.eye(x.shape[1]) * 1e9
    assert float(distances.amin(dim=(1, 2)).max()) <= 2e-6 * 4
    assert float(x.abs().max()) <= 1.0


# ----------------------------------------------------------------------------- malformed files


def _valid_bytes() -> bytes:
    return (EXAMPLES_DIR / "kth_largest.safetensors").read_bytes()


def _rewrite_config(change) -> bytes:
    model = ifl.load(EXAMPLES_DIR / "kth_largest.safetensors")
    config = json.loads(json.dumps(model.config))
    change(config)
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    return safetensors.torch.save(tensors, metadata={"format": "infoflow/1", "infoflow": json.dumps(config)})


def _wrong_shape() -> bytes:
    model = ifl.load(EXAMPLES_DIR / "kth_largest.safetensors")
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    tensors["unembed.W_U"] = torch.zeros(3, 1)
    return safetensors.torch.save(tensors, metadata={"format": "infoflow/1",
                                                     "infoflow": json.dumps(model.config)})


def _source_no_longer_checks(config: dict) -> None:
    config["program"]["source"] = config["program"]["source"].replace("target", "targte")


MALFORMED = {
    "truncated": (lambda: _valid_bytes()[:-100], "truncated"),
    "not safetensors": (lambda: b"this is not a model file at all", "not a safetensors file"),
    "no header": (lambda: struct.pack("<Q", 10**12), "not a safetensors file"),
    "safetensors without infoflow metadata": (
        lambda: safetensors.torch.save({"w": torch.zeros(2)}), "without infoflow metadata"),
    "tensors of the wrong shape": (_wrong_shape, "unembed.W_U"),
    "a program that no longer checks": (lambda: _rewrite_config(_source_no_longer_checks), "no longer checks"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_malformed_files_exit_2_with_one_line(tmp_path: Path, capsys, case):
    make, message = MALFORMED[case]
    path = tmp_path / "model.safetensors"
    path.write_bytes(make())
    assert run(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert str(path) in err and message in err


def test_a_missing_file_exits_2(tmp_path: Path, capsys):
    assert run(["check", str(tmp_path / "absent.safetensors")]) == 2
    assert "absent.safetensors" in capsys.readouterr().err


def test_check_model_sends_a_token_model_to_the_token_measurement() -> None:
    from handmade_models import token_model, token_program

    with pytest.raises(ValueError, match=r"measure\.tokens\.measure_tokens"):
        check_model(token_model("first"), token_program("first"), 10, progress=False)


def test_trace_reads_a_token_models_ids() -> None:
    """trace against a given circuit model on ids: none found against the model itself; a changed
    row of the table is found in the embedding, at the first token holding that id."""
    from handmade_models import token_model, token_program

    model, program = token_model("fraction"), token_program("fraction")
    ids = torch.tensor([[1, 0, 2, 0], [0, 0, 1, 2]])
    assert trace(model, program, ids, reference=token_model("fraction")) is None
    changed = token_model("fraction")
    with torch.no_grad():
        changed.embed.W_E[2, 0] = 0.5  # token "c" now also reads as "a" in direction 0
    found = trace(model, program, ids, reference=changed)
    assert found is not None and (found.layer, found.direction, found.token) == (0, "r0", 3)


def test_the_adversarial_search_leaves_no_hypothesis_folder_where_it_runs(tmp_path: Path) -> None:
    """Hypothesis caches under ``.hypothesis/`` in the current folder; ``check --adversarial``
    keeps nothing there (a fresh process: the test process has configured hypothesis itself)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "infoflow_dsl.cli.main", "check",
                             str(EXAMPLES_DIR / "min_pairwise.safetensors"), "--samples", "8", "--adversarial", "10"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "adversarial" in result.stdout and list(tmp_path.iterdir()) == []


def test_a_model_whose_outputs_are_nan_is_the_worst_not_within_eps(tmp_path: Path) -> None:
    """One attention β set to 3e38 (finite, so the file is accepted): every output is NaN. The
    check used to print "worst error -1 … within ε" (NaN > worst is never true), exit 0."""
    from infoflow_dsl.transformer.model import CompiledTransformer

    model = SHIPPED["min_pairwise"]
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    state["blocks.0.attn.beta"][0] = 3e38
    broken = CompiledTransformer(model.config, state, dtype=model.dtype)
    program = program_of(model)
    assert bool(broken(ifl.sample_inputs(program, 2).to(model.dtype)).isnan().all())
    result = check_model(broken, program, samples=50, progress=False)
    assert result.worst_error == float("inf") and not result.within
    path = tmp_path / "nan.safetensors"
    ifl.save(broken, path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["check", str(path), "--samples", "50"])
    assert code == 3 and "ABOVE ε" in out.getvalue() and "NaN or infinite" in out.getvalue()


@pytest.mark.parametrize("name", ["kth_largest", "nearest_neighbour", "intrinsic_2"])
def test_check_on_the_device_gives_the_cpus_errors_and_verdict(name: str, device: str) -> None:
    """``check --device``: the model's forwards on the device, the reference on the host; the
    worst error to float rounding, the same verdict, the caller's model left on the CPU."""
    from infoflow_dsl.pipeline.devices import on_device

    model = SHIPPED[name]
    here = check_model(model, program_of(model), samples=500, progress=False)
    there = check_model(on_device(model, device), program_of(model), samples=500, progress=False)
    assert model.device.type == "cpu" and there.within == here.within and there.evaluated == here.evaluated
    assert there.worst_error == pytest.approx(here.worst_error, rel=1e-3, abs=1e-6)
    assert run(["check", str(EXAMPLES_DIR / f"{name}.safetensors"), "--samples", "500", "--device", device]) == 0


def test_a_device_that_is_not_there_is_exit_2(capsys) -> None:
    for device in ("tpu", "cuda:99"):
        assert run(["check", str(EXAMPLES_DIR / "kth_largest.safetensors"), "--device", device]) == 2
        assert f"--device {device}" in capsys.readouterr().err
