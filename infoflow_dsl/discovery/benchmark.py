"""``infoflowc benchmark CORPUS -o OUT``: every discovery method scored on a ground-truth corpus.

The corpus is the folder ``bench/circuit_corpus.py`` writes: ``models/NAME.TIER.safetensors`` and
``truths/NAME.TIER.json`` (the edge graph, each ablation's necessary edges, and ``measured``: the
samples, seed and length the truth was measured on). Each (model, method, ablation) is one job
(a Ray task with ``--workers`` > 1 or ``--address``, as ``infoflowc sweep``): ``discover`` on the
truth's own inputs, scored against the truth of that ablation, and against the zero-ablation
truth as a fixed edge list (``auroc_fixed``: how the field scores a method, one hand-written
circuit for every ablation). Each finished job is appended to ``OUT/results.jsonl`` (flushed and
fsynced; a torn last line, a run killed while writing, is cut off); a rerun skips the jobs there,
so a killed benchmark resumes. Every record and model file is checked before the first job (a
broken one is exit 2 naming it); ``--skip`` leaves models out by shell pattern. ``OUT/summary.md``,
``OUT/auroc.png`` and ``OUT/realism.png`` are written at the end from the finished rows of the jobs
asked for.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..files import append_line, complete_lines

Job = tuple[str, str, str, str, str, str]  # (corpus folder, model name, tier, method, ablation, device)
RESULTS = "results.jsonl"


def job_key(job: Job) -> str:
    return f"{job[1]}.{job[2]}/{job[3]}/{job[4]}"


def corpus_models(corpus: Path, tiers: Sequence[str] | None, skip: Sequence[str] = (),
                  ablations: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(name, tier) of every record of the corpus (of ``tiers``; not those whose name matches a
    shell pattern of ``skip``), each checked (:func:`check_record`); UsageError for a folder
    that is not a corpus, or a record or model that is not one."""
    truths = sorted((corpus / "truths").glob("*.json")) if corpus.is_dir() else []
    found = [tuple(p.stem.rsplit(".", 1)) for p in truths if "." in p.stem]
    if not found:
        raise UsageError(f"{corpus}: not a ground-truth corpus (no truths/NAME.TIER.json; build one with "
                         f"python bench/circuit_corpus.py {corpus})")
    known = sorted({t for _, t in found})
    if tiers is not None:
        unknown = [t for t in tiers if t not in known]
        if unknown or not tiers:
            raise UsageError(f"--tiers: {', '.join(unknown) or 'nothing given'}: the corpus has {', '.join(known)}")
        found = [(n, t) for n, t in found if t in tiers]
    chosen = [(n, t) for n, t in found if not any(fnmatch.fnmatchcase(n, pattern) for pattern in skip)]
    for name, tier in chosen:
        check_record(corpus, name, tier, ablations)
    return chosen


def check_record(corpus: Path, name: str, tier: str, ablations: Sequence[str]) -> None:
    """UsageError unless truths/NAME.TIER.json is a record the benchmark reads (each ablation's
    and zero's necessary edges, and what they were measured on) and models/NAME.TIER.safetensors
    a model file."""
    path = corpus / "truths" / f"{name}.{tier}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        measured = record["measured"]
        whole = [measured["samples"], measured["seed"], 0 if measured["length"] is None else measured["length"]]
        valid = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in whole)
        for ablation in {*ablations, "zero"}:
            necessary = record["truth"][ablation]["necessary"]
            valid = valid and isinstance(necessary, list) and all(isinstance(e, str) for e in necessary)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{path}: not a corpus record ({type(error).__name__}: {error})") from None
    if not valid:
        raise UsageError(f"{path}: not a corpus record (measured or necessary edges of the wrong kind)")
    from ..errors import ModelFileError
    from ..transformer.io import load

    try:
        load(corpus / "models" / f"{name}.{tier}.safetensors", device="cpu")
    except ModelFileError as error:
        raise UsageError(f"{error} (every record of the corpus has its model)") from None


def run_job(job: Job) -> dict[str, Any]:
    """One (model, method, ablation): its row of results.jsonl."""
    import torch

    from ..transformer.io import load
    from .discover import discover
    from .scores import auroc

    torch.set_num_threads(1)
    corpus, name, tier, method, ablation, device = job
    folder = Path(corpus)
    record = json.loads((folder / "truths" / f"{name}.{tier}.json").read_text(encoding="utf-8"))
    measured = record["measured"]
    model = load(folder / "models" / f"{name}.{tier}.safetensors", device=device)
    result = discover(model, method, ablation, None, measured["samples"], measured["seed"], measured["length"],
                      necessary=record["truth"][ablation]["necessary"])
    fixed = result.graph.keys_of(record["truth"]["zero"]["necessary"])
    curve = result.to_json()["faithfulness"]
    return {"key": job_key(job), "model": name, "tier": tier, "method": method, "ablation": ablation,
            "metric": result.metric, "candidates": len(result.scores), "edges": len(result.graph_edges),
            "necessary": len(result.necessary), "auroc": result.auroc, "auroc_graph": result.auroc_graph,
            "node_auroc": result.node_auroc, "auroc_fixed": auroc(result.scores, fixed),
            "certified_k": result.certified_k, "faithfulness": curve, "cost": result.cost}


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The finished rows (a torn last line cut off the file first)."""
    return [json.loads(line) for line in complete_lines(path).decode("utf-8").splitlines() if line.strip()]


def _finished(todo: Sequence[Job], workers: int, address: str | None) -> Iterable[tuple[Job, dict[str, Any]]]:
    if workers == 1 and address is None:
        return ((job, run_job(job)) for job in todo)
    from ..training.cluster import ray_map
    from ..training.sweep import GPU_SHARE

    return ray_map(run_job, todo, workers, address, GPU_SHARE if todo and todo[0][5].startswith("cuda") else 0.0)


def run_benchmark(corpus: Path, out: Path, methods: Sequence[str], ablations: Sequence[str],
                  tiers: Sequence[str] | None = None, workers: int = 2, address: str | None = None,
                  skip: Sequence[str] = (), device: str = "cpu") -> str:
    """Run every job not yet in ``out`` (the models matching ``skip`` left out), each on ``device``;
    write and return the summary of these jobs."""
    from ..files import check_writable_folder
    from ..progress import bar

    models = corpus_models(corpus, tiers, skip, ablations)
    check_writable_folder(out)
    if address is not None:
        from ..training.cluster import check_reachable

        check_reachable(address)
    out.mkdir(exist_ok=True)
    results = out / RESULTS
    done = {row["key"] for row in read_rows(results)}
    jobs = [(str(corpus.resolve()), n, t, m, a, device) for n, t in models for m in methods for a in ablations]
    todo = [job for job in jobs if job_key(job) not in done]
    with bar(total=len(jobs), initial=len(jobs) - len(todo), desc="benchmark", unit="job") as shown:
        for _, row in _finished(todo, workers, address):
            append_line(results, json.dumps(row) + "\n")
            shown.update()
    from .summary import write_summary

    return write_summary(out, [row for row in read_rows(results) if row["key"] in {job_key(j) for j in jobs}])
