"""``infoflowc circuit MODEL [--edges [--truth]] [--json]``: where each value of a model lives
(the circuit map), its edge graph and, with ``--truth``, which edges each ablation needs
(``graph``, ``truth``). ``disguise`` has its own module (:mod:`.disguise`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..circuits import ABLATIONS
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
    nonnegative_int,
    resolved_device,
    with_compiled_model,
)


def command_edges(arguments: argparse.Namespace, model: Any) -> None:
    """Print the graph (and the truth) of ``model``, loaded from ``arguments.model``."""
    from ..circuits.graph import circuit_graph
    from ..circuits.truth import edge_truth

    if (arguments.mib or arguments.output) and not arguments.truth:
        raise UsageError(f"{'--mib' if arguments.mib else '-o'} goes with --truth")
    if arguments.truth:
        ablations = tuple(dict.fromkeys(arguments.ablation or ABLATIONS))
        if arguments.mib and len(ablations) != 1:
            raise UsageError("--mib writes one ablation's circuit: give one --ablation")
        if arguments.output is not None:
            from ..files import check_writable

            check_writable(arguments.output)
        length = arguments.length
        if length is not None:
            check_length(model, length)
        check_samples(model, arguments.samples)
        graph, truths = edge_truth(model, ablations, arguments.samples, arguments.seed, length,
                                   resolved_device(arguments.device))
        _write_or_print(arguments, model, graph, truths)
        if arguments.mib:
            return
    else:
        graph, truths = circuit_graph(model), {}
    if arguments.json:
        out = {"model": str(arguments.model), **graph.to_json()}
        if truths:
            out["truth"] = {a: t.to_json() for a, t in truths.items()}
        print(json.dumps(out, indent=1))
        return
    outside = ("every other pair, ablated at once, leaves every output within ε (measured on the trained weights: "
               "train --keep-circuit)") if model.card.kept_circuit is not None else (
        "every other pair carries exactly 0 through the weights")
    print(f"{arguments.model}: {len(graph.nodes)} nodes, {len(graph.edges)} edges (ε = {graph.eps:g}); {outside}")
    columns = "".join(f"{a:>9}" for a in truths)
    print(f"  {'edge':<28}{columns}  directions")
    for edge in graph.edges:
        marks = "".join(f"{'needed' if e.necessary else '-':>9}" for t in truths.values()
                        for e in t.edges if e.edge == edge.name)
        shown = ", ".join(edge.directions[:4]) + (f", ... ({len(edge.directions)})" if len(edge.directions) > 4 else "")
        print(f"  {edge.name:<28}{marks}  {shown}")
    for ablation, truth in truths.items():
        print(f"{ablation}: {len(truth.necessary)} of {len(truth.edges)} edges needed on {truth.inputs} inputs; "
              f"every pair outside the graph ablated at once: error {truth.outside_error:.3g} (ε {graph.eps:g})")


def _write_or_print(arguments: argparse.Namespace, model: Any, graph: Any, truths: dict[str, Any]) -> None:
    """With -o, the model with its truth stored; with --mib, the truth as MIB's circuit JSON."""
    from ..circuits.formats import mib_circuit, truth_record, with_truth

    if arguments.output is not None:
        from ..transformer.io import save

        record = truth_record(graph, truths, arguments.samples, arguments.seed, arguments.length)
        save(with_truth(model, record), arguments.output)
    if arguments.mib:
        (truth,) = truths.values()
        print(json.dumps(mib_circuit(model, graph, truth), indent=1))


def check_samples(model: Any, samples: int) -> None:
    """UsageError for --samples 0 on a model over vectors (its inputs are the samples and as many
    corners: none at all)."""
    if model.vocabulary is None and samples < 1:
        raise UsageError("--samples must be at least 1 for a model over vectors (its inputs are that many random "
                         "ones and as many corners)")


def check_length(model: Any, length: int) -> None:
    """UsageError unless ``--length`` is one the model's certificate covers."""
    if model.vocabulary is not None:
        raise UsageError("--length is for a model over vectors: a token model's truth reads every length")
    low = model.T if model.exact_length_only else max(model.min_length, 1)
    if not low <= length <= model.T:
        raise UsageError(f"--length must be in {low}..{model.T} for this model, got {length}")


def command_circuit(arguments: argparse.Namespace) -> int:
    from ..verify.sites import circuit

    if arguments.features:
        from ..compiler.superposition.dictionary import features, print_features

        model, found = with_compiled_model(arguments.model, features, "map")
        if arguments.json:
            print(json.dumps({"model": str(arguments.model), "d_model": model.d_model, "features": found}))
        else:
            print_features(str(arguments.model), model, found)
        return EXIT_OK
    if arguments.edges or arguments.truth:
        with_compiled_model(arguments.model, lambda model: command_edges(arguments, model), "map", kept=True)
        return EXIT_OK
    model, sites = with_compiled_model(arguments.model, circuit, "map")
    if arguments.json:
        print(json.dumps({"model": str(arguments.model), "sites": [s.to_json() for s in sites]}, indent=1))
        return EXIT_OK
    labels = model.card.labels
    print(f"{arguments.model}: {len(sites)} sites (value = Σ weight·h[index] + constant at the hook's rows)")
    for s in sites:
        reads = " ".join(f"{w:+.4g}·{labels[i]}[{i}]" for i, w in zip(s.index, s.value.weights, strict=True))
        head = f"  head {s.head[0]}.hook_z[:, :, {s.head[1]}]" if s.head else ""
        print(f"  {s.name:<10} {s.site:<7} {s.hook:<26} bound {s.bound:.3g}  {s.computes}")
        print(f"  {'':<10} = {reads or '0'}{f' {s.value.constant:+.4g}' if s.value.constant else ''}{head}")
    return EXIT_OK


def _circuit_arguments(parser: argparse.ArgumentParser) -> None:
    """``circuit MODEL [--json] [--features] [--edges [--truth [--ablation A] ...]] [-o OUT]``."""
    add_model_argument(parser)
    add_json_flag(parser, "print the records as JSON")
    parser.add_argument("--features", action="store_true",
                        help="the feature dictionary: every feature, what it computes, the layers where it is "
                             "alive and its direction at each residual hook (superposed ones read by threshold)")
    parser.add_argument("--edges", action="store_true",
                        help="the edge graph: sender -> receiver's q, k, v, MLP input or output, with the residual "
                             "directions it carries (checked against the weights)")
    parser.add_argument("--truth", action="store_true",
                        help="with --edges: which edges zero, mean and resample ablation need (every token sequence "
                             "up to length 4, the constant ones and --samples random ones), with witnesses")
    parser.add_argument("--ablation", action="append", choices=ABLATIONS,
                        help="with --truth: one ablation (repeatable; default all three)")
    add_samples_flag(parser, 2_000, "with --truth: random inputs (2000)")
    add_seed_flag(parser, "with --truth: the inputs' seed (0)")
    parser.add_argument("--length", type=nonnegative_int, help="with --truth, a model over vectors: the inputs' "
                                                               "length (default its T; any length up to T)")
    parser.add_argument("--mib", action="store_true", help="with --truth and one --ablation: print that truth as "
                                                           "MIB's circuit JSON")
    add_output_flag(parser, "with --truth: write the model with its graph and truth stored (export copies them "
                            "into infoflow.json)")
    add_device_flag(parser, "--truth's patched forwards run")


CIRCUIT = Command("circuit", "where each comparison and FFN function of a model lives (TransformerLens hook, "
                  "residual index, bound)", _circuit_arguments, command_circuit)
