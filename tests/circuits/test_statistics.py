"""Weight statistics (infoflow_dsl/circuits/statistics.py): what a rotation must and must
not change (the spectrum and the activity are invariant, the zeros are gone), and the CLI's table."""

from __future__ import annotations

import pytest
import torch
from cli_runner import run_cli
from programs import EXAMPLES_DIR
from shipped_models import shipped

import infoflow_dsl as ifl
from infoflow_dsl.circuits.statistics import STATISTICS, excess_kurtosis, weight_statistics
from infoflow_dsl.oracle.tokens import random_ids
from infoflow_dsl.pipeline.reading import program_of


@pytest.mark.parametrize("name", ["tracr/sort", "min_pairwise"])
def test_a_rotation_keeps_the_spectrum_and_the_activity_and_removes_the_zeros(name: str) -> None:
    model = shipped(name)
    program = program_of(model)
    x = random_ids(program, 64, seed=1, length=5) if program.over_tokens else ifl.sample_inputs(
        program, 64, seed=1).to(model.dtype)
    plain, rotated = weight_statistics(model, x), weight_statistics(ifl.disguise(model, rotate=True), x)
    assert set(plain) == {*STATISTICS, "matrices", "constant"}
    assert rotated["stable_rank"] == pytest.approx(plain["stable_rank"], rel=1e-4)  # ‖RW‖ = ‖W‖ for R orthogonal
    assert rotated["active"] == pytest.approx(plain["active"], abs=0.01)  # the same units fire (rounding apart)
    assert plain["zeros"] > 0.5 and rotated["zeros"] < plain["zeros"] / 4
    assert rotated["distinct"] > 10 * plain["distinct"]


def test_the_zero_fraction_and_theexcess_kurtosis_of_known_matrices() -> None:
    """On the one-hot embedding of a token model, computed by hand: W_E's zeros are its entries
    minus its ones."""
    model = shipped("tracr/frac_prevs")
    w_e = model.state_dict()["embed.W_E"]
    assert float((w_e == 0).double().mean()) > 0.5
    gaussian = torch.randn(200_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert abs(excess_kurtosis(gaussian)) < 0.05  # a Gaussian's excess kurtosis is 0


def test_the_cli_prints_the_table_beside_a_trained_model(tmp_path) -> None:
    source = str(EXAMPLES_DIR / "tracr/sort.safetensors")
    code, out, err = run_cli(["disguise", source, "--rotate", "--stats", "--beside", source, "-o",
                              str(tmp_path / "d.safetensors")])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].split() == ["model", *STATISTICS] and [line.split()[0] for line in lines[2:5]] == [
        "compiled", "disguised", "trained"]
    code, _, err = run_cli(["disguise", source, "--stats", "--beside", str(tmp_path / "none.safetensors"), "-o",
                            str(tmp_path / "e.safetensors")])
    assert code == 2 and "--beside" in err and not (tmp_path / "e.safetensors").exists()


def test_constant_matrices_are_left_out_of_the_mean_kurtosis_and_counted(tmp_path) -> None:
    """tracr/hist has an all-zero matrix: its kurtosis is undefined (σ = 0), not inf; the mean is
    over the others, recomputed here from the matrices' own entries, and the table says how many."""
    from infoflow_dsl.circuits.statistics import _matrices

    model = shipped("tracr/hist")
    x = random_ids(program_of(model), 16, seed=1, length=4)
    stats = weight_statistics(model, x)
    matrices = _matrices(model)
    constant = [m for m in matrices if bool((m == m.flatten()[0]).all())]
    assert constant and stats["constant"] == len(constant) and stats["matrices"] == len(matrices)
    assert excess_kurtosis(constant[0].flatten()) is None
    varied = [m.flatten() for m in matrices if not bool((m == m.flatten()[0]).all())]

    def kurtosis(v: torch.Tensor) -> float:  # the definition, apart from excess_kurtosis
        return float(((v - v.mean()) ** 4).mean() / ((v - v.mean()) ** 2).mean() ** 2) - 3
    assert stats["kurtosis"] == pytest.approx(sum(kurtosis(v) for v in varied) / len(varied), rel=1e-12)
    code, out, err = run_cli(["disguise", str(EXAMPLES_DIR / "tracr/hist.safetensors"), "--stats", "-o",
                              str(tmp_path / "d.safetensors")])
    assert code == 0, err
    assert "inf" not in out.split() and (f"compiled: kurtosis over {len(varied)} of {len(matrices)} matrices "
                                         f"({len(constant)} constant, where it is undefined)") in out
