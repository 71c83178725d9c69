"""``infoflowc discover MODEL --method M --ablation A`` and ``infoflowc benchmark CORPUS -o OUT``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..circuits import ABLATIONS
from ..discovery import METHODS, NUMBER_METRICS, TOKEN_METRICS
from ..errors import UsageError
from .common import (
    EXIT_OK,
    Command,
    add_device_flag,
    add_json_flag,
    add_model_argument,
    add_output_flag,
    add_samples_flag,
    add_seed_flag,
    add_workers_flag,
    positive_int,
    resolved_device,
    with_compiled_model,
)


def discover_model(arguments: argparse.Namespace, model: Any) -> None:
    """Run one method on ``model`` and print (or write) what it found against the truth."""
    from ..discovery.discover import discover
    from ..discovery.metrics import metrics_of
    from ..files import check_writable
    from ..pipeline.reading import program_of
    from .circuit import check_length, check_samples

    if arguments.html is not None:
        check_writable(arguments.html, arguments.model)
    program = program_of(model)
    if arguments.metric is not None and arguments.metric not in metrics_of(program):
        kind = "a token" if program.token_output else "a numeric"
        raise UsageError(f"--metric {arguments.metric}: {arguments.model} has {kind} output; one of "
                         f"{', '.join(metrics_of(program))}")
    check_samples(model, arguments.samples)
    if arguments.length is not None:
        check_length(model, arguments.length)
    result = discover(model, arguments.method, arguments.ablation, arguments.metric, arguments.samples,
                      arguments.seed, arguments.length, device=resolved_device(arguments.device))
    if arguments.html is not None:
        from ..discovery.picture import page
        from ..files import write_bytes_atomically

        write_bytes_atomically(arguments.html, page(result, model, str(arguments.model)).encode("utf-8"))
    if arguments.json:
        print(json.dumps({"model": str(arguments.model), **result.to_json()}, indent=1))
        return
    print(summary_text(str(arguments.model), result))


def summary_text(name: str, result: Any) -> str:
    """The text report of one discovery result."""
    from ..discovery.summary import fixed

    truth = result.necessary
    lines = [f"{name}: {result.method} under {result.ablation} ablation ({result.metric}); "
             f"{len(result.scores)} candidate edges, {len(truth)} necessary",
             f"  edge AUROC {_shown(result.auroc)}  (within the graph's {len(result.graph_edges)} edges: "
             f"{_shown(result.auroc_graph)})  node AUROC {_shown(result.node_auroc)}",
             "  faithfulness of the top-k circuit: " + ", ".join(
                 f"k={p.k} {fixed(p.faithfulness)}{'*' if p.certified else ''}" for p in result.faithful)
             + "  (* keeps the certificate)",
             f"  cost: {result.cost['forwards']} forwards, {result.cost['backwards']} backwards, "
             f"{result.cost['seconds']} s", "  top edges:"]
    from ..discovery.scores import top_k

    for pair in top_k(result.scores, max(10, len(truth))):
        mark = "necessary" if pair in truth else ("graph" if pair in result.graph_edges else "-")
        lines.append(f"    {pair[0]}->{pair[1]}<{pair[2]}>".ljust(34) + f"{result.scores[pair]:>12.4g}  {mark}")
    return "\n".join(lines)


def _shown(value: float | None) -> str:
    from ..discovery.summary import fixed

    return "undefined" if value is None else fixed(value)


def command_benchmark(arguments: argparse.Namespace) -> None:
    from ..discovery.benchmark import run_benchmark

    methods = _listed(arguments.methods, METHODS, "--methods")
    ablations = _listed(arguments.ablations, ABLATIONS, "--ablations")
    tiers = None if arguments.tiers is None else _items(arguments.tiers)
    skip = _items(arguments.skip)
    print(run_benchmark(arguments.corpus, arguments.output, methods, ablations, tiers, arguments.workers,
                        arguments.address, skip, str(resolved_device(arguments.device))))


def _items(text: str) -> tuple[str, ...]:
    """A comma-separated flag's items, stripped, each once, in order."""
    return tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


def _listed(text: str, choices: tuple[str, ...], flag: str) -> tuple[str, ...]:
    names = _items(text)
    unknown = [n for n in names if n not in choices]
    if unknown or not names:
        raise UsageError(f"{flag}: {', '.join(unknown) or 'nothing given'}: expected some of {', '.join(choices)}")
    return names


def command_discover(arguments: argparse.Namespace) -> int:
    with_compiled_model(arguments.model, lambda model: discover_model(arguments, model), "discover", kept=True)
    return EXIT_OK


def _discover_arguments(parser: argparse.ArgumentParser) -> None:
    """``discover MODEL [--method M] [--ablation A] [--metric ..] [--json] [--html PAGE] [--device D]``."""
    add_model_argument(parser)
    parser.add_argument("--method", choices=METHODS, default="eap-ig", help="the method (eap-ig)")
    parser.add_argument("--ablation", choices=ABLATIONS, default="zero", help="the ablation (zero)")
    parser.add_argument("--metric", choices=TOKEN_METRICS + NUMBER_METRICS,
                        help="what a patch is measured with (default: logit-diff/output for the gradient methods, "
                             "kl/l2 for the others)")
    add_samples_flag(parser, 300, "random inputs besides the exhaustive ones (300)")
    add_seed_flag(parser, "the inputs' seed (0)")
    parser.add_argument("--length", type=positive_int, help="a model over vectors: the inputs' length (its T)")
    add_json_flag(parser, "every edge's score, the AUROCs and the curve as JSON")
    parser.add_argument("--html", type=Path, metavar="PAGE", help="also write a page drawing the found graph against "
                                                                  "the truth")
    add_device_flag(parser, "the patched forwards run")


def _benchmark_arguments(parser: argparse.ArgumentParser) -> None:
    """``benchmark CORPUS [--methods ..] [--ablations ..] [--tiers ..] [--skip ..] [--workers N] -o DIR``."""
    parser.add_argument("corpus", type=Path, help="the corpus folder (models/ and truths/)")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated ({','.join(METHODS)})")
    parser.add_argument("--ablations", default=",".join(ABLATIONS), help=f"comma-separated ({','.join(ABLATIONS)})")
    parser.add_argument("--tiers", help="comma-separated realism tiers (default: every tier of the corpus)")
    parser.add_argument("--skip", default="", help="comma-separated shell patterns of models to leave out "
                                                   "(e.g. 'intrinsic_*,tracr_sort_unique')")
    add_workers_flag(parser, "Ray workers (1: in this process)")
    parser.add_argument("--address", help="a Ray cluster's address (auto, HOST:PORT or ray://HOST:PORT)")
    add_output_flag(parser, "the results folder (resumed if it exists)", required=True)
    add_device_flag(parser, "each job's patched forwards run")


DISCOVER = Command("discover", "a circuit-discovery method on a compiled model, scored against its certified truth "
                   "(edge AUROC, faithfulness)", _discover_arguments, command_discover)
BENCHMARK = Command("benchmark", "every (model, method, ablation) of a ground-truth corpus "
                    "(bench/circuit_corpus.py), resumable, on Ray", _benchmark_arguments, command_benchmark)
