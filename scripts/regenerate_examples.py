"""Regenerate the stored outputs under compiled_examples/ from the canonical .iflow programs.

    python scripts/regenerate_examples.py

For every canonical program: NAME.analysis.json (what ``infoflowc analyze NAME.iflow --json``
prints); for every efficient one also NAME.safetensors (``infoflowc compile NAME.iflow --eps 1e-2
--samples 2000``: float32, measured on 2,000 random inputs and 256 corners), NAME.md, a short
report, and NAME.html, the model's page (``infoflowc report NAME.safetensors``). The tests
rebuild all of them and compare them byte for byte (a page's measured block within the model's
rounding), so run this after changing the analysis, the compiler or the page.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

import infoflow_dsl as ifl
from infoflow_dsl.page import model_page
from infoflow_dsl.transformer.io import model_to_bytes

EXAMPLES = Path(__file__).resolve().parent.parent / "compiled_examples"
EPS = 1e-2
SAMPLES = 2_000
#: Tracr's library (compiled_examples/tracr/): exact token programs, compiled at T = 10 (the
#: files' length) within ε = 1e-3 in float32 and measured on 2,000 random ids of random lengths
#: plus the exhaustive short lengths and the constant sequences. No page is shipped for them
#: (``infoflowc report`` draws one; tests/cli/test_report.py checks three).
TRACR = EXAMPLES / "tracr"
TRACR_EPS = 1e-3


def _measured_text(measured: dict) -> str:
    if "inputs" in measured:  # a token model (measure.tokens)
        answers = (f", {measured['wrong']} of {measured['sites']} token answers wrong, smallest score margin "
                   f"{measured['min_margin']:.3g}" if "wrong" in measured else "")
        return (f"{measured['max_error']:.3g} ({measured['inputs']} inputs: {measured['samples']} random ids of random "
                f"lengths, all {measured['exhaustive']} of lengths ≤ {measured['exhaustive_length']}, "
                f"{measured['corners']} constant sequences{answers})")
    return (f"{measured['max_error']:.3g} ({measured['samples']} random inputs, {measured['corners']} corners, "
            f"{measured['excluded_by_margin']} under the margin left out)")


def report(name: str, analysis: ifl.AnalysisReport, model: ifl.CompiledTransformer, eps: float = EPS) -> str:
    """The markdown report of one compiled example."""
    config = model.config
    measured = config["measured_error"]
    lines = [f"# {name}", "", "```", config["program"]["source"].strip(), "```", "",
             f"Compiled by `infoflowc compile {name}.iflow --eps {eps:g} --samples {SAMPLES}` (float32).", "",
             "| | |", "|---|---|",
             f"| order β′, dimension β₁ | {analysis.order}, {analysis.dimension} |",
             f"| layers, heads per layer | {len(config['layers'])}, {[len(x['heads']) for x in config['layers']]} |",
             f"| d_model | {config['d_model']} |",
             f"| d_mlp per layer (embedding) | {model.d_mlp} ({model.d_mlp_embedding}) |",
             f"| parameters (nonzero) | {model.parameter_count()} ({model.nonzero_parameter_count()}) |",
             f"| ε, a-priori bound | {eps:g}, {config['a_priori_bound']:.3g} |",
             f"| measured max error | {_measured_text(measured)} |",
             "", "## Schedule", "", "| layer | head | kind | site | computes | β |", "|---|---|---|---|---|---|"]
    for index, layer in enumerate(config["layers"]):
        for head in layer["heads"]:
            lines.append(f"| {index + 1} | {head['name']} | {head['kind']} | {head['site']} | "
                         f"`{head['computes']}` | {head['beta']:.4g} |")
    if config.get("output") == "token":
        causal = "causal: the output at t reads x(1..t) alone" if config.get("causal") else "not causal"
        lines += ["", "## What each head does", "",
                  f"Read from the model's own config. The output is read at every token ({causal}).", ""]
        lines += [f"- layer {index + 1}, head {head['name']}: {head_role(head)}"
                  for index, layer in enumerate(config["layers"]) for head in layer["heads"]]
    lines += ["", "## Where ε went", "", "| source | a-priori error |", "|---|---|"]
    for source, share in config["error_budget"]["shares"]:
        lines.append(f"| {source} | {share:.3g} |")
    lines.append(f"| rounding ({config['dtype']}) | {config['error_budget']['rounding']:.3g} |")
    return "\n".join(lines) + "\n"


def _side_text(side: str | int) -> str:
    """A mask side in words: ``query-1`` -> "t − 1", ``last`` -> "T", 3 -> "3"."""
    if isinstance(side, int):
        return str(side)
    match = re.fullmatch(r"(key|query|last)([+-]\d+)?", side)
    assert match is not None
    base = {"key": "s", "query": "t", "last": "T"}[match.group(1)]
    offset = int(match.group(2) or 0)
    return base if not offset else f"{base} {'−' if offset < 0 else '+'} {abs(offset)}"


def head_role(head: dict) -> str:
    """What one head of a compiled model does, in words, from its config entry alone."""
    mask = " and ".join(f"{_side_text(a)} {op} {_side_text(b)}" for a, op, b in head["mask"]) or "none"
    outputs = head["outputs"]
    into = f"into {outputs[0]} .. {outputs[-1]}" if len(outputs) > 1 else f"into {outputs[0]}"
    if head["kind"] == "position" and head["mask"] == [["key", "==", "query-1"]]:
        return f"previous-token head: every token t attends to t − 1 alone (mask {mask}) and copies x(t − 1) {into}"
    if head["kind"] == "position":
        return f"position head: fetches `{head['computes']}` (mask {mask}) {into}"
    where = "every token t" if head["site"] == "token" else "the readout token"
    if head["kind"] == "length":
        return (f"length head: {where} averages [s = 1] over every key (mask {mask}), which is 1/len, {into}; "
                f"the FFN after it decodes len")
    if head["kind"] == "token retrieval":
        return (f"retrieval of a token: {where} attends with β = {head['beta']:.4g} to the position s that wins "
                f"`{head['computes']}` among the keys its mask allows ({mask}) and copies x(s) {into}")
    if head["kind"] == "uniform":
        return f"uniform head: {where} averages its values over the keys its mask allows ({mask}) {into}"
    return (f"retrieval of a score: {where} attends with β = {head['beta']:.4g} to the best s of "
            f"`{head['computes']}` (mask {mask}) and retrieves the score's key features {into}")


def main() -> None:
    torch.set_num_threads(1)
    for source in sorted(EXAMPLES.glob("*.iflow")):
        program = ifl.load_program(source)
        analysis = ifl.analyze(program)
        (EXAMPLES / f"{source.stem}.analysis.json").write_text(analysis.to_json(), encoding="utf-8")
        if analysis.verdict != "efficient":
            continue
        model = ifl.compile(program, eps=EPS, dtype="float32", device="cpu", samples=SAMPLES)
        (EXAMPLES / f"{source.stem}.safetensors").write_bytes(model_to_bytes(model))
        (EXAMPLES / f"{source.stem}.md").write_text(report(source.stem, analysis, model), encoding="utf-8")
        shipped = ifl.load(EXAMPLES / f"{source.stem}.safetensors", device="cpu")  # the page of the file as shipped
        (EXAMPLES / f"{source.stem}.html").write_text(model_page(shipped), encoding="utf-8")
        print(f"wrote {source.stem}: analysis, model, report, page")
    for source in sorted(TRACR.glob("*.iflow")):
        program = ifl.load_program(source)
        analysis = ifl.analyze(program)
        (TRACR / f"{source.stem}.analysis.json").write_text(analysis.to_json(), encoding="utf-8")
        model = ifl.compile(program, eps=TRACR_EPS, dtype="float32", device="cpu", samples=SAMPLES)
        (TRACR / f"{source.stem}.safetensors").write_bytes(model_to_bytes(model))
        (TRACR / f"{source.stem}.md").write_text(report(source.stem, analysis, model, TRACR_EPS), encoding="utf-8")
        print(f"wrote tracr/{source.stem}: analysis, model, report")


if __name__ == "__main__":
    main()
