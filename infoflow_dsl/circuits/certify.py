"""Certify a trained model on its own weights (``train --keep-circuit``): the function, the truth
of every pair, the certificate. A model that fails is refused, not admitted to a corpus.

A model trained from a compiled one carries its init's graph (its card's ``kept_circuit``), but
no weight of it is exactly 0, so nothing is read off the weights: everything is measured.

1. **The function** on the whole finite domain: a token program on every sequence up to length 4
   (:data:`~.truth.EXHAUSTIVE_LIMIT` at most), the constant sequences of the longer lengths and
   ``samples`` random ones (``measure/tokens.py``, as ``check`` measures): every answer right
   (a number within ε); a program over vectors: ``check``'s measurement (random inputs, corners,
   near ties and ``adversarial`` steps of its adversarial search) within ε.
2. **The truth** under each ablation, every (sender, receiver, channel) pair of the trained
   model a candidate (not only the graph's edges): necessary when ablating it alone leaves the
   certificate on some input of the truth's set (``truth.py``), with its witness.
3. **The certificate**: every pair outside the graph ablated at once leaves every output right
   (within ε), under each ablation; and no pair outside the graph is necessary.

The model is certified when all three hold; :func:`require_certified` raises
:class:`CertificationError` otherwise (``infoflowc train`` exits 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import ABLATIONS
from .graph import EdgeGraph
from .patching import EdgeForward, edge_key
from .truth import EXHAUSTIVE_LENGTH, EXHAUSTIVE_LIMIT, SAMPLES, AblationTruth, TruthMeasurement

ADVERSARIAL = 200  # adversarial search steps for a model over vectors


class CertificationError(Exception):
    """A trained model that its certification refuses; ``certification`` says why."""

    def __init__(self, certification: Certification) -> None:
        super().__init__("; ".join(certification.failures()))
        self.certification = certification


@dataclass(frozen=True)
class Certification:
    """What :func:`certify` measured: the function (``function``: the measurement's record,
    ``function_holds``), each ablation's truth over every pair, the pairs outside the graph that
    are necessary (``outside_necessary``) and the certificate's error (``certificate``) per
    ablation, against ``eps``."""

    eps: float
    function: dict[str, Any]
    function_holds: bool
    truths: dict[str, AblationTruth]
    outside_necessary: dict[str, tuple[str, ...]]
    certificate: dict[str, float]

    @property
    def holds(self) -> bool:
        return self.function_holds and not any(self.outside_necessary.values()) and all(
            e <= self.eps for e in self.certificate.values())

    def failures(self) -> list[str]:
        """What fails, a line each (none when it holds)."""
        out = [] if self.function_holds else [f"the function: {self.function}"]
        out += [f"{a}: pairs outside the graph are necessary: {', '.join(names[:5])}"
                for a, names in self.outside_necessary.items() if names]
        out += [f"{a}: every pair outside the graph ablated at once: error {e:.3g} > ε {self.eps:g}"
                for a, e in self.certificate.items() if e > self.eps]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"holds": self.holds, "eps": self.eps, "function": self.function,
                "function_holds": self.function_holds,
                "necessary": {a: list(t.necessary) for a, t in self.truths.items()},
                "outside_necessary": {a: list(v) for a, v in self.outside_necessary.items()},
                "certificate": self.certificate, "inputs": next(iter(self.truths.values())).inputs}


def _function(model: Any, program: Any, eps: float, samples: int, seed: int) -> tuple[dict[str, Any], bool]:
    """The function measured on the finite domain (see the module docstring)."""
    if program.over_tokens:
        from ..measure.tokens import measure_tokens

        size = program.token_vocabulary.size
        limit = min(EXHAUSTIVE_LIMIT, sum(size**n for n in range(1, min(EXHAUSTIVE_LENGTH, program.length) + 1)))
        measured = measure_tokens(model, program, samples, seed, limit=max(limit, size))
        return measured.to_json(), measured.passes(eps)
    from ..verify.check import check_model

    result = check_model(model, program, samples, eps, seed, adversarial=ADVERSARIAL, progress=False)
    return {"max_error": result.worst_error, "evaluated": result.evaluated,
            "adversarial_worst": result.adversarial_worst}, result.within


def certify(model: Any, graph: EdgeGraph | None = None, ablations: tuple[str, ...] = ABLATIONS,
            samples: int = SAMPLES, seed: int = 0) -> Certification:
    """Measure ``model`` (or its file) against ``graph`` (its stored graph by default).

    Args:
        model: a trained model (``train --keep-circuit``) or any model with an edge graph.
        graph: the graph to certify (default: ``circuit_graph(model)``).
        ablations: the ablations the truth and the certificate are measured under.
        samples: random inputs (besides every short sequence of a token model).
        seed: their seed.

    Returns:
        The :class:`Certification` (``holds`` says whether the model is admitted).
    """
    from ..pipeline.reading import program_of
    from ..transformer.arguments import model_argument
    from .graph import circuit_graph

    loaded = model_argument(model, "certify")
    graph = circuit_graph(loaded) if graph is None else graph
    program = program_of(loaded)
    function, function_holds = _function(loaded, program, graph.eps, samples, seed)
    measurement = TruthMeasurement(EdgeForward(loaded, graph), program, samples, seed)
    inside = {edge_key(e) for e in graph.edges}
    truths, outside, certificate = {}, {}, {}
    for ablation in ablations:
        truth = measurement.ablation(ablation, graph.pairs())
        truths[ablation] = truth
        necessary = set(truth.necessary)
        outside[ablation] = tuple(t.edge for t, key in zip(truth.edges, graph.pairs(), strict=True)
                                  if t.edge in necessary and key not in inside)
        certificate[ablation] = truth.outside_error
    return Certification(graph.eps, function, function_holds, truths, outside, certificate)


def require_certified(model: Any, **options: Any) -> Certification:
    """:func:`certify`, raising :class:`CertificationError` when the model fails."""
    certification = certify(model, **options)
    if not certification.holds:
        raise CertificationError(certification)
    return certification
