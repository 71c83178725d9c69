"""infoflow: compile target functions over token sequences into transformer weights.

The Python API (DESIGN.md):

>>> import infoflow_dsl as ifl
>>> prog = ifl.load_program("compiled_examples/min_pairwise.iflow")   # parse + check
>>> y_ref = ifl.evaluate(prog, x)       # the exact target, float64: (B, T, d) -> (B,) or (B, k)
>>> report = ifl.analyze(prog)          # order, dimension, schedule, cost law, verdict; .to_json()
>>> model = ifl.compile(prog, eps=1e-4)  # a torch.nn.Module: x (B, T, d) -> (B,) or (B, k)
>>> ifl.save(model, "min_pairwise.safetensors"); model = ifl.load("min_pairwise.safetensors")
>>> y, cache = ifl.hooked(model).run_with_cache(x)  # TransformerLens hook points (the ``lens`` extra)
>>> sites = ifl.circuit(model)          # where each comparison and FFN function lives in the cache
"""

from __future__ import annotations

from pathlib import Path

from .analysis.report import AnalysisReport, analyze
from .errors import CompileError, Diagnostic, ModelFileError, ProgramError
from .language.check import check
from .language.parse import parse
from .language.typed import Program
from .pipeline import compile_program
from .reference.circuit_map import CircuitSite
from .reference.circuit_map import circuit as _circuit_map
from .reference.evaluate import evaluate
from .reference.sampling import sample_inputs
from .transformer.io import load, save
from .transformer.lens import hooked
from .transformer.model import CompiledTransformer

compile = compile_program
circuit = _circuit_map  # the function; the circuit IR module stays importable as infoflow_dsl.compiler.circuit

__all__ = [
    "AnalysisReport",
    "CircuitSite",
    "CompileError",
    "CompiledTransformer",
    "Diagnostic",
    "ModelFileError",
    "Program",
    "ProgramError",
    "analyze",
    "circuit",
    "compile",
    "compile_program",
    "evaluate",
    "hooked",
    "load",
    "load_program",
    "parse_program",
    "sample_inputs",
    "save",
]


def parse_program(source: str, path: str = "<string>", length: int | None = None,
                  margin: float | None = None) -> Program:
    """Parse and check program text; ``length``/``margin`` override its declarations."""
    return check(parse(source, path), path, source, length=length, margin=margin)


def load_program(path: str | Path, length: int | None = None, margin: float | None = None) -> Program:
    """Read, parse and check a ``.iflow`` file. Raises :class:`ProgramError` for every fault
    in the program, ``OSError`` when the file cannot be read."""
    source = Path(path).read_text(encoding="utf-8")
    return parse_program(source, str(path), length=length, margin=margin)
