"""``infoflowc benchmark``: a small corpus scored, killed and resumed, and its summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli
from dead_ray import dead_ray_head
from shipped_models import shipped

import infoflow_dsl as ifl
from infoflow_dsl.discovery.benchmark import RESULTS, read_rows

torch.set_num_threads(1)
MEASURED = {"samples": 20, "seed": 1, "length": None}
ROOT = Path(__file__).resolve().parents[2]


def _corpus(folder: Path) -> Path:
    """Two models at two tiers, with their truths on 20 random inputs (and the exhaustive ones)."""
    (folder / "models").mkdir(parents=True)
    (folder / "truths").mkdir()
    for name in ("tracr/frac_prevs", "tracr/reverse"):
        plain = shipped(name)
        for tier, model in (("plain", plain), ("disguised", ifl.disguise(plain, split_heads=2, rotate=True))):
            stem = f"{name.replace('/', '_')}.{tier}"
            ifl.save(model, folder / "models" / f"{stem}.safetensors")
            graph, truths = ifl.edge_truth(model, samples=MEASURED["samples"], seed=MEASURED["seed"])
            record = {"graph": graph.to_json(), "truth": {a: t.to_json() for a, t in truths.items()},
                      "measured": MEASURED}
            (folder / "truths" / f"{stem}.json").write_text(json.dumps(record), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _corpus(tmp_path_factory.mktemp("corpus"))


FLAGS = ["--methods", "exact,eap,random", "--ablations", "zero,resample", "--workers", "1"]


def test_a_benchmark_scores_every_job_and_names_the_first_method(corpus: Path, tmp_path: Path) -> None:
    code, out, err = run_cli(["benchmark", str(corpus), *FLAGS, "-o", str(tmp_path / "out")])
    assert code == 0, err
    assert err == ""  # stderr is no terminal here: no progress bar, no carriage returns in a log
    rows = read_rows(tmp_path / "out" / RESULTS)
    assert len(rows) == 2 * 2 * 3 * 2
    assert all(r["auroc"] == 1.0 for r in rows if r["method"] == "exact" and r["tier"] == "plain")
    summary = (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")
    assert out == summary + "\n"  # printed as written
    assert "First on the plain tier: **exact**; besides exact patching (the reference): **" in summary
    assert "## disguised" in summary
    assert "| tracr_reverse | eap | resample |" in summary
    assert (tmp_path / "out" / "auroc.png").stat().st_size > 0 and (tmp_path / "out" / "realism.png").exists()


#: Two methods under one ablation: 8 jobs, enough to kill the run between two of them.
KILLED_FLAGS = ["--methods", "exact,random", "--ablations", "zero", "--workers", "1"]


def test_a_killed_benchmark_resumes_and_runs_each_job_once(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "infoflow_dsl.cli.main", "benchmark", str(corpus), *KILLED_FLAGS, "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / RESULTS
    while process.poll() is None and (not results.exists() or results.read_bytes().count(b"\n") < 2):
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    first = read_rows(results)
    assert 2 <= len(first) < 8, "the benchmark must be killed between jobs"
    with open(results, "a", encoding="utf-8") as stream:
        stream.write('{"key": "torn')  # a line cut by the kill
    completed = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    rows = read_rows(results)
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)) == 8 and rows[:len(first)] == first


def test_bad_lists_exit_2(corpus: Path, tmp_path: Path) -> None:
    for flags, message in ((["--methods", "eap,nope"], "--methods: nope"), (["--ablations", ""], "nothing given"),
                           (["--tiers", "shiny"], "--tiers: shiny: the corpus has disguised, plain")):
        code, _, err = run_cli(["benchmark", str(corpus), *flags, "-o", str(tmp_path / "o")])
        assert code == 2 and message in err, err
    assert not (tmp_path / "o").exists()


def test_skipped_models_are_left_out(corpus: Path, tmp_path: Path) -> None:
    code, _, err = run_cli(["benchmark", str(corpus), "--methods", "random", "--ablations", "zero", "--workers", "1",
                            "--skip", "tracr_rev*", "-o", str(tmp_path / "out")])
    assert code == 0, err
    assert {r["model"] for r in read_rows(tmp_path / "out" / RESULTS)} == {"tracr_frac_prevs"}


def test_a_broken_record_or_model_is_exit_2_before_any_job(corpus: Path, tmp_path: Path) -> None:
    import shutil

    for breaking, message in ((lambda f: (f / "truths" / "tracr_reverse.plain.json").write_text("{", "utf-8"),
                               "not a corpus record (JSONDecodeError"),
                              (lambda f: (f / "truths" / "tracr_reverse.plain.json").write_text(
                                  json.dumps({"measured": {"samples": -1, "seed": 0, "length": None},
                                              "truth": {"zero": {"necessary": []}}}), "utf-8"),
                               "measured or necessary edges of the wrong kind"),
                              (lambda f: (f / "models" / "tracr_reverse.plain.safetensors").write_bytes(b"\0" * 9),
                               "every record of the corpus has its model")):
        broken = tmp_path / f"broken{len(message)}"
        shutil.copytree(corpus, broken)
        breaking(broken)
        code, _, err = run_cli(["benchmark", str(broken), "--methods", "random", "--ablations", "zero",
                                "--workers", "1", "-o", str(tmp_path / "o")])
        assert code == 2 and message in err and "Traceback" not in err, err
        assert not (tmp_path / "o").exists()


def test_two_workers_start_a_fresh_local_ray_whatever_head_the_machine_last_knew(corpus: Path, tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """RAY_ADDRESS and Ray's address file naming a head long gone: ``--workers 2`` is a local Ray
    all the same, and scores every job as one process does."""
    flags = ["--methods", "random", "--ablations", "zero", "--tiers", "plain"]
    with dead_ray_head(monkeypatch):
        code, _, err = run_cli(["benchmark", str(corpus), *flags, "--workers", "2", "-o", str(tmp_path / "ray")])
    assert code == 0, err
    run_cli(["benchmark", str(corpus), *flags, "--workers", "1", "-o", str(tmp_path / "one")])
    rows = [{k: v for k, v in r.items() if k != "cost"} for r in read_rows(tmp_path / "ray" / RESULTS)]
    alone = [{k: v for k, v in r.items() if k != "cost"} for r in read_rows(tmp_path / "one" / RESULTS)]
    assert len(rows) == 2 and sorted(rows, key=str) == sorted(alone, key=str)


def test_a_ray_that_does_not_start_is_exit_2_saying_what_to_do(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    import ray

    def refuses(**settings: object) -> None:
        raise RuntimeError("the raylet could not start\nTraceback (most recent call last):\n  File ...")

    monkeypatch.setattr(ray, "init", refuses)
    code, _, err = run_cli(["benchmark", str(corpus), "--methods", "random", "--ablations", "zero",
                            "--workers", "2", "-o", str(tmp_path / "out")])
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    assert "infoflowc benchmark: a local Ray: Ray did not start: RuntimeError: the raylet could not start" in err
    assert "--workers 1 runs in this process without Ray" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_benchmark_on_the_device_gives_the_cpus_rows(corpus: Path, tmp_path: Path, device: str) -> None:
    """``benchmark --device``: every job's patched forwards there; the same AUROCs and
    certified k as on the CPU, the faithfulness curve to float rounding."""
    flags = ["--methods", "exact", "--ablations", "zero", "--workers", "1"]
    rows = {}
    for where in ("cpu", device):
        code, _, err = run_cli(["benchmark", str(corpus), *flags, "--device", where, "-o", str(tmp_path / where)])
        assert code == 0, err
        rows[where] = {r["key"]: r for r in read_rows(tmp_path / where / RESULTS)}
    assert rows[device].keys() == rows["cpu"].keys() and len(rows["cpu"]) == 4
    for key, row in rows["cpu"].items():
        there = rows[device][key]
        assert (there["auroc"], there["auroc_fixed"], there["certified_k"]) == (row["auroc"], row["auroc_fixed"],
                                                                                  row["certified_k"])
        for a, b in zip(there["faithfulness"], row["faithfulness"], strict=True):
            assert a["faithfulness"] == pytest.approx(b["faithfulness"], rel=1e-6, abs=1e-9)
