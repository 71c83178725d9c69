"""The ground-truth corpus: compiled models at three realism tiers and a superposed one, each with its edge graph, its
truth under zero, mean and resample ablation, and its certificate (issue "certified ground-truth
circuits").

    python bench/circuit_corpus.py OUT [--workers N] [--quick] [--tiers T,..] [--programs P,..] [--benchmarks]
        [--device cpu|cuda]

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
  residual compressed below its number of features (dimensions shared over the depth with tight
  lifetimes, erasers freeing them: ``compiler/compress.py``), then the second tier's passes;
- ``superposed``: a token program compiled again with ``--residual`` at its smallest certified D,
  where that D is below F, the certificate's ``features_alive`` (what ``disguise --compress``'s
  tight lifetimes reach, all that sharing over the depth does): more features than dimensions
  at one depth, every read certified by a margin (docs/superposition.md); its graph is the plain
  circuit's nodes read again off its weights. A program over vectors, or one whose smallest D
  is F (a numeric peak), has no such model (``OUT/skipped/NAME.superposed.json`` says why).

- ``trained``: the compiled model trained keeping its circuit (``train --init --keep-circuit``:
  the task, interchange and strict losses, relative noise at the start, heads ≥ 2 a layer, widths
  ≥ 32; where refused, once more with less noise and a smaller learning rate), then certified on
  the trained weights (``circuits/certify.py``: the function on every token sequence up to length
  4, the constant ones and 2,000 random ones; the truth of every (sender, receiver, channel) pair
  on those inputs; the certificate). A model the certification
  refuses is not admitted: its reasons go to ``OUT/refused/NAME.trained.json``.

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
import dataclasses
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
#: the trained tier (``train --init --keep-circuit``, then certified on its own weights): the training run
TRAINED = {"steps": 100, "noise": 1e-4, "lr": 1e-5, "batch": 64, "heads": 2, "d_model": 32, "d_head": 8, "d_mlp": 32}
#: where the first run is refused, one more at smaller noise and learning rate (a numeric output's ε of 1e-3
#: is left at lr 1e-5 by most): the model admitted is the first the certification admits
GENTLER = {"noise": 1e-5, "lr": 1e-6}
#: the rebalanced tier (``train --init --keep-circuit --rebalance``): the (noise, lr) tried in turn, the first the
#: certification admits kept (``bench/trained_realism.py``'s admission)
REBALANCED = ({"noise": 1e-2, "lr": 1e-4}, {"noise": 1e-3, "lr": 1e-5}, GENTLER)
ALL_TIERS = (*TIER_NAMES, "trained", "rebalanced")
EDGE_SAMPLES, CERTIFICATE_SAMPLES, VECTOR_LENGTH = 300, 2_000, 8
VECTOR_EDGE_SAMPLES = 64  # a vector model's edges: 64 random inputs and 64 corners (a forward an edge)
SUITE_LENGTH, SUITE_EPS = 6, 1e-3


def sources(quick: bool, extras: bool = True) -> dict[str, tuple[str, str, str]]:
    """name -> (kind, what builds it, its partner's name): a shipped model's path or a RASP suite
    program's name, and the program merged into it in the third tier (the next of its group); the
    example table's programs (compiled to see which compile) only with ``extras``."""
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
    for name, model in (extra_models() if extras else {}).items():
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
    from infoflow_dsl.pipeline.reading import program_of

    if compiled.vocabulary is None:
        return None, "a program over vectors: no categorical feature for --residual to superpose"
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
            return None, (f"its smallest D is F = {record['features_alive']}, what sharing over the depth "
                          "alone reaches: nothing shares a dimension at one depth")
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
    from infoflow_dsl.pipeline.devices import on_device
    from infoflow_dsl.pipeline.reading import program_of

    torch.set_num_threads(1)
    start = time.perf_counter()
    compiled = build(kind, what)
    if tier in ("trained", "rebalanced"):
        return run_trained(out, name, what, compiled, start, tier)
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


def run_trained(out: str, name: str, what: str, compiled: Any, start: float,
                tier: str = "trained") -> dict[str, Any]:
    """The trained tier: ``compiled`` trained keeping its circuit (:data:`TRAINED`), then certified
    on its own weights (the function on the finite domain, the truth of every pair on the
    certificate's inputs, the certificate). A refused model is not admitted: its record goes to
    ``OUT/refused/`` with the reasons, and no model is written."""
    import infoflow_dsl as ifl
    from infoflow_dsl.circuits.statistics import weight_statistics
    from infoflow_dsl.oracle.tokens import random_ids
    from infoflow_dsl.pipeline.reading import program_of
    from infoflow_dsl.training.circuit_keeping import KeepSettings, covering_settings, train_until_certified
    from infoflow_dsl.training.rebalance import PASSES
    from infoflow_dsl.training.settings import TrainSettings

    program = program_of(compiled)
    passes = PASSES if tier == "rebalanced" else ()
    tries = [(r["noise"], r["lr"]) for r in (REBALANCED if passes else (TRAINED, GENTLER))]
    settings = covering_settings(compiled, TrainSettings(
        heads=(TRAINED["heads"],), d_model=TRAINED["d_model"], d_head=TRAINED["d_head"], d_mlp=TRAINED["d_mlp"],
        steps=TRAINED["steps"], batch=TRAINED["batch"], lr=TRAINED["lr"]))
    admitted = train_until_certified(program, settings, compiled, tries, KeepSettings(rebalance=passes),
                                     samples=CERTIFICATE_SAMPLES, seed=2)
    kept, certification = admitted.result, admitted.certification
    t = {**TRAINED, "noise": admitted.noise, "lr": admitted.lr}
    folder, graph = Path(out), kept.graph
    row = {"model": name, "tier": tier, "source": what, "merged": [], "eps": graph.eps, "edges": len(graph.edges),
           "nodes": len(graph.nodes), "pairs": len(graph.pairs()), "parameters": kept.model.nonzero_parameter_count(),
           "training": {**t, "heads": list(settings.heads), "d_model": settings.d_model, "d_head": settings.d_head,
                        "d_mlp": settings.d_mlp, "losses": kept.losses},
           "function": certification.function, "holds": certification.holds}
    if not certification.holds:
        row |= {"refused": certification.failures(), "seconds": round(time.perf_counter() - start, 2)}
        (folder / "refused").mkdir(parents=True, exist_ok=True)
        (folder / "refused" / f"{name}.{tier}.json").write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")
        return row
    kept.model.card = dataclasses.replace(kept.model.card, kept_circuit=dataclasses.replace(
        kept.model.card.kept_circuit, certified=certification.to_json()))
    ifl.save(kept.model, folder / "models" / f"{name}.{tier}.safetensors")
    x = random_ids(program, 256, seed=11) if program.over_tokens else None
    inputs = next(iter(certification.truths.values())).inputs
    row |= {"compression": None, "inputs": {"edges": inputs, "certificate": inputs},
            "measured": {"samples": CERTIFICATE_SAMPLES, "seed": 2, "length": None},
            "necessary": {a: len(t.necessary) for a, t in certification.truths.items()},
            "certificate": certification.certificate,
            "statistics": weight_statistics(kept.model, x) if x is not None else None,
            "seconds": round(time.perf_counter() - start, 2)}
    record = {**row, "graph": graph.to_json(), "truth": {a: t.to_json() for a, t in certification.truths.items()}}
    (folder / "truths" / f"{name}.{tier}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return row


def jobs(out: Path, quick: bool, tiers: tuple[str, ...] = TIER_NAMES,
         programs: tuple[str, ...] = ()) -> list[tuple[str, str, str, tuple[str, str], str]]:
    """The (name, kind, what, partner's (kind, what), tier) whose record is not written yet (nor
    refused, for the trained tier), the heaviest tier first (the trained and merged models take
    longest: started first, they do not make the tail); only ``programs`` when given."""
    extras = not programs or any(p.startswith("extra_") for p in programs)
    found = sources(quick and not programs, extras)
    every = sources(False, extras) if quick else found  # a quick run's partners may lie outside it
    if programs:
        found = {name: found[name] for name in programs}
    done = {p.name.removesuffix(".json") for sub in ("truths", "skipped", "refused")
            for p in (out / sub).glob("*.json")}
    return [(name, kind, what, every[partner][:2], tier) for tier in reversed(ALL_TIERS) if tier in tiers
            for name, (kind, what, partner) in found.items() if f"{name}.{tier}" not in done]


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


def trained_lines(out: Path, admitted: list[dict[str, Any]]) -> list[str]:
    """The trained tier: how many the certification admitted and refused (and why), and the
    admitted models' weight statistics (zeros, active units)."""
    refused = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "refused").glob("*.trained.json"))]
    if not admitted and not refused:
        return []
    stats = [r["statistics"] for r in admitted if r.get("statistics")]
    mean = {k: sum(s[k] for s in stats) / len(stats) for k in ("zeros", "active")} if stats else {}
    reasons = "; ".join(f"{r['model']}: {r['refused'][0][:90]}" for r in refused[:4])
    gentle = sum(r["training"]["noise"] == GENTLER["noise"] for r in admitted)
    return ["", f"Trained tier (`train --init --keep-circuit`, {TRAINED['steps']} steps, noise {TRAINED['noise']:g} "
            f"and lr {TRAINED['lr']:g}, or where refused noise {GENTLER['noise']:g} and lr {GENTLER['lr']:g} "
            f"({gentle} admitted so), certified on the trained weights): {len(admitted)} admitted, "
            f"{len(refused)} refused"
            + (f" ({reasons}{'; ...' if len(refused) > 4 else ''})" if refused else "")
            + (f"; the admitted token models' weights: zeros {mean['zeros']:.3g}, active units {mean['active']:.3g}"
               if mean else "") + "."]


def summary(out: Path) -> str:
    """OUT/summary.md from every record written."""
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "truths").glob("*.json"))]
    lines = ["# The ground-truth corpus", "",
             f"{len(rows)} models; certificate (every pair outside the graph ablated at once, within ε) holds on "
             f"{sum(r['holds'] for r in rows)} of them.", "",
             "| tier | models | edges (mean) | needed: zero | mean | resample | largest certificate error / ε | "
             "residual: features → dimensions |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for tier in ALL_TIERS:
        mine = [r for r in rows if r["tier"] == tier]
        if not mine:
            continue
        edges = sum(r["edges"] for r in mine)
        needed = [sum(r["necessary"][a] for r in mine) / max(edges, 1) for a in ("zero", "mean", "resample")]
        worst = max(max(r["certificate"].values()) / r["eps"] for r in mine)
        lines.append(f"| {tier} | {len(mine)} | {edges / len(mine):.1f} | {needed[0]:.0%} | {needed[1]:.0%} | "
                     f"{needed[2]:.0%} | {worst:.3g} | {_compressed(mine)} |")
    lines += trained_lines(out, [r for r in rows if r["tier"] == "trained"])
    if not rows:
        return "\n".join(lines) + "\n"
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
    parser.add_argument("--tiers", default=",".join(TIER_NAMES),
                        help=f"the tiers to build, of {', '.join(ALL_TIERS)} (default: all but trained)")
    parser.add_argument("--programs", default="", help="only these programs (comma-separated corpus names)")
    arguments = parser.parse_args(argv)
    from infoflow_dsl.pipeline.devices import resolve_device

    device = str(resolve_device(arguments.device))
    for sub in ("models", "truths"):
        (arguments.out / sub).mkdir(parents=True, exist_ok=True)
    programs = tuple(p for p in arguments.programs.split(",") if p)
    todo = jobs(arguments.out, arguments.quick, tuple(arguments.tiers.split(",")), programs)
    print(f"{len(todo)} (program, tier) to build", flush=True)

    def report(row: dict[str, Any]) -> None:
        if "skipped" in row:
            print(f"  {row['model']:<28} {row['tier']:<10} skipped: {row['skipped']}", flush=True)
            return
        verdict = "holds" if row["holds"] else "REFUSED: " + "; ".join(row.get("refused", []))[:200]
        print(f"  {row['model']:<28} {row['tier']:<10} {row['edges']:>4} edges  certificate {verdict}  "
              f"{row['seconds']} s", flush=True)

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
