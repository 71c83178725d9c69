"""``infoflowc circuit MODEL --edges [--truth] [--json]``: a model's edge graph and, with
``--truth``, which edges each ablation needs (``graph``, ``truth``); ``infoflowc disguise``:
the realism passes (``disguise``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
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
    positive_int,
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


def disguise_model(arguments: argparse.Namespace, model: Any) -> None:
    """Write the disguised model and say what it computes and how far it moved."""
    import torch

    from ..circuits.disguise import disguise
    from ..files import check_writable
    from ..measure.vectors import model_inputs
    from ..oracle.tokens import random_ids
    from ..pipeline.reading import program_of
    from ..transformer.io import save

    check_writable(arguments.output, arguments.model)
    try:
        disguised = disguise(model, merge=[_loaded(path, "--merge") for path in arguments.merge],
                             distract=arguments.distract, compress=arguments.compress,
                             split_heads=arguments.split_heads,
                             split_neurons=arguments.split_neurons,
                             shuffle=arguments.shuffle, rotate=arguments.rotate, seed=arguments.seed)
    except ValueError as error:
        raise UsageError(f"{arguments.model}: {error}") from None
    program = program_of(model)
    x = random_ids(program, 256, seed=arguments.seed) if program.over_tokens else model_inputs(
        program, 256, seed=arguments.seed).to(model.dtype)
    with torch.no_grad():
        moved = float((disguised(x).double() - model(x).double()).abs().max())
    trained = _loaded(arguments.beside, "--beside") if arguments.stats and arguments.beside else None
    save(disguised, arguments.output)
    print(f"{arguments.output}: {disguised.nonzero_parameter_count():,} nonzero parameters (the model: "
          f"{model.nonzero_parameter_count():,}); the output moved by at most {moved:.3g} on 256 random inputs "
          f"(rounding; ε {model.card.eps:g}); its edge graph: infoflowc circuit {arguments.output} --edges")
    compression = None if disguised.card.disguised is None else disguised.card.disguised.compression
    if compression is not None:
        print(f"residual: {compression['features']} features in {compression['dimensions']} dimensions "
              f"({compression['erased']} erased after their last reader)")
    if arguments.stats:
        from ..circuits.statistics import statistics_table, weight_statistics

        rows = {"compiled": weight_statistics(model, x), "disguised": weight_statistics(disguised, x)}
        if trained is not None:
            rows["trained"] = weight_statistics(trained, x if trained.T >= x.shape[1] else x[:, :trained.T])
        print(statistics_table(rows))


def _loaded(path: Path, flag: str) -> Any:
    """The model a flag names, loaded (a bad file: UsageError naming the flag)."""
    from ..errors import ModelFileError
    from ..transformer.io import load

    try:
        return load(path, device="cpu")
    except ModelFileError as error:
        raise UsageError(f"{flag}: {error}") from None


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


def command_disguise(arguments: argparse.Namespace) -> int:
    with_compiled_model(arguments.model, lambda model: disguise_model(arguments, model), "disguise")
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


def _disguise_arguments(parser: argparse.ArgumentParser) -> None:
    """``disguise MODEL [--merge OTHER] [--distract N] [--compress] [--split-heads [K]] [--split-neurons K]
    [--shuffle] [--rotate] [--stats [--beside TRAINED]] -o OUT``."""
    add_model_argument(parser)
    parser.add_argument("--merge", type=Path, action="append", default=[], metavar="OTHER",
                        help="another compiled model (the same input) whose program joins the model's, its "
                             "output read by nothing (repeatable)")
    parser.add_argument("--distract", type=nonnegative_int, default=0, metavar="N",
                        help="N distractor directions, a distractor head a layer and N distractor units an FFN: "
                             "active on every input, read by nothing the output needs")
    parser.add_argument("--compress", action="store_true",
                        help="the residual below its number of features: each dimension carries several features "
                             "one after another over the depth, an eraser freeing it after a feature's last reader")
    parser.add_argument("--split-heads", type=positive_int, nargs="?", const=2, default=1, metavar="K",
                        help="each head into K heads of the same pattern (K = 2 if not given)")
    parser.add_argument("--split-neurons", type=positive_int, default=1, metavar="K",
                        help="each ReLU unit into K units (ReLU is positively homogeneous)")
    parser.add_argument("--shuffle", action="store_true", help="the heads of each layer and the units of each "
                                                               "FFN in a random order")
    parser.add_argument("--rotate", action="store_true", help="the residual stream by a random orthogonal matrix")
    add_seed_flag(parser, "the passes' seed (0)")
    parser.add_argument("--stats", action="store_true", help="print weight and activation statistics of the model "
                                                             "and its disguise (zeros, distinct values, kurtosis, "
                                                             "stable rank, active units)")
    parser.add_argument("--beside", type=Path, metavar="TRAINED", help="with --stats: a trained model's statistics "
                                                                       "too (infoflowc train)")
    add_output_flag(parser, "the disguised model (.safetensors)", required=True)


CIRCUIT = Command("circuit", "where each comparison and FFN function of a model lives (TransformerLens hook, "
                  "residual index, bound)", _circuit_arguments, command_circuit)
DISGUISE = Command("disguise", "make a compiled model look trained, computing the same function, its edge graph "
                   "carried with it", _disguise_arguments, command_disguise)
