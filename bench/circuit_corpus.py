"""The ground-truth corpus: compiled models at three realism tiers and a superposed one, each with its edge graph, its
truth under zero, mean and resample ablation, and its certificate (issue "certified ground-truth
circuits").

    python bench/circuit_corpus.py OUT [--workers N] [--quick] [--benchmarks] [--device cpu|cuda]

Programs: every shipped compiled example (the continuous ones and Tracr's 14), the 50 RASP
programs of ``bench/rasp_suite.py`` (compiled from RASP at max_seq_len = 6, ε = 1e-3), and the
further programs of the tests' shared example table (``tests/programs.py``, ``EXTRA``: programs
over vectors written to use every construct of the language) that compile at their own ε and T
(the ones the analysis calls inefficient, or that would need over the unit cap, are refused by
design and left out). Tiers:

- ``plain``: the compiled model;
- ``disguised``: heads split in 2, units in 2, heads and units shuffled, the residual rotated;
- ``merged``: another program of the same input merged in first (the smallest other one of its
  group: the same vocabulary or the same d, and the same T; the program itself where it is alone), then 4
  distractor directions, a distractor head per layer and 4 distractor units per FFN, then the
  residual compressed below its number of features (dimensions shared over the depth, erasers
  freeing them: ``compiler/compress.py``), then the second tier's passes;
- ``superposed``: a token program compiled again with ``--residual`` at its smallest certified D,
  where that D is below its features alive at once F (more features than dimensions at one
  depth, every read certified by a margin: docs/superposition.md); its graph is the plain
  circuit's nodes read again off its weights. A program over vectors, or one whose smallest D
  is F, has no such model (``OUT/skipped/NAME.superposed.json`` says why).

Each (program, tier) is one task (Ray with ``--workers`` > 1, as ``infoflowc sweep``): the model
is written to ``OUT/models/NAME.TIER.safetensors`` and its record to ``OUT/truths/NAME.TIER.json``
(the graph, each ablation's necessary edges with witnesses, and the certificate: the largest
error with every pair outside the graph ablated, on every token sequence up to length 4, the
constant ones and 2,000 random ones, or 2,000 random vector inputs and the corners). The edges'
necessity is measured on 300 random token sequences besides the exhaustive ones, or on 64 random
vector inputs and 64 corners (each edge is a forward of the whole model). A finished record is
kept: a rerun resumes. ``OUT/summary.md`` is written at the end (with ``--benchmarks``, its tier
table also to BENCHMARKS.md "Ground truth").
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

TIERS: dict[str, dict[str, Any]] = {
    "plain": {},
    "disguised": {"split_heads": 2, "split_neurons": 2, "shuffle": True, "rotate": True},
    "merged": {"distract": 4, "compress": True, "split_heads": 2, "split_neurons": 2, "shuffle": True, "rotate": True},
}
SUPERPOSED = "superposed"
TIER_NAMES = (*TIERS, SUPERPOSED)
EDGE_SAMPLES, CERTIFICATE_SAMPLES, VECTOR_LENGTH = 300, 2_000, 8
VECTOR_EDGE_SAMPLES = 64  # a vector model's edges: 64 random inputs and 64 corners (a forward an edge)
SUITE_LENGTH, SUITE_EPS = 6, 1e-3


def sources(quick: bool) -> dict[str, tuple[str, str, str]]:
    """name -> (kind, what builds it, its partner's name): a shipped model's path or a RASP suite
    program's name, and the program merged into it in the third tier (the next of its group)."""
    from rasp_suite import PROGRAMS

    import infoflow_dsl as ifl

    found: dict[str, tuple[str, str]] = {}
    groups: dict[Any, list[str]] = {}
    size: dict[str, int] = {}
    for path in sorted((ROOT / "compiled_examples").rglob("*.safetensors")):
        name = str(path.relative_to(ROOT / "compiled_examples").with_suffix("")).replace("/", "_")
        model = ifl.load(path, device="cpu")
        found[name], size[name] = ("shipped", str(path)), model.nonzero_parameter_count()
        key = (model.vocabulary.names if model.vocabulary is not None else model.d, model.T)
        groups.setdefault(key, []).append(name)
    for name, model in extra_models().items():
        found[name], size[name] = ("extra", name.removeprefix("extra_")), model.nonzero_parameter_count()
        groups.setdefault((model.d, model.T), []).append(name)
    for entry in PROGRAMS:
        found[f"rasp_{entry.name}"] = ("rasp", entry.name)
        groups.setdefault((tuple(str(v) for v in entry.vocab), SUITE_LENGTH), []).append(f"rasp_{entry.name}")
    partner = {name: min((m for m in members if m != name), key=lambda m: (size.get(m, 0), m), default=name)
               for members in groups.values() for name in members}
    if quick:
        found = {name: found[name] for name in ["prefix_mean", "tracr_reverse", f"rasp_{PROGRAMS[0].name}"]}
    return {name: (kind, what, partner[name]) for name, (kind, what) in found.items()}


def extra_program(name: str) -> Any:
    """The shared example table's program ``name`` (tests/programs.py, EXTRA)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from programs import EXTRA

    import infoflow_dsl as ifl

    entry = next(e for e in EXTRA if e.name == name)
    return ifl.parse_program(entry.source, path=entry.path)


@functools.cache
def extra_models() -> dict[str, Any]:
    """``extra_NAME`` -> the compiled model, for each program of EXTRA that compiles (at its own ε)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from programs import EXTRA

    import infoflow_dsl as ifl
    from infoflow_dsl.errors import CompileError

    found = {}
    for entry in EXTRA:
        try:
            found[f"extra_{entry.name}"] = ifl.compile(extra_program(entry.name), samples=0)
        except CompileError:  # inefficient, or over the unit cap: refused by design
            continue
    return found


def build(kind: str, what: str) -> Any:
    import infoflow_dsl as ifl

    if kind == "shipped":
        return ifl.load(what, device="cpu")
    if kind == "extra":
        return ifl.compile(extra_program(what), samples=0)
    from rasp_suite import PROGRAMS

    entry = next(e for e in PROGRAMS if e.name == what)
    return ifl.compile(ifl.from_rasp(entry.build(), list(entry.vocab), SUITE_LENGTH), eps=SUITE_EPS, samples=0)


def superposed(compiled: Any) -> tuple[Any, str]:
    """(the model compiled again at its smallest certified residual, '') or (None, why not)."""
    import re

    import infoflow_dsl as ifl
    from infoflow_dsl.errors import CompileError
    from infoflow_dsl.pipeline import program_of

    if compiled.vocabulary is None:
        return None, "a program over vectors (--residual superposes token programs)"
    program, config = program_of(compiled), compiled.config
    settings = {"eps": config["eps"], "dtype": config["dtype"], "samples": 0}
    try:
        ifl.compile(program, residual=1, **settings)
    except CompileError as error:
        found = re.search(r"the smallest residual .* is (\d+) \(", str(error))
        if found is None:
            return None, str(error)
        model = ifl.compile(program, residual=int(found.group(1)), **settings)
        record = model.config["superposition"]
        if record["d_model"] >= record["features_alive"]:
            return None, f"its smallest D is its F = {record['features_alive']}: nothing to superpose"
        return model, ""
    return None, "a residual of 1 dimension sufficed"


def vector_length(model: Any) -> int | None:
    """The inputs' length of a model over vectors (None: a token model reads every length)."""
    if model.vocabulary is not None:
        return None
    return model.T if model.exact_length_only else max(model.min_length, min(model.T, VECTOR_LENGTH))


def run_one(out: str, name: str, kind: str, what: str, partner: tuple[str, str], tier: str,
            device: str = "cpu") -> dict[str, Any]:
    """Build, disguise, measure and write one (program, tier), its truth's patched forwards on
    ``device``; its summary row."""
    import torch

    import infoflow_dsl as ifl
    from infoflow_dsl.circuits import ABLATIONS
    from infoflow_dsl.circuits.patching import EdgeForward
    from infoflow_dsl.circuits.truth import TruthMeasurement
    from infoflow_dsl.pipeline import on_device, program_of

    torch.set_num_threads(1)
    start = time.perf_counter()
    compiled = build(kind, what)
    merge = [build(*partner)] if tier == "merged" else []
    if tier == SUPERPOSED:
        model, why = superposed(compiled)
        if model is None:
            (Path(out) / "skipped").mkdir(exist_ok=True)
            (Path(out) / "skipped" / f"{name}.{tier}.json").write_text(json.dumps({"why": why}) + "\n")
            return {"model": name, "tier": tier, "skipped": why}
    else:
        model = ifl.disguise(compiled, merge=merge, seed=7, **TIERS[tier]) if TIERS[tier] else compiled
    graph, program, length = ifl.circuit_graph(model), program_of(model), vector_length(model)
    forward = EdgeForward(on_device(model, device), graph)
    measured = {"samples": EDGE_SAMPLES if length is None else VECTOR_EDGE_SAMPLES, "seed": 1, "length": length}
    edges = TruthMeasurement(forward, program, **measured)
    certified = TruthMeasurement(forward, program, CERTIFICATE_SAMPLES, seed=2, length=length)
    truths = {a: edges.ablation(a) for a in ABLATIONS}
    certificate = {a: certified.certificate(a) for a in ABLATIONS}
    folder = Path(out)
    ifl.save(model, folder / "models" / f"{name}.{tier}.safetensors")
    row = {"model": name, "tier": tier, "source": what, "merged": [partner[1]] if merge else [],
           "eps": graph.eps, "edges": len(graph.edges),
           "nodes": len(graph.nodes), "parameters": model.nonzero_parameter_count(),
           "compression": model.config.get("disguised", {}).get("compression"),
           "superposition": {k: model.config["superposition"][k] for k in ("features_alive", "d_model", "ratio")}
           if "superposition" in model.config else None,
           "inputs": {"edges": edges.inputs, "certificate": certified.inputs}, "measured": measured,
           "necessary": {a: len(t.necessary) for a, t in truths.items()},
           "certificate": certificate, "holds": all(e <= graph.eps for e in certificate.values()),
           "seconds": round(time.perf_counter() - start, 2)}
    record = {**row, "graph": graph.to_json(), "truth": {a: t.to_json() for a, t in truths.items()}}
    path = folder / "truths" / f"{name}.{tier}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return row


def jobs(out: Path, quick: bool) -> list[tuple[str, str, str, tuple[str, str], str]]:
    """The (name, kind, what, partner's (kind, what), tier) whose record is not written yet, the
    heaviest tier first (the merged models take longest: started first, they do not make the tail)."""
    found = sources(quick)
    every = sources(False) if quick else found  # a quick run's partners may lie outside it
    return [(name, kind, what, every[partner][:2], tier) for tier in reversed(TIER_NAMES)
            for name, (kind, what, partner) in found.items()
            if not any((out / sub / f"{name}.{tier}.json").exists() for sub in ("truths", "skipped"))]


def execute(out: Path, todo: list[tuple[str, str, str, tuple[str, str], str]], workers: int,
            report: Callable[[dict[str, Any]], None], device: str = "cpu") -> None:
    if workers <= 1:
        for job in todo:
            report(run_one(str(out), *job, device))
        return
    import ray

    from infoflow_dsl.training.cluster import start_ray

    start_ray(workers, None)
    task = ray.remote(num_cpus=1)(run_one)
    pending = [task.remote(str(out), *job, device) for job in todo]
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        report(ray.get(ready[0]))


def _compressed(rows: list[dict[str, Any]]) -> str:
    """The tier's residual features and dimensions, summed over its compressed models, or its
    superposed ones' features alive at once and dimensions ('—': none)."""
    superposed = [r["superposition"] for r in rows if r.get("superposition")]
    if superposed:
        alive, width = sum(c["features_alive"] for c in superposed), sum(c["d_model"] for c in superposed)
        return f"{alive:,} alive at once → {width:,} ({width / alive:.0%}; superposed at one depth)"
    found = [r["compression"] for r in rows if r.get("compression")]
    if not found:
        return "—"
    features, dimensions = sum(c["features"] for c in found), sum(c["dimensions"] for c in found)
    smaller = sum(c["dimensions"] < c["features"] for c in found)
    return (f"{features:,} → {dimensions:,} ({dimensions / features:.0%}; {smaller} of {len(found)} models "
            f"smaller, {sum(c['erased'] for c in found):,} erasers)")


def summary(out: Path) -> str:
    """OUT/summary.md from every record written."""
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "truths").glob("*.json"))]
    lines = ["# The ground-truth corpus", "",
             f"{len(rows)} models; certificate (every pair outside the graph ablated at once, within ε) holds on "
             f"{sum(r['holds'] for r in rows)} of them.", "",
             "| tier | models | edges (mean) | needed: zero | mean | resample | largest certificate error / ε | "
             "residual: features → dimensions |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for tier in TIER_NAMES:
        mine = [r for r in rows if r["tier"] == tier]
        if not mine:
            continue
        edges = sum(r["edges"] for r in mine)
        needed = [sum(r["necessary"][a] for r in mine) / max(edges, 1) for a in ("zero", "mean", "resample")]
        worst = max(max(r["certificate"].values()) / r["eps"] for r in mine)
        lines.append(f"| {tier} | {len(mine)} | {edges / len(mine):.1f} | {needed[0]:.0%} | {needed[1]:.0%} | "
                     f"{needed[2]:.0%} | {worst:.3g} | {_compressed(mine)} |")
    worst = max(rows, key=lambda r: max(r["certificate"].values()) / r["eps"])
    slowest = max(rows, key=lambda r: r["seconds"])
    lines += ["", "Needed: the share of the graph's edges whose ablation alone puts some output out of the "
              "certificate; it falls with the tiers because split heads make each copy's edges redundant, and "
              "merged programs and distractors add edges nothing needs. The largest certificate error, "
              f"{max(worst['certificate'].values()):.3g} at ε = {worst['eps']:g}, is {worst['model']}'s "
              f"({worst['tier']}); a token output counts 1 for any wrong answer, and none has one. Residual: the "
              "merged tier's compression (dimensions shared over the depth, erasers freeing them); the superposed "
              "tier's features alive at once and dimensions (compile --residual). Built in "
              f"{sum(r['seconds'] for r in rows) / 60:.0f} min of one worker each (the slowest, {slowest['model']} "
              f"{slowest['tier']}, {slowest['seconds']:.0f} s)."]
    lines += ["", "| model | tier | edges | needed (zero / mean / resample) | certificate error (ε) | seconds |",
              "|---|---|---:|---|---|---:|"]
    for r in rows:
        needed = " / ".join(str(r["necessary"][a]) for a in ("zero", "mean", "resample"))
        worst = max(r["certificate"].values())
        lines.append(f"| {r['model']} | {r['tier']} | {r['edges']} | {needed} | {worst:.3g} ({r['eps']:g}) | "
                     f"{r['seconds']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="3 programs, for a smoke test")
    parser.add_argument("--benchmarks", action="store_true",
                        help='write the tier table to BENCHMARKS.md "Ground truth"')
    parser.add_argument("--device", help="where the truths' patched forwards run (default: cuda when available)")
    arguments = parser.parse_args(argv)
    from infoflow_dsl.pipeline import resolve_device

    device = str(resolve_device(arguments.device))
    for sub in ("models", "truths"):
        (arguments.out / sub).mkdir(parents=True, exist_ok=True)
    todo = jobs(arguments.out, arguments.quick)
    print(f"{len(todo)} (program, tier) to build", flush=True)

    def report(row: dict[str, Any]) -> None:
        if "skipped" in row:
            print(f"  {row['model']:<28} {row['tier']:<10} skipped: {row['skipped']}", flush=True)
            return
        print(f"  {row['model']:<28} {row['tier']:<10} {row['edges']:>4} edges  certificate "
              f"{'holds' if row['holds'] else 'FAILS'}  {row['seconds']} s", flush=True)

    execute(arguments.out, todo, arguments.workers, report, device)
    text = summary(arguments.out)
    (arguments.out / "summary.md").write_text(text, encoding="utf-8")
    print(text)
    if arguments.benchmarks:
        from report import write_section

        tiers = text.split("\n\n| model |")[0].split("\n", 2)[2]
        write_section("Ground truth", f"`python bench/circuit_corpus.py OUT --workers {arguments.workers} "
                                      f"--benchmarks` (2 CPU cores). {tiers}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
