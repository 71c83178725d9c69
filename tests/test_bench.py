"""The benchmark code (bench/run.py) at toy sizes: every table is built, the plot is drawn.

No timing is asserted; this only keeps the benchmark runnable."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import run  # noqa: E402
from plain import plain_like  # noqa: E402

import infoflow_dsl as ifl  # noqa: E402


def test_the_benchmark_builds_every_table_at_toy_sizes(tmp_path: Path) -> None:
    png = tmp_path / "scaling.png"
    report = run.measure(run.SMOKE, ["cpu"], png)
    for title in ("Compile latency", "Compile at long T", "Parameters against ε", "Parameters against T",
                  "Forward against a plain transformer", "Reference evaluator against numpy", "Peak memory"):
        assert f"### {title}" in report
    assert "Measured " in report and "fitted k" in report and "compiled / plain" in report
    assert png.read_bytes().startswith(b"\x89PNG")
    assert re.search(r"\| exit [0-9]", report) is None  # every CLI call of every table succeeded
    check_row = next(line for line in report.split("### Peak memory")[1].splitlines() if "`infoflowc check`" in line)
    assert check_row.rstrip(" |").rsplit("|", 1)[1].strip() == "0"  # the check's exit code


def test_the_plain_transformer_has_the_compiled_shape() -> None:
    model = ifl.compile(run.program("min_pairwise", 8), eps=1e-2, device="cpu", samples=0)
    plain = plain_like(model)
    y = plain(ifl.sample_inputs(run.program("min_pairwise", 8), 3, seed=0).to(model.dtype))
    assert y.shape == (3,) and y.dtype == model.dtype
    for block, ours in zip(plain.blocks, model.blocks, strict=True):
        assert block.heads == ours.attn.W_Q.shape[0]
        assert block.mlp[0].out_features == ours.mlp.W_in.shape[1]


def test_fitted_exponent_recovers_a_power_law() -> None:
    eps = [1e-1, 1e-2, 1e-3]
    assert run.fitted_exponent(eps, [round(5 * e**-1.5) for e in eps]) == pytest.approx(1.5, abs=1e-3)
    assert torch.tensor(run.fitted_exponent([1e-1], [3])).isnan()


def test_every_route_bench_measures_and_renders_a_program(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_every_route as every

    monkeypatch.setattr(every, "SAMPLES", 50)
    results = every.measure_program("squared_distance_ball")
    assert [r.eps for r in results] == list(every.EPSILONS)
    for result in results:
        assert result.deep_within and result.auto_ok
        assert set(result.nonzero) == set(every.ROUTES) and all(n for n in result.nonzero.values())
    text = every.render(results, {}, 1.0, 1)
    assert "| squared_distance_ball |" in text and f"**{len(results)} of {len(results)}**" in text


def test_startup_bench_times_a_light_command_and_renders_its_table() -> None:
    import bench_startup as startup

    cases = [startup.CASES[0], next(case for case in startup.CASES if case[1][-1] == "--help")]
    [timings] = startup.measure(cases, [startup.ROOT], repeats=1)
    assert all(0 < t.cpu and 0 < t.wall < 60 for t in timings)
    text = startup.render(cases, timings, None, 1)
    assert "| `infoflowc --help` |" in text and "best of 1 rounds" in text and "a6f9cb8" not in text


def test_training_data_bench_measures_both_paths_and_renders_ratios() -> None:
    import bench_training_data as data

    text = data.main(["--smoke"])
    row = next(line for line in text.splitlines() if line.startswith("| d_retrieval | 4 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[4] == "cpu" and all(float(c) > 0 for c in cells[5:])


def test_batched_sweep_bench_runs_both_ways_and_renders_the_ratio() -> None:
    import bench_batched_sweep as batched

    text = batched.main(["--smoke"])
    row = next(line for line in text.splitlines() if line.startswith("| d_retrieval | 4 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[7] == "2 / 2" and float(cells[11]) < 1e-3  # the batched seeds are their unbatched twins


def test_the_gpu_check_runs_end_to_end_at_toy_sizes_and_writes_its_json(tmp_path: Path) -> None:
    """bench/gpu_check.py --small (what scripts/gpu_check.sh --small runs after the tests), on the
    CPU here: every section but torch.compile's measured, none failed; then the time-boxed sweep."""
    import json

    import gpu_check

    figures = gpu_check.main(["--small", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "gpu_check.json").read_text(encoding="utf-8"))["device"] == figures["device"]
    for name in ("compile", "check", "forward", "training", "paper_sweep", "ground_truth"):
        assert "error" not in figures[name] and "skipped" not in figures[name], figures[name]
    assert figures["compile"]["weights_identical_to_cpu"] and figures["compile"]["within_eps"]
    assert figures["training"]["batched_runs"] == 9 and figures["training"]["alone_steps_per_second"] > 0
    sweep = figures["paper_sweep"]
    assert [d["D"] for d in sweep["per_D"]] == [2, 3, 4, 5, 6] and all(d["rows"] == 9 for d in sweep["per_D"])
    assert sweep["full_sweep_run_steps"] == 5 * 3 * 3 * 40_000 and sweep["full_sweep_minutes_at_this_rate"] > 0
    assert "training_compiled" not in figures  # torch.compile stays out of the tests
    boxed = gpu_check.main(["--small", "--out", str(tmp_path), "--paper-minutes", "1"])["paper_sweep_time_boxed"]
    assert boxed["pilot"]["per_D"][0]["D"] == 2 and len(boxed["per_D"]) == 5


def test_tracr_bench_measures_a_program_and_renders_the_side_by_side_table() -> None:
    import bench_tracr as tracr

    row = tracr.measure("reverse", 5, samples=40)
    assert row.exact64 == "100%" and row.exact32 == "100%" and row.parameters < tracr.TRACR_PARAMETERS["reverse"][0]
    table = tracr.render([row], {"reverse": ("efficient", "1", "len", "–")})
    assert "| reverse | 5 |" in table and "19,700 (100% exact)" in table


def test_export_targets_bench_measures_a_row(tmp_path: Path) -> None:
    """bench_export's ``targets`` row: tl-native, hf-llama and the self-contained GPT-2 of one example."""
    import bench_export

    row = bench_export.measure_targets("previous_token", 16, tmp_path)
    cells = [cell.strip() for cell in row.strip("| \n").split("|")]
    assert cells[0] == "previous_token" and len(cells) == 13
    assert all(float(cells[i]) <= 1e-12 for i in (1, 6))  # tl-native and self-contained gaps
    assert cells[10] == "true"  # previous_token's masks are causal: config.json keeps GPT-2's default


def test_rasp_bench_measures_the_suite_and_refusals_and_renders_its_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench_rasp
    import rasp_suite

    assert len(rasp_suite.PROGRAMS) >= 40 and len({p.name for p in rasp_suite.PROGRAMS}) == len(rasp_suite.PROGRAMS)
    monkeypatch.setattr(bench_rasp, "SAMPLES", 20)
    table, exact, total = bench_rasp.suite_table((1,), rasp_suite.PROGRAMS[:2])
    assert (exact, total) == (2, 2) and "| word_length | string map | yes," in table
    from infoflow_dsl import rasp

    refused = bench_rasp.measure(lambda: rasp.ConstantSOp([1, 2]).named("pair"), ("a",), 3)
    assert refused.exact is None and "ConstantSOp 'pair'" in refused.detail


def test_the_circuit_corpus_builds_four_tiers_resumes_and_summarises(tmp_path: Path, capsys) -> None:
    import circuit_corpus

    assert circuit_corpus.main([str(tmp_path), "--quick"]) == 0
    records = sorted(p.name for p in (tmp_path / "truths").glob("*.json"))
    skipped = sorted(p.name for p in (tmp_path / "skipped").glob("*.json"))
    assert "tracr_reverse.superposed.json" in records and "prefix_mean.superposed.json" in skipped
    superposed = len(records) - 9
    assert len(records) + len(skipped) == 12 and len(list((tmp_path / "models").glob("*.safetensors"))) == len(records)
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert (f"{len(records)} models; certificate (every pair outside the graph ablated at once, within ε) holds on "
            f"{len(records)}") in summary
    assert all(f"| {tier} | 3 |" in summary for tier in circuit_corpus.TIERS)
    assert f"| superposed | {superposed} |" in summary and "superposed at one depth" in summary
    merged = next(line for line in summary.splitlines() if line.startswith("| merged | 3 |"))
    features, dimensions = (int(n.replace(",", "")) for n in re.search(r"\| ([\d,]+) → ([\d,]+) \(", merged).groups())
    assert dimensions < features  # the third tier's residual is compressed below its number of features
    capsys.readouterr()
    assert circuit_corpus.main([str(tmp_path), "--quick"]) == 0  # everything written: nothing runs again
    assert capsys.readouterr().out.startswith("0 (program, tier) to build")
    import circuit_discovery

    from infoflow_dsl.circuits import ABLATIONS
    from infoflow_dsl.discovery import METHODS
    from infoflow_dsl.discovery.benchmark import RESULTS, read_rows

    out = tmp_path / "discovery"
    assert circuit_discovery.main([str(tmp_path), str(out), "--workers", "1", "--tiers", "plain", "--only",
                                   "tracr_*,nothing_*"]) == 0
    rows = read_rows(out / RESULTS)
    assert {(r["model"], r["tier"]) for r in rows} == {("tracr_reverse", "plain")}
    assert len(rows) == len(METHODS) * len(ABLATIONS)


def test_the_circuit_corpus_trained_tier_admits_a_certified_model_and_refuses_a_broken_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import circuit_corpus

    only = ["--quick", "--tiers", "trained", "--programs", "rasp_word_length"]
    assert circuit_corpus.main([str(tmp_path / "kept"), *only]) == 0
    record = json.loads((tmp_path / "kept" / "truths" / "rasp_word_length.trained.json").read_text(encoding="utf-8"))
    assert record["holds"] and record["tier"] == "trained"
    assert len(list((tmp_path / "kept" / "models").glob("*.safetensors"))) == 1
    assert len(record["truth"]["zero"]["edges"]) == record["pairs"]  # every pair was a candidate
    summary = (tmp_path / "kept" / "summary.md").read_text(encoding="utf-8")
    assert "| trained | 1 |" in summary and "1 admitted, 0 refused" in summary
    monkeypatch.setitem(circuit_corpus.TRAINED, "noise", 3.0)  # noise that breaks the function
    monkeypatch.setitem(circuit_corpus.TRAINED, "steps", 1)
    monkeypatch.setitem(circuit_corpus.GENTLER, "noise", 3.0)  # the second try breaks it too
    assert circuit_corpus.main([str(tmp_path / "broken"), *only]) == 0
    refused = json.loads((tmp_path / "broken" / "refused" / "rasp_word_length.trained.json").read_text(
        encoding="utf-8"))
    assert not refused["holds"] and refused["refused"]
    assert not list((tmp_path / "broken" / "models").glob("*.safetensors"))


def test_the_superposition_bench_row_of_a_numeric_peak_packs_it_and_checks_both_models() -> None:
    """bench/superposition_below_compress.py's row on a numeric peak (Tracr's count_a): F from
    --compress (tight lifetimes), nothing folded, its numbers packed in float64 (D = F packed < F,
    "2 packed" at one depth, the tables' units counted), the default dtype at the same D in float64
    (float32's rounding does not certify its tables, so compile picks float64 and says why), and
    both models right on every input checked (their numbers within the program's ε)."""
    import superposition_below_compress as bench

    program = ifl.load_program(BENCH.parent / "compiled_examples" / "tracr" / "count_a.iflow")
    line, alive_back, width, default = bench.row("tracr/count_a", program)
    cells = [c.strip() for c in line.strip("| ").split("|")]
    plain, alive, folded, packed, least = (int(c) for c in cells[1:6])
    assert least == packed < folded == alive < plain and (alive_back, width) == (alive, least)
    assert cells[7] == f"{alive - packed} packed" and "units" in cells[9]
    assert cells[10] == f"{default} (float64)" and default == least and int(cells[11]) > 1000
    for result in cells[12].split("; "):
        error, eps = result.split(" (")
        assert float(error) <= float(eps.rstrip(")"))
    folds = {"duplicates": [["a", "b"]], "spanned": [["c", []], ["d", []]], "summed": []}
    assert bench.one_depth(12, 11, 11, 8, folds) == "1 folded (1 duplicates, 2 spanned columns), 3 superposed"
    assert bench.one_depth(6, 5, 5, 5, {"summed": [["e", []]]}) == "1 folded (1 sums)"
    assert bench.one_depth(4, 4, 2, 2, {}) == "2 packed"
