"""The circuit-discovery benchmark on the ground-truth corpus (issue "the circuit-discovery
benchmark"): every method, every ablation, every tier, and BENCHMARKS.md "Circuit discovery".

    python bench/circuit_discovery.py CORPUS OUT [--workers N] [--tiers plain,...] [--skip P,...]
                                      [--only P,...] [--summary-only] [--benchmarks]

CORPUS is the folder ``bench/circuit_corpus.py`` builds; OUT the benchmark's folder
(``infoflowc benchmark``'s: resumable, so a rerun adds only what is missing). With
``--benchmarks`` the summary (its tables, headings one level down) and this invocation's wall
time go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def others(corpus: Path, only: str) -> tuple[str, ...]:
    """The corpus's model names that match none of ``only``'s comma-separated patterns (none if
    it is empty): ``--only`` as ``--skip``, so that runs on parts of the corpus can go side by
    side (each with its own OUT; their results.jsonl concatenated for the summary)."""
    import fnmatch

    patterns = [p for p in only.split(",") if p]
    names = sorted({p.stem.rsplit(".", 1)[0] for p in (corpus / "truths").glob("*.json")})
    return tuple(n for n in names if patterns and not any(fnmatch.fnmatchcase(n, p) for p in patterns))


def main(argv: list[str]) -> int:
    from infoflow_dsl.circuits import ABLATIONS
    from infoflow_dsl.discovery import METHODS
    from infoflow_dsl.discovery.benchmark import run_benchmark

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tiers", help="comma-separated (default every tier)")
    parser.add_argument("--skip", default="", help="comma-separated shell patterns of models to leave out")
    parser.add_argument("--only", default="", help="comma-separated shell patterns: run only the models matching one")
    parser.add_argument("--summary-only", action="store_true",
                        help="summarise the models OUT holds every job of, run none")
    parser.add_argument("--benchmarks", action="store_true", help='write BENCHMARKS.md "Circuit discovery"')
    arguments = parser.parse_args(argv)
    tiers = None if arguments.tiers is None else tuple(arguments.tiers.split(","))
    start = time.perf_counter()
    skip = tuple(p for p in arguments.skip.split(",") if p) + others(arguments.corpus, arguments.only)
    if arguments.summary_only:
        from infoflow_dsl.discovery.benchmark import RESULTS, read_rows
        from infoflow_dsl.discovery.summary import write_summary

        rows = read_rows(arguments.out / RESULTS)
        jobs: dict[tuple[str, str], int] = {}
        for row in rows:
            jobs[row["model"], row["tier"]] = jobs.get((row["model"], row["tier"]), 0) + 1
        every = len(METHODS) * len(ABLATIONS)  # a model stopped halfway is left out: its methods unequal
        text = write_summary(arguments.out, [r for r in rows if jobs[r["model"], r["tier"]] == every])
    else:
        text = run_benchmark(arguments.corpus, arguments.out, METHODS, ABLATIONS, tiers, arguments.workers,
                             skip=skip)
    minutes = (time.perf_counter() - start) / 60
    print(text)
    if arguments.benchmarks:
        from report import write_section

        body = text.split("\n", 2)[2].replace("\n## ", "\n### ")
        how = ("the summary of the models OUT holds every job of (a model stopped halfway left out)"
               if arguments.summary_only else f"this invocation {minutes:.1f} min, a resumed run counts only what it "
                                              f"added")
        tiers_note = "" if not skip else f" Left out: {', '.join(skip)}."
        write_section("Circuit discovery", f"`python bench/circuit_discovery.py CORPUS OUT --workers "
                                           f"{arguments.workers} --benchmarks` (2 CPU cores; {how}).{tiers_note} "
                                           f"{body}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
