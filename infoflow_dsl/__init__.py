"""infoflow: compile target functions over token sequences into transformer weights.

The Python API (docs/design.md, "The Python API"):

>>> import infoflow_dsl as ifl
>>> prog = ifl.load_program("compiled_examples/min_pairwise.iflow")   # parse + check
>>> y_ref = ifl.evaluate(prog, x)       # the exact target, float64: (B, T, d) -> (B,) or (B, k)
>>> ids = ifl.encode(tokens_prog, ["a", "b"])  # a token program: int64 ids (1, T'); ifl.decode(prog, y)
>>> report = ifl.analyze(prog)          # order, dimension, schedule, cost law, verdict; .to_json()
>>> model = ifl.compile(prog, eps=1e-4)  # a torch.nn.Module: x (B, T, d) -> (B,) or (B, k)
>>> ifl.save(model, "min_pairwise.safetensors"); model = ifl.load("min_pairwise.safetensors")
>>> y, cache = ifl.hooked(model).run_with_cache(x)  # TransformerLens hook points (the ``lens`` extra)
>>> sites = ifl.circuit(model)          # where each comparison and FFN function lives in the cache
>>> dictionary = ifl.features(model)   # every feature: what it computes, its direction at each residual hook
>>> graph = ifl.circuit_graph(model)    # its edges sender -> receiver (q, k, v, MLP in, output), checked
>>> graph, truths = ifl.edge_truth(model)  # which edges zero, mean and resample ablation need, with witnesses
>>> looks_trained = ifl.disguise(model, split_heads=2, split_neurons=3, shuffle=True, rotate=True)
>>> found = ifl.discover(looks_trained, "eap-ig", "mean")  # a discovery method scored against the truth
>>> ifl.export(model, "out/")           # a Hugging Face GPT-2 directory (the ``export`` extra)
>>> ifl.report(model, "min_pairwise.html")  # one self-contained page: graph, patterns, error, parameters
>>> prog = ifl.from_rasp(rasp_program, vocab, max_seq_len)  # a RASP program (Tracr's API) as a Program
"""

from __future__ import annotations

import importlib

from .transformer import save

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (8 ms): mypy reads the name
if TYPE_CHECKING:
    from typing import Any

    from .analysis.report import AnalysisReport
    from .circuits.disguise import disguise
    from .circuits.graph import EdgeGraph, circuit_graph
    from .circuits.truth import edge_truth
    from .compiler.superposition.dictionary import features
    from .discovery.discover import discover
    from .errors import (
        CompileError,
        Diagnostic,
        ExportError,
        ModelFileError,
        NoConstruction,
        ProgramError,
        StoredProgramError,
        SweepError,
        TrainError,
        UncertifiedModel,
        UsageError,
        WorkloadError,
    )
    from .exporters.directory import export, export_inputs, export_outputs, load_exported
    from .language.load import load_program, parse_program
    from .language.program import Program
    from .oracle.answers import decode
    from .oracle.evaluate import evaluate
    from .oracle.sampling import sample_inputs
    from .oracle.tokens import encode
    from .page import report
    from .pipeline.analyzing import analyze
    from .pipeline.compiling import compile_program
    from .pipeline.compiling import compile_program as compile
    from .rasp.translate import from_rasp
    from .transformer.io import load
    from .transformer.lens import hooked
    from .transformer.model import CompiledTransformer
    from .verify.sites import CircuitSite, circuit

#: The public names that resolve on first use (PEP 562), by the module (under this package)
#: that defines them: importing the package imports nothing else but the light
#: ``transformer/__init__.py`` (``save``, below), so that the console script reaches its Ctrl-C
#: guard within milliseconds (``cli/console.py``). ``compile`` is ``compile_program``;
#: ``circuit`` is the function (the circuit IR module is ``infoflow_dsl.compiler.circuit``).
#: ``save`` is bound at import, not resolved lazily: nnsight (>= 0.5) mounts a ``save`` method
#: on every object, which a module's ``__getattr__`` would never get to override.
_LAZY_MODULES: dict[str, tuple[str, ...]] = {
    "errors": ("CompileError", "Diagnostic", "ExportError", "ModelFileError", "NoConstruction", "ProgramError",
               "StoredProgramError", "SweepError", "TrainError", "UncertifiedModel", "UsageError", "WorkloadError"),
    "analysis.report": ("AnalysisReport",),
    "compiler.superposition.dictionary": ("features",),
    "language.load": ("load_program", "parse_program"),
    "language.program": ("Program",),
    "pipeline.compiling": ("compile_program",),
    "pipeline.analyzing": ("analyze",),
    "verify.sites": ("CircuitSite", "circuit"),
    "oracle.evaluate": ("evaluate",),
    "oracle.sampling": ("sample_inputs",),
    "oracle.answers": ("decode",),
    "oracle.tokens": ("encode",),
    "exporters.directory": ("export", "export_inputs", "export_outputs", "load_exported"),
    "page": ("report",),
    "rasp.translate": ("from_rasp",),
    "circuits.disguise": ("disguise",),
    "circuits.graph": ("EdgeGraph", "circuit_graph"),
    "circuits.truth": ("edge_truth",),
    "discovery.discover": ("discover",),
    "transformer.io": ("load",),
    "transformer.lens": ("hooked",),
    "transformer.model": ("CompiledTransformer",),
}
_ALIASES = {"compile": "compile_program"}
_MODULE_OF = {name: module for module, names in _LAZY_MODULES.items() for name in names}

__all__ = [
    "AnalysisReport",
    "CircuitSite",
    "CompileError",
    "CompiledTransformer",
    "Diagnostic",
    "EdgeGraph",
    "ExportError",
    "ModelFileError",
    "NoConstruction",
    "Program",
    "ProgramError",
    "StoredProgramError",
    "SweepError",
    "TrainError",
    "UncertifiedModel",
    "UsageError",
    "WorkloadError",
    "analyze",
    "circuit",
    "circuit_graph",
    "compile",
    "compile_program",
    "decode",
    "discover",
    "disguise",
    "edge_truth",
    "encode",
    "evaluate",
    "export",
    "export_inputs",
    "export_outputs",
    "features",
    "from_rasp",
    "hooked",
    "load",
    "load_exported",
    "load_program",
    "parse_program",
    "report",
    "sample_inputs",
    "save",
]


def __getattr__(name: str) -> Any:
    """A lazily resolved public name: import its module now, and keep the value as a global."""
    attribute = _ALIASES.get(name, name)
    if attribute not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULE_OF[attribute]}", __name__), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``dir(ifl)``, tab completion): no imports or helpers of this module."""
    return sorted(__all__)
