"""Benchmark: the discovery methods at another git revision against the working tree, as ratios
measured in one run.

    python bench/bench_revisions.py REV [--write]   # --write: its section of BENCHMARKS.md

REV is checked out into a temporary worktree (removed at the end). Each (model, method, ablation)
runs ``ifl.discover`` in a fresh process of this interpreter with one torch thread, the tree's
root first on ``sys.path`` (before the editable install), the two trees alternating, best of 2;
the time is the ``discover`` call alone (the method and its faithfulness curve; the truth is not
measured: ``necessary=()``), and the two trees' scores are compared (largest difference).
Models: shipped ones disguised as the corpus's second tier, on the truth's inputs (every token
sequence up to length 4 and 300 random; vectors: 300 at T ≤ 8). Tests never assert on time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
MODELS = ["tracr/sort_unique", "tracr/sort", "intrinsic_3"]
RUNS = [("acdc", "zero"), ("acdc", "mean"), ("exact", "zero"), ("random", "zero")]
REPEATS = 2


def child(tree: str, name: str, method: str, ablation: str) -> None:
    """In the child process: time one discover call with ``tree``'s package; print JSON."""
    sys.path.insert(0, tree)
    import time

    import torch
    from circuit_corpus import TIERS

    import infoflow_dsl as ifl
    from infoflow_dsl.discovery.discover import discover

    assert Path(ifl.__file__).resolve().is_relative_to(Path(tree).resolve()), ifl.__file__
    torch.set_num_threads(1)
    model = ifl.disguise(ifl.load(ROOT / "compiled_examples" / f"{name}.safetensors", device="cpu"), seed=7,
                         **TIERS["disguised"])
    length = None if model.vocabulary is not None else min(model.T, 8)
    start = time.perf_counter()
    result = discover(model, method, ablation, None, 300, 1, length, necessary=())
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "scores": [result.scores[p] for p in sorted(result.scores)]}))


def measure(tree: Path, name: str, method: str, ablation: str) -> dict[str, Any]:
    found = subprocess.run([sys.executable, __file__, "--child", str(tree), name, method, ablation],
                           check=True, capture_output=True, text=True)
    return json.loads(found.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        child(*argv[1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev")
    parser.add_argument("--write", action="store_true", help="write the section of BENCHMARKS.md")
    arguments = parser.parse_args(argv)
    rows = [f"| model (disguised) | method | ablation | {arguments.rev} (s) | this tree (s) | ratio | "
            "largest score difference |", "|---|---|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as folder:
        old = Path(folder) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), arguments.rev],
                       check=True, capture_output=True)
        try:
            for name in MODELS:
                for method, ablation in RUNS:
                    best, scores = {"old": float("inf"), "new": float("inf")}, {}
                    for _ in range(REPEATS):
                        for way, tree in (("old", old), ("new", ROOT)):
                            found = measure(tree, name, method, ablation)
                            best[way], scores[way] = min(best[way], found["seconds"]), found["scores"]
                    apart = max((abs(a - b) for a, b in zip(scores["old"], scores["new"], strict=True)), default=0.0)
                    rows.append(f"| {name} | {method} | {ablation} | {best['old']:.2f} | {best['new']:.2f} | "
                                f"{best['old'] / best['new']:.2f} | {apart:.2g} |")
                    print(rows[-1], flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=True)
    if arguments.write:
        from report import write_section

        write_section(f"Discovery against revision {arguments.rev} (bench/bench_revisions.py)",
                      f"`python bench/bench_revisions.py {arguments.rev} --write`: `ifl.discover` (the method "
                      "and its faithfulness curve) at that revision and in this tree, each in a fresh process "
                      "with one thread, alternated, best of 2, on 2 CPU cores with nothing else running.\n\n"
                      + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
