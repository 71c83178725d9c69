"""``ifl.discover(model, method, ablation)``: one discovery method on one compiled model, scored
against the certified truth of the same ablation on the same inputs."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ..circuits import ABLATIONS
from ..circuits.patching import EdgeForward, EdgeKey
from ..circuits.truth import SAMPLES
from . import METHODS
from .acdc import acdc
from .attribution import eap, eap_ig, eap_ig_inputs
from .baselines import node_patching, node_scores, random_scores
from .exact import exact_patching
from .metrics import default_metric, metrics_of
from .scores import DiscoveryResult, scored
from .task import DiscoveryTask

RUNS: dict[str, Callable[[DiscoveryTask], dict[EdgeKey, float]]] = {
    "exact": exact_patching, "eap": eap, "eap-ig": eap_ig, "eap-ig-inputs": eap_ig_inputs, "acdc": acdc,
    "node": node_patching, "random": random_scores}
assert tuple(RUNS) == METHODS


def check_choice(what: str, value: str, choices: Collection[str]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {what} {value!r}: one of {', '.join(choices)}")


def discover(model: Any, method: str, ablation: str = "zero", metric: str | None = None,
             samples: int = SAMPLES, seed: int = 0, length: int | None = None,
             necessary: Collection[str] | None = None, device: str | Any | None = None) -> DiscoveryResult:
    """Score every candidate edge of ``model`` (a compiled model or its file) with ``method``
    under ``ablation``, measured by ``metric`` (the method's default: see ``metrics``), on the
    truth's inputs (``samples``, ``seed``, ``length``), against the truth: the edges necessary
    under that ablation, measured here unless given (``necessary``: edge names, a corpus
    record's); the patched forwards run on ``device`` (None: where the model is).

    Args:
        model: a compiled (or disguised) model, or the path of its file.
        method: ``exact``, ``eap``, ``eap-ig``, ``eap-ig-inputs``, ``acdc``, ``node`` or ``random``.
        ablation: ``zero``, ``mean`` or ``resample``.
        metric: the effect measured (``kl``, ``logit-diff``, ``accuracy``; ``output``, ``l2``,
            ``error``); None: the method's default for the output's kind.
        samples: random inputs of the truth and the scores.
        seed: their seed.
        length: the sequence length of a model over vectors (default its T).
        necessary: the truth's edge names, when already measured (a corpus record's).
        device: where the patched forwards run (cpu, cuda; None: where the model is).

    Returns:
        A :class:`DiscoveryResult`: every candidate's score, the truth, AUROC and the MIB metrics.

    Raises:
        UsageError: an unknown method, ablation or metric.
        ModelFileError: a path that is not a model file.
    """
    from ..circuits.graph import circuit_graph
    from ..pipeline.devices import on_device
    from ..pipeline.reading import program_of
    from ..transformer.arguments import model_argument

    check_choice("method", method, METHODS)
    check_choice("ablation", ablation, ABLATIONS)
    compiled = on_device(model_argument(model, "discover"), device)
    program = program_of(compiled)
    metric = metric or default_metric(program, method)
    check_choice("metric", metric, metrics_of(program))
    graph = circuit_graph(compiled)
    task = DiscoveryTask(EdgeForward(compiled, graph), program, ablation, metric, samples, seed, length)
    found = graph.keys_of(task.measurement.ablation(ablation).necessary if necessary is None else necessary)
    distance = metrics_of(program)[1]
    nodes = node_scores(task) if method == "node" else None
    return scored(task, method, RUNS[method], found, distance, nodes)
