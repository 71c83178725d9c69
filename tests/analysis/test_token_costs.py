"""What analyze says about token programs (analysis/token_costs.py and the schedule's length
head): the laws that grow with T and why, the scores' ranks, exactness, causality, and a
verdict (exit 0) for every token program of the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli
from programs import TOKENS

import infoflow_dsl as ifl
from infoflow_dsl.analysis.report import TOKEN_ROUTE
from infoflow_dsl.language import typed as ir


def report_of(name: str) -> dict:
    example = next(e for e in TOKENS if e.name == name)
    return ifl.analyze(ifl.parse_program(example.source, example.path)).to_dict()


@pytest.mark.parametrize("example", TOKENS, ids=lambda e: e.name)
def test_analyze_gives_every_token_program_a_verdict(example, tmp_path: Path) -> None:
    path = tmp_path / example.path
    path.write_text(example.source, encoding="utf-8")
    code, out, err = run_cli(["analyze", str(path), "--json"])
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert data["verdict"] in ("efficient", "inefficient") and data["exactness"] is not None
    code, text, err = run_cli(["analyze", str(path)])
    assert code == 0 and "verdict" in text


def test_len_is_a_length_head_whose_decoding_grows_with_T() -> None:
    data = report_of("length")
    (head,) = data["schedule"]
    assert (head["head"], head["kind"], head["layer"]) == ("len", "length", 1)
    assert not data["cost"]["independent_of_T"] and data["cost"]["T_exponent"] == 1
    (growth,) = data["cost"]["T_growth"]
    assert growth["function"] == "len" and "O(T) FFN units" in growth["reason"]
    assert not data["causal"]


def test_reverse_fetches_the_mirrored_position_after_len() -> None:
    heads = {h["head"]: h for h in report_of("reverse")["schedule"]}
    assert heads["len"]["layer"] == 1
    (fetch,) = [h for h in heads.values() if h["kind"] == "position"]
    assert (fetch["layer"], fetch["compares"]) == (2, "x(len + 1 - t) by score 2p·s − s²")


def test_the_cost_law_counts_the_scores_ranks() -> None:
    cost = report_of("sort_unique")["cost"]
    assert [(r["node"], r["rank"], r["grows_with_T"]) for r in cost["finite_ranks"]] == [
        ("c1", 10, False), ("c2", 10, True)]
    assert "score ranks c1 10 (V), c2 10 (~T)" in cost["law"]
    reasons = [g["reason"] for g in cost["T_growth"]]
    assert any("10 indicator products" in r and "grow linearly with T" in r for r in reasons)
    hist = report_of("hist")["cost"]
    assert [(r["rank"], r["grows_with_T"]) for r in hist["finite_ranks"]] == [(4, False)]
    assert "V (the vocabulary's size, independent of T)" in hist["finite_ranks"][0]["law"]


def test_exactness_lists_every_comparison_with_its_gap() -> None:
    exactness = report_of("frac_prevs")["exactness"]
    assert exactness == {"comparisons": [{"comparison": 'x(s) == "l"', "span": exactness["comparisons"][0]["span"],
                                          "gap": "1", "gap_value": 1.0, "values": [4, 1]}],
                         "retrievals": [], "exact": True}
    dyck = report_of("shuffle_dyck2")["exactness"]
    gaps = [(entry["gap"], entry["values"]) for entry in dyck["comparisons"]]
    assert gaps.count(("1/10", [65, 1])) == 4  # a prefix mean of ±1 over m ≤ 10 tokens against 0: 1/10
    assert gaps.count(("1", [4, 1])) == 8 and dyck["exact"]


def test_a_token_retrieval_needs_no_margin() -> None:
    data = report_of("sort")
    (retrieval,) = data["exactness"]["retrievals"]
    assert retrieval["score_gap"] == "1"
    assert any("no margin is needed" in note for note in data["notes"])
    assert not any("declare `margin" in note for note in data["notes"])


def test_a_sum_whose_range_follows_the_query_is_efficient_over_tokens_as_compile_builds_it() -> None:
    example = next(e for e in TOKENS if e.name == "tok_not_or")
    program = ifl.parse_program(example.source, example.path)
    assert ifl.analyze(program).verdict == "efficient"  # count × mean, the count an exact position feature
    assert ifl.compile(program, eps=1e-2, dtype="float64", samples=0).config["schedule"]["verdict"] == "efficient"


def test_a_token_program_no_construction_builds_is_inefficient_and_compile_refuses_it() -> None:
    program = ifl.parse_program('input x : token {1, 2, 3}\nlength T = 6\ntarget mean_<s, t : s <= t> [x(s) == x(t)]\n',
                                 "pairs.iflow")
    data = ifl.analyze(program).to_dict()
    assert data["verdict"] == "inefficient" and data["reason"]["kind"] == "construction"
    assert "a mean over positions its conditions link" in data["reason"]["message"]
    assert data["cost"]["fallback"]["refused"] == TOKEN_ROUTE
    with pytest.raises(ifl.CompileError, match=r"conditions link.*--allow-inefficient .* does not apply"):
        ifl.compile(program, eps=1e-2, dtype="float64", samples=0)


def test_the_plot_draws_the_length_head_and_the_mirrored_fetch(tmp_path: Path) -> None:
    from infoflow_dsl.analysis.plot import _arrows

    columns = ["1", "2", "3", "…", "9", "10", "T+1"]
    tokens = [0, 1, 2, 4, 5]
    mirrored = _arrows("position", "token", ir.ReflectedPosition(ir.PositionVariable("t"), 1), tokens, 6, columns, 1)
    assert mirrored == [(5, 0), (4, 1), (1, 4), (0, 5)]  # x(len + 1 - t) at len = T = 10: 10 → 1, 9 → 2, ...
    assert len(_arrows("length", "token", None, tokens, 6, columns, 1)) == len(tokens) ** 2
    example = next(e for e in TOKENS if e.name == "reverse")
    path = tmp_path / example.path
    path.write_text(example.source, encoding="utf-8")
    code, _out, err = run_cli(["analyze", str(path), "--plot", str(tmp_path / "reverse.png")])
    assert (code, err) == (0, "") and (tmp_path / "reverse.png").read_bytes().startswith(b"\x89PNG")
