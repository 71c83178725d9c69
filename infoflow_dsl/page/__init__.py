"""One self-contained HTML page per model (``infoflowc report MODEL -o model.html``,
``ifl.report(model, path)``) or per program (``infoflowc analyze FILE --html OUT.html``).

A model's page shows the program and analyze's result, the comparison graph, the InfoFlow
schedule, each head's attention pattern on 8 example inputs, the error histogram against ε and
the a-priori bound, the parameters per layer and per construction, and the residual directions;
a program's page the first four. Pages open offline (style and script inline, no fetches) and
are deterministic: the same model gives the same bytes, except the ``ifl-measured`` block, which
holds what the float32 forward measured on this CPU (``measured``'s docstring).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..analysis.report import AnalysisReport
from ..language import typed as ir
from ..pipeline.analyzing import analyze
from .content import analysis_data, analysis_graph
from .html import render_page

if TYPE_CHECKING:
    from ..transformer.arguments import ModelSource
    from ..transformer.model import CompiledTransformer


def analysis_page(report: AnalysisReport) -> str:
    """The page of a program alone: source, analysis, comparison graph and schedule."""
    return render_page(analysis_data(report))


def model_data(model: CompiledTransformer) -> dict[str, Any]:
    """The page data of a compiled model (over vectors or tokens): everything but the measured
    block, a function of the file alone. Raises ``ValueError`` for a trained model (it has no
    circuit), ``StoredProgramError`` for a file whose program does not check."""
    from ..pipeline.reading import program_of
    from .measured import model_sections

    if model.card.trained is not None:
        raise ValueError("a trained model has no circuit to show (only compiled ones do)")
    program = program_of(model)
    analysis = analyze(program)
    built = built_analysis(model, program)
    data = analysis_data(analysis, built)
    tree = analysis_graph(built.to_dict(), program.source)
    data.update(model_sections(model, program, {n.name: n.source for n in tree}))
    data["kind"] = "model"
    from ..circuits.graph import circuit_graph

    data["edge_graph"] = circuit_graph(model).to_json()
    data["schedule"] = {**data["schedule"], "heads": data["heads"]}
    return data


def built_analysis(model: CompiledTransformer, program: ir.Program) -> AnalysisReport:
    """The analysis of the model as built: its program relowered at the file's ε, dtype and
    routes (``pipeline.reading.relower``), the schedule the circuit realises (every layer and head the
    model has, at the layers it has them)."""
    from ..analysis.ranges import roots_at_zero
    from ..pipeline.lowering import realised_schedule
    from ..pipeline.reading import relower

    lowering = relower(model, program)
    schedule = realised_schedule(lowering.schedule, lowering.circuit)
    return AnalysisReport(lowering.program, lowering.tree, schedule, roots_at_zero(lowering.program))


def model_measured(model: CompiledTransformer) -> dict[str, Any]:
    """The measured block: what the model's float32 forward gives on this CPU (``measured``)."""
    from ..pipeline.reading import program_of
    from .measured import measured_section

    return measured_section(model, program_of(model))


def model_page(model: CompiledTransformer, extra: tuple[tuple[str, str, str], ...] = ()) -> str:
    """The page of a compiled model (module docstring), with ``extra`` sections (id, heading, HTML)."""
    return render_page(model_data(model), model_measured(model), extra)


def report(model: ModelSource, path: str | os.PathLike[str]) -> None:
    """Write ``model``'s page (``model`` or the path of its file) to ``path`` atomically (a
    temporary file, then a rename).

    Args:
        model: a compiled model, or the path of its file.
        path: the page to write.

    Raises:
        ModelFileError: a path that is not a model file.
        UsageError: a model that has no page (a trained or token model), or a path that cannot be written.
    """
    from ..files import write_bytes_atomically
    from ..transformer.arguments import model_argument

    write_bytes_atomically(path, model_page(model_argument(model, "report")).encode("utf-8"))
