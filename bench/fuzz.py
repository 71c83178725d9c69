"""Differential fuzzing: random programs over the whole language (and RASP programs) against the
reference evaluator, each failure shrunk to a minimal program (the way Csmith, YARPGen and
NNSmith keep compilers honest).

    python bench/fuzz.py 200                        # 200 programs, every core, failures in fuzz-out/
    python bench/fuzz.py 2000 --seed 7 --jobs 2 --out /tmp/failures
    python bench/fuzz.py 0 --rerun --out /tmp/failures     # the failures found, run again on this code

The programs come from ``tests/fuzz_cases.py`` (token programs, programs over vectors, RASP
programs, with dyadic and non-dyadic constants); the property is ``tests/fuzz_property.py``: a
refusal names where, or the model is within its a-priori bound, the bound within ε, two compiles
give the same bytes, analyze's schedule is the model's and ``infoflowc check`` passes.

The campaign runs in batches of ``--batch`` programs, one ``hypothesis.find`` each (its seed
``--seed`` + the batch's index): find draws programs until one fails, then shrinks it (at most
``--shrink-seconds``) to a minimal program failing the same way (``Outcome.signature``), written
to ``--out`` as ``KIND-HASH.iflow`` (or ``.py``) with a comment header saying what failed. The summary gives the
programs by construct, refusals by reason and the distinct failures by kind (also as
``summary.json`` in ``--out``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from random import Random

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzz_cases import Case, case_from_file, fuzz_cases, run_case
from fuzz_property import Outcome
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample
from tqdm import tqdm

#: outcomes already found in this worker, by (language, source, ε, dtype): find draws the same
#: simplest program first in every batch, and shrinking revisits programs
_SEEN: dict[Case, Outcome] = {}


@dataclass
class Batch:
    """What one batch found: every program generated (not the shrinker's) and its outcome, and
    the minimal failure if one failed (its case, its outcome, the first failing program's)."""

    seed: int
    generated: list[tuple[Case, Outcome]] = field(default_factory=list)
    minimal: tuple[Case, Outcome, Outcome] | None = None
    shrinks: int = 0


def outcome_of(case: Case) -> Outcome:
    """The property on ``case``, once per worker."""
    if case not in _SEEN:
        _SEEN[case] = run_case(case)
    return _SEEN[case]


def run_batch(seed: int, size: int, shrink_seconds: float) -> Batch:
    """``size`` programs from ``find`` seeded with ``seed``; the first failure shrunk. A program
    once accepted as failing stays so (find replays its answer, after the shrinking's deadline
    too); should find raise anyway, the shortest program accepted is the answer."""
    warnings.filterwarnings("ignore")
    batch = Batch(seed)
    wanted: dict[str, object] = {}
    accepted: set[Case] = set()

    def fails(case: Case) -> bool:
        if case in accepted:
            return True
        if not wanted:  # generating: every program counts
            outcome = outcome_of(case)
            batch.generated.append((case, outcome))
            if outcome.failed:
                wanted.update(signature=outcome.signature, first=outcome, until=time.monotonic() + shrink_seconds)
                accepted.add(case)
            return outcome.failed
        if time.monotonic() > float(wanted["until"]):  # type: ignore[arg-type]
            return False
        batch.shrinks += 1
        if outcome_of(case).signature == wanted["signature"]:
            accepted.add(case)
        return case in accepted

    chosen = settings(max_examples=size, database=None, phases=[Phase.generate, Phase.shrink], deadline=None,
                      suppress_health_check=list(HealthCheck))
    try:
        minimal = find(fuzz_cases(), fails, settings=chosen, random=Random(seed))
    except NoSuchExample:
        return batch
    except Exception:
        if not accepted:
            raise
        minimal = min(accepted, key=lambda case: (len(case.source), case.source))
    batch.minimal = (minimal, outcome_of(minimal), wanted["first"])  # type: ignore[assignment]
    return batch


def write_failure(out: Path, case: Case, outcome: Outcome, first: Outcome, seed: int) -> Path:
    """The minimal failing program as a file with a comment header saying what failed."""
    digest = hashlib.sha256(case.source.encode()).hexdigest()[:10]
    path = out / f"{outcome.kind}-{digest}{case.suffix}"
    header = [f"fuzz failure: {outcome.kind}", f"symptom: {outcome.detail}",
              f"compiled at eps = {case.eps:g}, dtype = {case.dtype}; batch seed {seed} (bench/fuzz.py)"]
    if first.detail != outcome.detail:
        header.append(f"before shrinking: {first.detail}")
    path.write_text("".join(f"# {line}\n" for line in header) + case.source)
    return path


def rerun(folder: Path) -> dict[str, str]:
    """Each failure file written to ``folder`` run again (at the ε and dtype its header names):
    its outcome now, by file name."""
    found = {}
    for path in sorted([*folder.glob("*.iflow"), *folder.glob("*.py")]):
        outcome = run_case(case_from_file(path))
        found[path.name] = f"{outcome.kind}: {outcome.detail}"
        print(f"{path.name}: {found[path.name]}")
    return found


def summary(batches: list[Batch], seconds: float, jobs: int) -> dict[str, object]:
    """Programs by construct and outcome, refusals by reason, distinct failures by kind."""
    programs = {(case.language, case.source, case.eps, case.dtype): (case, outcome)
                for batch in batches for case, outcome in batch.generated}
    constructs = Counter(name for case, _ in programs.values() for name in case.constructs())
    languages = Counter(case.language for case, _ in programs.values())
    outcomes = Counter(outcome.kind for _, outcome in programs.values())
    refusals = Counter(outcome.detail for _, outcome in programs.values() if outcome.kind == "refused")
    failures = {case.source: (outcome.kind, outcome.detail) for batch in batches if batch.minimal
                for case, outcome, _ in [batch.minimal]}
    return {"programs": len(programs), "seconds": round(seconds, 1), "jobs": jobs,
            "programs_per_second": round(len(programs) / max(seconds, 1e-9), 3), "languages": dict(languages),
            "outcomes": dict(outcomes), "constructs": dict(constructs.most_common()),
            "refusals": dict(refusals.most_common()),
            "failures": dict(Counter(kind for kind, _ in failures.values()).most_common()),
            "distinct_failures": [{"kind": kind, "detail": detail, "source": source}
                                  for source, (kind, detail) in failures.items()]}


def print_summary(report: dict[str, object]) -> None:
    print(f"{report['programs']} programs in {report['seconds']} s on {report['jobs']} jobs "
          f"({report['programs_per_second']} programs/s); {report['languages']}")
    for title in ("outcomes", "constructs", "refusals", "failures"):
        print(f"{title}:")
        for name, count in report[title].items():  # type: ignore[attr-defined]
            print(f"  {count:6d}  {name}")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", type=int, help="how many programs to generate")
    parser.add_argument("--seed", type=int, default=0, help="the first batch's seed (default 0)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (all cores)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"), help="where minimal failures go")
    parser.add_argument("--batch", type=int, default=10, help="programs per find (default 10)")
    parser.add_argument("--shrink-seconds", type=float, default=300.0, help="the most shrinking per failure")
    parser.add_argument("--rerun", action="store_true", help="run the failure files in --out again, and stop")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, object]:
    arguments = parse_arguments(argv)
    if arguments.rerun:
        return {"rerun": rerun(arguments.out)}
    arguments.out.mkdir(parents=True, exist_ok=True)
    total, step = arguments.programs, arguments.batch
    sizes = [min(step, total - start) for start in range(0, total, step)]
    started, batches = time.monotonic(), []
    with ProcessPoolExecutor(max_workers=arguments.jobs) as pool, tqdm(total=arguments.programs, unit="prog") as bar:
        futures = [pool.submit(run_batch, arguments.seed + index, size, arguments.shrink_seconds)
                   for index, size in enumerate(sizes)]
        for future in as_completed(futures):
            try:
                batch = future.result()
            except Exception as error:  # a batch that broke the driver: said, and the campaign goes on
                bar.write(f"batch failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
                continue
            batches.append(batch)
            bar.update(len(batch.generated))
            if batch.minimal:
                case, outcome, first = batch.minimal
                bar.write(f"{outcome.kind}: {write_failure(arguments.out, case, outcome, first, batch.seed)}")
    report = summary(batches, time.monotonic() - started, arguments.jobs)
    (arguments.out / "summary.json").write_text(json.dumps(report, indent=1) + "\n")
    print_summary(report)
    return report


if __name__ == "__main__":
    main()
