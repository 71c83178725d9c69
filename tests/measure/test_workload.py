"""The estimate of a measurement's memory and time (infoflow_dsl/measure/workload.py): it is
made before anything is allocated, it covers what the measurements really hold and run, and a
request over the machine's limits is refused with its figures and what to change (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli
from compiled import model, program
from handmade_models import token_model, token_program

import infoflow_dsl as ifl
from infoflow_dsl.measure import workload
from infoflow_dsl.measure.tokens import largest_part, token_inputs
from infoflow_dsl.measure.vectors import CORNERS, measurement_cost, model_inputs
from infoflow_dsl.verify.check import check_inputs, check_model, check_workload

LONG_MEAN = """input x : R^2 in [-1, 1]
length T = 200000
target mean_<t> x(t)
"""


def test_a_long_program_is_refused_before_its_measurement_and_compiles_without_one(tmp_path: Path) -> None:
    """T = 200,000: 512 inputs of 200,000 tokens, each forward quadratic in T. The compile stops
    before drawing an input, with the time it would take and the flag that avoids it; with
    --samples 0 the model is built (its weights are linear in T), and checking it is refused in
    turn: even one random input is too much, since the corners are always checked."""
    source, output = tmp_path / "long.iflow", tmp_path / "long.safetensors"
    source.write_text(LONG_MEAN)
    code, out, err = run_cli(["compile", str(source), "-o", str(output)])
    assert code == 2 and out == "" and not output.exists()
    assert "measuring 256 random inputs and 256 corners at T = 200,000 would need about" in err
    assert "of work" in err and "--samples N" in err and "Traceback" not in err
    code, _, err = run_cli(["compile", str(source), "--samples", "0", "-o", str(output)])
    assert (code, err) == (0, "") and output.exists()
    code, out, err = run_cli(["check", str(output), "--samples", "1"])
    assert code == 2 and out == ""
    assert "checking 1 random input, 256 corners and the near ties at T = 200,000" in err
    assert "check a model compiled for a smaller T" in err


def test_the_estimate_holds_what_compile_and_check_draw() -> None:
    """The bytes of inputs the estimate counts are at least those the measurements hold at once:
    compile's inputs (drawn together) and check's largest chunk, the corners included."""
    target, compiled = program("min_pairwise"), model("min_pairwise", 1e-2, "float32")
    drawn = model_inputs(target, 300, seed=0)
    forward = workload.forward_bytes(compiled, target.length)
    estimate = workload.measurement_workload(compiled, target, 300, "")
    assert estimate.held_bytes - forward == drawn.numel() * drawn.element_size()
    assert estimate.operations == 556 * measurement_cost(compiled, target)
    largest = max(chunk.numel() * chunk.element_size() for chunk in check_inputs(target, 3000, seed=0))
    assert check_workload(compiled, target, 3000, 0).held_bytes - forward >= largest


def test_the_token_estimate_sums_the_lengths_the_measurement_runs() -> None:
    """With no random sequences the measured inputs are fixed: the estimate's Σ count·L² equals
    the one counted over the real parts, and no part holds more ids than ``largest_part``."""
    target, compiled = token_program("identity"), token_model("identity")
    parts = list(token_inputs(target, 0, seed=0))
    squares = sum(part.ids.shape[0] * part.ids.shape[1] ** 2 for part in parts)
    estimate = workload.measurement_workload(compiled, target, 0, "")
    per_square = measurement_cost(compiled, target) / target.length**2
    assert estimate.operations == pytest.approx(per_square * squares, rel=1e-12)
    assert max(part.ids.numel() for part in parts) <= largest_part(target)


def test_more_inputs_than_memory_allows_are_refused_with_the_flag_to_lower(monkeypatch: pytest.MonkeyPatch) -> None:
    target, compiled = program("min_pairwise"), model("min_pairwise", 1e-2, "float32")
    enough_for_one = check_workload(compiled, target, 1, 0).held_bytes
    monkeypatch.setattr(workload, "memory_limit", lambda: int(enough_for_one) + 1)
    with pytest.raises(ifl.WorkloadError, match=r"checking 1,000,000 random inputs.*at once \(this process may use "
                       r".*lower --samples or --adversarial"):
        check_model(compiled, target, samples=1_000_000)


def test_the_time_limit_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    target, compiled = program("min_pairwise"), model("min_pairwise", 1e-2, "float32")
    monkeypatch.setenv("INFOFLOW_MAX_SECONDS", "1e-6")
    with pytest.raises(ifl.WorkloadError, match=r"of work .* the limit is 1e-06 s, INFOFLOW_MAX_SECONDS raises it"):
        check_model(compiled, target, samples=10)
    monkeypatch.setenv("INFOFLOW_MAX_SECONDS", "soon")
    with pytest.raises(ifl.WorkloadError, match="INFOFLOW_MAX_SECONDS='soon': expected a positive number"):
        check_model(compiled, target, samples=10)
    monkeypatch.setenv("INFOFLOW_MAX_SECONDS", "600")
    assert check_model(compiled, target, samples=10).evaluated == 10 + CORNERS + 16


def test_a_token_check_over_the_limit_says_what_helps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A limit under the fixed part (short and constant sequences): only a smaller T helps. A
    limit above it but under a million random sequences: fewer samples help."""
    path, target, compiled = tmp_path / "identity.safetensors", token_program("identity"), token_model("identity")
    ifl.save(compiled, path)
    fixed = workload.measurement_workload(compiled, target, 0, "").seconds
    monkeypatch.setenv("INFOFLOW_MAX_SECONDS", f"{fixed / 2!r}")
    code, out, err = run_cli(["check", str(path), "--samples", "0"])
    assert code == 2 and out == ""
    assert "even with --samples 0 the short and constant sequences" in err and "smaller T" in err
    assert workload.measurement_workload(compiled, target, 1_000_000, "").seconds > 4 * fixed
    monkeypatch.setenv("INFOFLOW_MAX_SECONDS", f"{2 * fixed!r}")
    code, _, err = run_cli(["check", str(path), "--samples", "1000000"])
    assert code == 2 and err.endswith("; lower --samples\n")


@pytest.mark.parametrize(("count", "shown"), [(999, "999 bytes"), (8.2e9, "8.2 GB"), (35e6, "35 MB"),
                                               (2.5e12, "2.5 TB")])
def test_bytes_are_shown_in_decimal_units(count: float, shown: str) -> None:
    assert workload.shown_bytes(count) == shown


@pytest.mark.parametrize(("seconds", "shown"), [(40.0, "40 s"), (720.0, "12 minutes"), (12_600.0, "3.5 hours"),
                                                 (1.4e6, "16 days")])
def test_seconds_are_shown_in_the_unit_that_reads(seconds: float, shown: str) -> None:
    assert workload.shown_seconds(seconds) == shown


def test_the_memory_limit_is_at_most_the_machine_and_at_least_a_gigabyte() -> None:
    import os

    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 2**30 <= workload.memory_limit() <= physical


def test_report_refuses_to_measure_again_over_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report measures the model again on its compile's inputs: over the limit, exit 2 and no page."""
    path, page = tmp_path / "min.safetensors", tmp_path / "min.html"
    ifl.save(model("min_pairwise", 1e-2, "float32"), path)
    monkeypatch.setenv("INFOFLOW_MAX_SECONDS", "1e-9")
    code, out, err = run_cli(["report", str(path), "-o", str(page)])
    assert code == 2 and out == "" and not page.exists()
    assert "the report measures again on the inputs its compile measured" in err
