"""sweep: the grid, results.csv appended per run and resumed (also after a real SIGKILL), Ray
with two workers giving the same runs as in-process, summary.md and nmse.png, bad flags."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import compiled
import pytest
from cli_runner import run_cli
from dead_ray import dead_ray_head

import infoflow_dsl as ifl
from infoflow_dsl.training import sweep
from infoflow_dsl.training.train import TrainSettings, model_nmse, validation_seed

ROOT = Path(__file__).resolve().parents[2]
D_RETRIEVAL = ROOT / "compiled_examples" / "d_retrieval.iflow"
BASE = TrainSettings(heads=(1,), d_model=8, d_head=4, d_mlp=8, steps=20, batch=64, lr=3e-3, validation=128)
TOY_FLAGS = ["--T", "4", "--d-model", "8", "--d-head", "4", "--d-mlp", "8", "--batch", "64", "--lr", "3e-3",
             "--validation", "128"]


def toy_grid(heads: tuple[tuple[int, ...], ...] = ((1,), (2,)), seeds: int = 2) -> sweep.Grid:
    return sweep.Grid(heads, (None,), (4,), (8,), (20,), seeds, BASE)


def toy_runs(grid: sweep.Grid) -> list[sweep.Run]:
    return sweep.expand(grid, D_RETRIEVAL.name, D_RETRIEVAL.read_text(encoding="utf-8"))


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def test_the_grid_is_the_product_of_its_axes_with_seeds_innermost() -> None:
    grid = sweep.Grid(((2,), (1,)), (1, 3), (4, 8), (8, 16), (10,), 2, BASE)
    runs = sweep.expand(grid, "p.iflow", "source")
    budgets = list(dict.fromkeys(r.settings.heads for r in runs))
    assert budgets == [(2,), (2, 2, 2), (1,), (1, 1, 1)]  # a single count repeats over each --layers
    assert len(runs) == 4 * 2 * 2 * 2 and len({r.key for r in runs}) == len(runs)
    assert [r.settings.seed for r in runs[:2]] == [0, 1] and runs[0].config_key == runs[1].config_key
    assert [(r.length, r.settings.d_model) for r in runs[:8:2]] == [(4, 8), (4, 16), (8, 8), (8, 16)]


def test_a_head_budget_that_does_not_fit_the_layers_is_refused() -> None:
    with pytest.raises(ValueError, match="--layers is 3"):
        sweep.expand(sweep.Grid(((2, 2),), (3,), (4,), (8,), (10,), 1, BASE), "p.iflow", "source")


def test_in_process_sweep_records_every_run_once_and_resumes_without_rerunning(tmp_path, device: str) -> None:
    grid = replace(toy_grid(), base=replace(BASE, device=device))
    runs = toy_runs(grid)
    finished: list[str] = []
    rows = sweep.execute(runs[:3], tmp_path, workers=1, on_finished=lambda row: finished.append(row["run"]))
    assert finished == [r.key for r in runs[:3]] and [r["run"] for r in rows] == finished
    before = (tmp_path / "results.csv").read_bytes()
    rows = sweep.execute(runs, tmp_path, workers=1, on_finished=lambda row: finished.append(row["run"]))
    assert finished == [r.key for r in runs]  # only the fourth run ran the second time
    assert (tmp_path / "results.csv").read_bytes().startswith(before)
    for row in rows:
        model = ifl.load(tmp_path / row["model"])
        trained = model.config["trained"]
        assert trained["final_nmse"] == float(row["final_nmse"]) and trained["best_nmse"] == float(row["best_nmse"])
        assert float(row["best_nmse"]) <= float(row["final_nmse"]) and 1 <= int(row["best_step"]) <= 20
        assert trained["seed"] == int(row["seed"])
        program = compiled.program("d_retrieval", 4)
        declared = ifl.sample_inputs(program, 128, seed=validation_seed(int(row["seed"])), device=device)
        assert float(row["declared_nmse"]) == pytest.approx(model_nmse(model, program, declared), rel=1e-5)
    program_at = lambda length: compiled.program("d_retrieval", length)  # noqa: E731
    configs = sweep.finish(tmp_path, "d_retrieval", grid, runs, rows, program_at, 1e-2)
    assert [c.heads for c in configs] == ["1", "2"]
    for c in configs:
        found = [float(r["best_nmse"]) for r in rows if r["config"] == c.config]
        assert c.best == min(found) and c.median == statistics.median(found) and len(c.nmse) == 2
        assert c.final == tuple(float(r["final_nmse"]) for r in rows if r["config"] == c.config)
        assert c.verdict == ifl.analyze(compiled.program("d_retrieval", 4), tuple(map(int, c.heads.split(",")))).verdict
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert f"| 1 | 4 | 8 | 20 | 2 | {configs[0].best:.3g} | {configs[0].median:.3g} |" in text
    assert "inefficient" in text and "| seeds |" in text and "targets standardised" in text
    compiled_model = compiled.model("d_retrieval", 1e-2, "float64", 4)
    assert f"| {compiled_model.parameter_count()} | {compiled_model.nonzero_parameter_count()} |" in text
    png = (tmp_path / "nmse.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    sweep.finish(tmp_path, "d_retrieval", grid, runs, rows, program_at, 1e-2)
    assert (tmp_path / "nmse.png").read_bytes() == png  # deterministic


def test_a_torn_last_line_is_dropped_and_a_foreign_file_refused(tmp_path) -> None:
    runs = toy_runs(toy_grid(((1,),), seeds=1))
    sweep.execute(runs, tmp_path, workers=1)
    path = tmp_path / "results.csv"
    whole = path.read_bytes()
    path.write_bytes(whole + b"heads=9;T=4;d_mod")
    assert [r["run"] for r in sweep.read_results(path)] == [runs[0].key]
    assert path.read_bytes() == whole
    path.write_bytes(b"a,b\n1,2\n")
    with pytest.raises(sweep.SweepError, match="not a results file"):
        sweep.read_results(path)
    code, _, err = run_cli(["sweep", str(D_RETRIEVAL), "--heads", "1", *TOY_FLAGS, "--steps", "2", "--workers", "1",
                            "-o", str(tmp_path)])
    assert code == 2 and "not a results file" in err


@pytest.mark.parametrize("legacy_columns", sweep.LEGACY_COLUMNS)
def test_a_results_file_of_the_earlier_protocol_resumes_and_keeps_its_columns(tmp_path, legacy_columns) -> None:
    runs = toy_runs(toy_grid(((1,), (2,)), seeds=1))
    sweep.execute(runs[:1], tmp_path, workers=1)
    path = tmp_path / "results.csv"
    rows = sweep.read_results(path)
    assert float(rows[0]["cpu_seconds"]) > 0  # one thread: the run's time on a core of its own
    legacy = io.StringIO()
    writer = csv.DictWriter(legacy, fieldnames=legacy_columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows({**row, "nmse": row["final_nmse"]} for row in rows)
    path.write_text(legacy.getvalue(), encoding="utf-8")  # a file with one nmse, the last step's
    sweep.execute(runs, tmp_path, workers=1)
    assert path.read_text(encoding="utf-8").splitlines()[0].split(",") == legacy_columns
    resumed = sweep.read_results(path)
    assert [r["run"] for r in resumed] == [r.key for r in runs]
    assert all(sweep.best_of(r) == sweep.final_of(r) == float(r["nmse"]) for r in resumed)


def test_a_sweep_killed_with_sigkill_resumes_and_runs_each_configuration_once(tmp_path) -> None:
    out = tmp_path / "sweep"
    argv = [sys.executable, "-m", "infoflow_dsl.cli.main", "sweep", str(D_RETRIEVAL), "--heads", "1", "--heads", "2",
            "--heads", "3", *TOY_FLAGS, "--steps", "60", "--seeds", "2", "--workers", "1", "--no-batch", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.csv"
    while process.poll() is None and (not results.exists() or results.read_bytes().count(b"\n") < 3):
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    first = results.read_bytes()
    finished = read_csv(results)
    assert 2 <= len(finished) < 6, "the sweep must be killed between runs"
    completed = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    rows = read_csv(results)
    keys = [r["run"] for r in rows]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 6  # every run exactly once
    assert rows[:len(finished)] == finished and results.read_bytes().startswith(first)  # none rerun
    assert f"{len(finished)} of 6 runs" not in completed.stdout and "6 of 6 runs finished" in completed.stdout
    resumed = [line for line in completed.stdout.splitlines() if ": NMSE " in line]
    assert len(resumed) == 6 - len(finished)  # the restarted sweep trained only the others
    assert (out / "summary.md").exists() and len(list((out / "models").iterdir())) == 6


def test_a_batched_sweep_gives_the_rows_of_one_run_after_another(tmp_path, device: str) -> None:
    """Runs of one shape (two head budgets, two seeds) train as one model by default: the same
    rows, each run's figures those of ``--no-batch`` to float rounding."""
    flags = ["sweep", str(D_RETRIEVAL), "--heads", "1", "--heads", "2", *TOY_FLAGS, "--steps", "20", "--seeds", "2",
             "--workers", "1", "--device", device]
    code, _, err = run_cli([*flags, "-o", str(tmp_path / "batched")])
    assert (code, err) == (0, ""), err
    code, _, err = run_cli([*flags, "--no-batch", "-o", str(tmp_path / "alone")])
    assert (code, err) == (0, ""), err
    batched, alone = read_csv(tmp_path / "batched" / "results.csv"), read_csv(tmp_path / "alone" / "results.csv")
    assert [r["run"] for r in batched] == [r["run"] for r in alone] and len(batched) == 4
    for b, a in zip(batched, alone, strict=True):
        for column in ("best_nmse", "final_nmse", "declared_nmse"):
            assert float(b[column]) == pytest.approx(float(a[column]), rel=1e-4), column
        assert (b["best_step"], b["parameters"]) == (a["best_step"], a["parameters"])
    runs = toy_runs(toy_grid())
    assert sweep.batch_groups(runs) == [runs] and sweep.batch_groups(runs, parts=3) == [runs[:1], runs[1:2], runs[2:]]
    assert sweep.batch_groups(runs, batch=False) == [[run] for run in runs]


def test_two_ray_workers_give_the_same_runs_as_one_process(tmp_path, monkeypatch) -> None:
    """Two runs of one shape, two workers: the batch is cut in two tasks of one run each, which
    train alone, as ``--no-batch`` does in this process: the same bytes."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the mode of every in-process Ray of the tests (dead_ray.py)
    runs = toy_runs(toy_grid(seeds=1))
    assert sweep.batch_groups(runs, parts=2) == [[runs[0]], [runs[1]]]
    local = sweep.execute(runs, tmp_path / "local", workers=1, batch=False)
    distributed = sweep.execute(runs, tmp_path / "ray", workers=2)
    assert sorted(r["run"] for r in distributed) == sorted(r["run"] for r in local)
    by_run = {r["run"]: r for r in local}
    for row in distributed:
        assert row["best_nmse"] == by_run[row["run"]]["best_nmse"]
        assert row["final_nmse"] == by_run[row["run"]]["final_nmse"]
        assert (tmp_path / "ray" / row["model"]).read_bytes() == (tmp_path / "local" / row["model"]).read_bytes()


def test_a_folder_of_another_grid_is_refused_and_a_grid_that_contains_it_resumes(tmp_path) -> None:
    folder = tmp_path / "sweep"
    sweep.execute(toy_runs(toy_grid(((1,),), seeds=1)), folder, workers=1)
    with pytest.raises(ifl.SweepError, match="1 run\\(s\\) of another grid"):
        sweep.execute(toy_runs(toy_grid(((2,),), seeds=1)), folder, workers=1)
    code, _, err = run_cli(["sweep", str(D_RETRIEVAL), "--heads", "2", *TOY_FLAGS, "--steps", "20", "-o", str(folder)])
    assert code == 2 and "another grid" in err and "Traceback" not in err
    rows = sweep.execute(toy_runs(toy_grid(((1,), (2,)), seeds=1)), folder, workers=1)  # extends the first grid
    assert len(rows) == 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def ray_head() -> Iterator[str]:
    """A real Ray head on loopback (``ray start --head --block``, its own temp folder, token
    authentication off for the test), stopped on exit: its address ``127.0.0.1:PORT``."""
    port, folder = _free_port(), tempfile.mkdtemp(prefix="ifl-ray-", dir="/tmp")  # short: Ray's socket paths
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={port}",
                             "--node-ip-address=127.0.0.1", "--num-cpus=1", "--include-dashboard=false",
                             "--disable-usage-stats", f"--temp-dir={folder}"],
                            env={**os.environ, "RAY_AUTH_MODE": "disabled"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None and time.monotonic() < deadline, "the Ray head did not start"
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()
        head.wait(60)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_sweep_joins_a_real_ray_head_through_address(tmp_path, monkeypatch) -> None:
    """Two runs as tasks of a head started apart from the sweep (Ray against in-process: the
    two-worker test above); the rows are the grid's and each model is on disk."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    runs = toy_runs(sweep.Grid(((1,),), (None,), (4,), (8,), (5,), 2, BASE))
    with ray_head() as address:
        code, out, err = run_cli(["sweep", str(D_RETRIEVAL), "--heads", "1", *TOY_FLAGS, "--steps", "5",
                                  "--seeds", "2", "--address", address, "-o", str(tmp_path / "cluster")])
    assert code == 0, err
    assert "2 of 2 runs finished" in out
    joined = read_csv(tmp_path / "cluster" / "results.csv")
    assert sorted(row["run"] for row in joined) == sorted(run.key for run in runs)
    assert all((tmp_path / "cluster" / row["model"]).stat().st_size > 0 for row in joined)


@pytest.mark.parametrize("address", ["auto", "ray://127.0.0.1:{port}", "127.0.0.1:{port}"])
def test_an_address_where_no_ray_head_answers_exits_2_in_seconds_leaving_nothing(address, tmp_path,
                                                                                    monkeypatch) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "no-ray"))  # ``auto`` finds no head started on this machine
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    address = address.format(port=_free_port())
    out = tmp_path / "out"
    start = time.monotonic()
    code, _, err = run_cli(["sweep", str(D_RETRIEVAL), "--heads", "1", "--steps", "2", *TOY_FLAGS,
                            "--workers", "2", "--address", address, "-o", str(out)])
    assert time.monotonic() - start < 10
    assert code == 2 and f"--address {address}" in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("flags", [
    ["--address", "nope:x"], ["--address", "ray://:1"], ["--address", "host:70000"],
    ["--workers", "0"], ["--T", "4,0"], ["--seeds", "0"], ["--heads", "2,2", "--layers", "3"], ["--dist", "x"],
    ["--d-model", "8,a"], ["--compare-eps", "0"],
])
def test_cli_sweep_rejects_bad_flags_with_exit_2(tmp_path, flags) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli(["sweep", str(D_RETRIEVAL), "--heads", "1", "--steps", "2", *flags, "-o", str(out)])
    assert code == 2 and err.strip() and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()


def test_cli_sweep_needs_an_output_folder() -> None:
    code, _, err = run_cli(["sweep", str(D_RETRIEVAL), "--heads", "1"])
    assert code == 2 and "-o" in err


def test_a_run_key_names_every_setting() -> None:
    run = toy_runs(toy_grid(((2,),), seeds=1))[0]
    other = replace(run, settings=replace(run.settings, lr=1e-2))
    assert run.key != other.key and run.file_id != other.file_id
    started = replace(run, init=b"model bytes")
    assert started.config_key.startswith(run.config_key + ";init=") and started.file_id != run.file_id


def test_a_ray_failure_during_the_sweep_is_exit_2_and_a_runs_own_error_passes() -> None:
    """Seen in a full run: a head torn down under an ``auto`` sweep raised LocalRayletDiedError
    out of ray.get (exit 1). Ray's own failures are a SweepError that says the sweep resumes."""
    from ray.exceptions import LocalRayletDiedError

    from infoflow_dsl.errors import SweepError, TrainError
    from infoflow_dsl.training.cluster import task_result

    def died(ref):
        raise LocalRayletDiedError()

    with pytest.raises(SweepError, match=r"--address auto: Ray failed during the run \(LocalRayletDiedError: .*\); "
                                         r"the runs finished so far are kept: run the same command to resume"):
        task_result(died, None, "--address auto")

    def refused(ref):
        raise TrainError("no such distribution")

    with pytest.raises(TrainError, match="no such distribution"):
        task_result(refused, None, "a local Ray")
    assert task_result(lambda ref: ref * 2, 21, "a local Ray") == 42


def test_workers_start_a_fresh_local_ray_whatever_head_the_machine_last_knew(tmp_path, monkeypatch) -> None:
    """After a ``ray start --head`` long gone (RAY_ADDRESS and Ray's address file name a dead
    head), ``--workers 2`` still means a local Ray of two CPUs: Ray would otherwise try to join
    the dead head, or refuse num_cpus for an existing cluster."""
    with dead_ray_head(monkeypatch):
        code, out, err = run_cli(["sweep", str(D_RETRIEVAL), "--heads", "1", *TOY_FLAGS, "--steps", "2",
                                  "--workers", "2", "-o", str(tmp_path / "fresh")])
    assert code == 0, err
    assert "1 of 1 runs finished" in out
