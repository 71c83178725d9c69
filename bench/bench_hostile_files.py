"""Benchmark: the loaders against thousands of mutated model files (issue 34's fuzz).

    python bench/bench_hostile_files.py [--mutants N] [--export-mutants M]   # writes its section of BENCHMARKS.md

Each mutant of three valid files (a random model, a compiled min_pairwise and a token model;
``tests/hostile_files.py``: a config value replaced by any JSON, a tensor's shape, dtype or
offsets changed, a byte changed, the file cut, the config nested deeply) is written to disk and
read with ``ifl.load`` in one process; a model that loads is run on one input of its length, and
one in every 20 is also given to ``infoflowc circuit``, ``check --samples 20``, ``report``,
``export`` and (a token model) ``run`` (in process). Then mutants of an export folder
(min_pairwise exported to hf-gpt2; ``export_mutants``: any value of infoflow.json or config.json
replaced, removed or nested, the weights file mutated, a file removed, a pickle added) are read
with ``ifl.load_exported``, run, and every 20th given to ``infoflowc check``. The promise: every
outcome is a model that runs or a ModelFileError / ExportError (the CLI: exit 0, 2 or 3), never
another exception; the slowest call and the process's peak memory are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from report import write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from handmade_models import random_model, token_model  # noqa: E402
from hostile_files import export_mutants, mutants  # noqa: E402

import infoflow_dsl as ifl  # noqa: E402
from infoflow_dsl.cli.main import run  # noqa: E402
from infoflow_dsl.errors import ExportError, ModelFileError  # noqa: E402
from infoflow_dsl.transformer.io import model_to_bytes  # noqa: E402


def valid_files() -> dict[str, bytes]:
    compiled = ifl.load(ROOT / "compiled_examples" / "min_pairwise.safetensors")
    return {"random": model_to_bytes(random_model(seed=19, dtype=torch.float32)),
            "compiled min_pairwise": model_to_bytes(compiled), "token": model_to_bytes(token_model("identity"))}


def commands(path: Path, token_input: bool) -> list[list[str]]:
    """The commands a loaded mutant goes through: circuit, check, report, export (and run, for a
    token model), their outputs beside it."""
    out = path.with_suffix("")
    argv = [["circuit", str(path)], ["check", str(path), "--samples", "20"],
            ["report", str(path), "-o", f"{out}.html"], ["export", str(path), "-o", f"{out}.export", "--force"]]
    return argv + ([["run", str(path), "a", "b"]] if token_input else [])


def command_outcome(argv: list[str]) -> str:
    """``infoflowc ARGV`` in process: "COMMAND exit N", or "CRASH COMMAND ERROR" for an exception
    (what the console script would report as exit 1)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return f"{argv[0]} exit {run(argv)}"
    except Exception as error:
        return f"CRASH {argv[0]} {type(error).__name__}"


def exercise(mutant: bytes, path: Path, counts: Counter[str], slowest: list[float], index: int) -> None:
    """Load (and run, and every 20th through the CLI) one mutant; count its outcome."""
    path.write_bytes(mutant)
    start = time.perf_counter()
    try:
        model = ifl.load(path)
    except ModelFileError:
        counts["refused (ModelFileError)"] += 1
        slowest[0] = max(slowest[0], time.perf_counter() - start)
        return
    except Exception as error:  # the promise broken: counted and named
        counts[f"CRASH {type(error).__name__}"] += 1
        return
    ids = torch.zeros(1, model.T, dtype=torch.long)
    model(ids if model.token_input else ids.to(model.dtype)[..., None].expand(1, model.T, model.d))
    counts["loaded and ran"] += 1
    if index % 20 == 0:
        for argv in commands(path, model.token_input):
            counts[command_outcome(argv)] += 1
    slowest[0] = max(slowest[0], time.perf_counter() - start)


def fuzz(valid: bytes, path: Path, examples: int) -> tuple[Counter[str], list[float], int]:
    """``examples`` mutants of ``valid`` exercised: (outcome counts, [slowest call], mutants run)."""
    counts: Counter[str] = Counter()
    slowest, seen = [0.0], [0]

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(mutant=mutants(valid))
    def each(mutant: bytes) -> None:
        seen[0] += 1
        exercise(mutant, path, counts, slowest, seen[0])

    each()
    return counts, slowest, seen[0]


def exercise_export(mutant: dict[str, bytes], folder: Path, counts: Counter[str], slowest: list[float],
                    index: int) -> None:
    """Read (and run, and every 20th check) one mutated export folder; count its outcome."""
    folder.mkdir()
    for name, data in mutant.items():
        (folder / name).write_bytes(data)
    start = time.perf_counter()
    try:
        model = ifl.load_exported(folder)
        model(torch.zeros(1, model.T, model.d))
        counts["loaded and ran"] += 1
        if index % 20 == 0:
            counts[command_outcome(["check", str(folder), "--samples", "20"])] += 1
    except ExportError:
        counts["refused (ExportError)"] += 1
    except Exception as error:  # the promise broken: counted and named
        counts[f"CRASH {type(error).__name__}"] += 1
    slowest[0] = max(slowest[0], time.perf_counter() - start)
    shutil.rmtree(folder)


def fuzz_exports(root: Path, examples: int) -> tuple[Counter[str], list[float], int]:
    """``examples`` mutants of an exported min_pairwise folder: (outcome counts, [slowest call], mutants run)."""
    ifl.export(ifl.load(ROOT / "compiled_examples" / "min_pairwise.safetensors"), root / "valid")
    files = {path.name: path.read_bytes() for path in (root / "valid").iterdir()}
    counts: Counter[str] = Counter()
    slowest, seen = [0.0], [0]

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(mutant=export_mutants(files))
    def each(mutant: dict[str, bytes]) -> None:
        seen[0] += 1
        exercise_export(mutant, root / "mutant", counts, slowest, seen[0])

    each()
    return counts, slowest, seen[0]


def row(name: str, seen: int, counts: Counter[str], slowest: float) -> str:
    outcomes = ", ".join(f"{k}: {v:,}" for k, v in sorted(counts.items()))
    return f"| {name} | {seen:,} | {outcomes} | {slowest:.2f} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=1000, help="mutants per valid file (1,000)")
    parser.add_argument("--export-mutants", type=int, default=300, help="mutants of the export folder (300)")
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    rows, total, started = [], 0, time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutant.safetensors"
        for name, valid in valid_files().items():
            counts, slowest, seen = fuzz(valid, path, arguments.mutants)
            total += seen
            rows.append(row(name, seen, counts, slowest[0]))
        counts, slowest, seen = fuzz_exports(Path(folder), arguments.export_mutants)
        total += seen
        rows.append(row("export folder (hf-gpt2 min_pairwise)", seen, counts, slowest[0]))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    body = (f"{total:,} mutants in {time.perf_counter() - started:.0f} s, one process; peak resident memory "
            f"{peak:.0f} MB (the promise: under 2 GB, no call over 30 s). `python bench/bench_hostile_files.py "
            f"--mutants N --export-mutants M` ({__doc__.splitlines()[0]})\n\n"
            "| valid file | mutants | outcomes | slowest call (s) |\n|---|---|---|---|\n" + "\n".join(rows))
    print(body)
    write_section("Hostile model files (bench/bench_hostile_files.py)", body)
    return 0 if "CRASH" not in body else 1


if __name__ == "__main__":
    raise SystemExit(main())
