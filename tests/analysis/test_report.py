"""analyze: the report, its JSON, the stored example reports, the CLI and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from programs import CANONICAL, EXAMPLES_DIR, by_name

import infoflow_dsl as ifl
from infoflow_dsl.cli.main import run

REQUIRED_KEYS = {"order", "dimension", "comparisons", "layers", "heads", "info_sets", "cost", "verdict", "reason"}


def _report(name: str, heads=None):
    example = by_name(name)
    return ifl.analyze(ifl.parse_program(example.source, example.path), heads)


@pytest.mark.parametrize("example", CANONICAL, ids=lambda e: e.name)
def test_stored_json_is_what_analyze_prints_today(example, capsys):
    stored = (EXAMPLES_DIR / f"{example.name}.analysis.json").read_text(encoding="utf-8")
    assert run(["analyze", str(EXAMPLES_DIR / example.path), "--json"]) == 0
    assert capsys.readouterr().out == stored


@pytest.mark.parametrize("example", CANONICAL, ids=lambda e: e.name)
def test_json_has_the_design_keys(example):
    data = json.loads(_report(example.name).to_json())
    assert REQUIRED_KEYS <= set(data)
    assert len(data["heads"]) == data["layers"] == len(data["info_sets"]) - 1
    assert data["verdict"] in ("efficient", "inefficient")
    assert (data["reason"] is None) == (data["verdict"] == "efficient")
    assert {"polynomial", "value", "T"} <= set(data["comparisons"])
    assert {"law", "exponent", "exponent_formula"} <= set(data["cost"])


def test_min_pairwise_report():
    data = _report("min_pairwise").to_dict()
    assert (data["order"], data["dimension"], data["layers"], data["heads"], data["verdict"]) == (2, 1, 2, [1, 1],
                                                                                                  "efficient")
    assert data["comparisons"] == {"polynomial": "T^2 + T", "coefficients": ["0", "1", "1"], "value": 1056, "T": 32}
    assert data["cost"]["exponent"] == 0.5 and data["cost"]["infoflow_upper_bound"] == "O(ε^-1)"
    assert data["info_sets"][2] == {"layer": 2, "token": ["t", "t2*(t)"], "readout": ["T+1", "t1*", "t2*(t1*)"]}


def test_triangle_report_points_at_the_three_variable_minimum():
    data = _report("triangle_center").to_dict()
    assert (data["order"], data["verdict"]) == (3, "inefficient")
    assert data["comparisons"]["polynomial"] == "T^3 + T^2 + T"
    assert data["reason"]["span"] == {"line": 5, "column": 8, "end_line": 5, "end_column": 50}
    assert data["cost"]["exponent"] is None and "T₀" in data["cost"]["exponent_formula"]


@pytest.mark.parametrize("big_d", [2, 3, 4, 5, 6])
def test_intrinsic_d_head_budgets_through_the_cli(big_d, capsys):
    path = str(EXAMPLES_DIR / f"intrinsic_{big_d}.iflow")
    for budget, verdict in [(f"{big_d},{big_d}", "efficient"), (f"{big_d - 1},{big_d}", "inefficient"),
                            (f"{big_d},{big_d - 1}", "inefficient")]:
        assert run(["analyze", path, "--json", "--heads", budget]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["verdict"] == verdict
        assert data["dimension"] == big_d
        if verdict == "inefficient":
            assert data["reason"]["kind"] == "heads" and "HC Thm 2" in data["reason"]["law"]


def test_text_report_has_every_section(capsys):
    assert run(["analyze", str(EXAMPLES_DIR / "kth_largest.iflow")]) == 0
    text = capsys.readouterr().out
    for fragment in ("comparison tree", "order of comparison β′   2", "schedule: 2 layer(s), heads per layer [1, 1]",
                     "information sets", "I(T+1, 2) = {T+1, t_1*, t_2*(t_1*)}", "cost law", "verdict   efficient",
                     "one-layer lower bound"):
        assert fragment in text


def test_length_override_changes_the_counts_not_the_schedule(capsys):
    assert run(["analyze", str(EXAMPLES_DIR / "min_pairwise.iflow"), "--json", "--T", "8"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["comparisons"]["value"] == 8 * 8 + 8 and data["heads"] == [1, 1]


def test_plot_writes_a_png(tmp_path: Path, capsys):
    out = tmp_path / "flow.png"
    assert run(["analyze", str(EXAMPLES_DIR / "intrinsic_2.iflow"), "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["flow.png"]  # nothing half-written left beside it


@pytest.mark.parametrize("arguments", [
    ["--heads", "1,x"], ["--heads", "0,0"], ["--heads", "-1"], ["--T", "0"], ["--plot", "/nonexistent/dir/a.png"],
])
def test_bad_flags_exit_2_without_output_files(arguments, capsys):
    assert run(["analyze", str(EXAMPLES_DIR / "min_pairwise.iflow"), *arguments]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.err.strip()


def test_a_bad_program_exits_2(tmp_path: Path, capsys):
    path = tmp_path / "bad.iflow"
    path.write_text("input x : R^2\nlength T = 4\ntarget min_<t> x(s)[1]\n", encoding="utf-8")
    assert run(["analyze", str(path)]) == 2
    assert f"{path}:3:18: error: unknown name 's'" in capsys.readouterr().err
