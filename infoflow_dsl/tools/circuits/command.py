"""``infoflowc circuit MODEL --edges [--truth] [--json]``: a model's edge graph and, with
``--truth``, which edges each ablation needs (``graph``, ``truth``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .patching import ABLATIONS


def add_edge_flags(parser: argparse.ArgumentParser, nonnegative_int: Any) -> None:
    """The ``circuit`` command's edge flags."""
    parser.add_argument("--edges", action="store_true",
                        help="the edge graph: sender -> receiver's q, k, v, MLP input or output, with the residual "
                             "directions it carries (checked against the weights)")
    parser.add_argument("--truth", action="store_true",
                        help="with --edges: which edges zero, mean and resample ablation need (every token sequence "
                             "up to length 4, the constant ones and --samples random ones), with witnesses")
    parser.add_argument("--ablation", action="append", choices=ABLATIONS,
                        help="with --truth: one ablation (repeatable; default all three)")
    parser.add_argument("--samples", type=nonnegative_int, default=2_000, help="with --truth: random inputs (2000)")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="with --truth: the inputs' seed (0)")


def command_edges(arguments: argparse.Namespace, model: Any) -> None:
    """Print the graph (and the truth) of ``model``, loaded from ``arguments.model``."""
    from .graph import circuit_graph
    from .truth import edge_truth

    if arguments.truth:
        ablations = tuple(dict.fromkeys(arguments.ablation or ABLATIONS))
        graph, truths = edge_truth(model, ablations, arguments.samples, arguments.seed)
    else:
        graph, truths = circuit_graph(model), {}
    if arguments.json:
        out = {"model": str(arguments.model), **graph.to_json()}
        if truths:
            out["truth"] = {a: t.to_json() for a, t in truths.items()}
        print(json.dumps(out, indent=1))
        return
    print(f"{arguments.model}: {len(graph.nodes)} nodes, {len(graph.edges)} edges (ε = {graph.eps:g}); "
          f"every other pair carries exactly 0 through the weights")
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
