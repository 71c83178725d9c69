"""plan: analyze's schedule is the model compile builds, for every program of the table, every
shipped example and Tracr's 14 at T = 5, 10 and 40: the same layers, heads per layer and head
names, and a verdict that agrees with what compile's default route does (efficient: it builds;
inefficient: it refuses, and its refusal names the flag or says why no flag helps)."""

from __future__ import annotations

import pytest
import torch
from programs import ALL, TOKEN_EXTRA, TRACR, ExampleProgram

import infoflow_dsl as ifl

torch.set_num_threads(1)

CASES = [(example, None) for example in ALL + TOKEN_EXTRA] + [
    (example, length) for example in TRACR for length in (5, 10, 40)]


def _layout(names_and_layers: list[tuple[str, int]], layers: int) -> list[list[str]]:
    """Head names per layer, in each layer in the order given."""
    return [[name for name, layer in names_and_layers if layer == index] for index in range(1, layers + 1)]


@pytest.mark.parametrize(("example", "length"), CASES,
                         ids=[f"{e.name}-T{length}" if length else e.name for e, length in CASES])
def test_analyze_reports_the_model_compile_builds(example: ExampleProgram, length: int | None) -> None:
    program = ifl.parse_program(example.source, example.path, length=length)
    report = ifl.analyze(program)
    try:
        model = ifl.compile(program, eps=1e-2, dtype="float64", device="cpu", samples=0)
    except ifl.CompileError as error:
        assert report.verdict == "inefficient", f"analyze calls it efficient, compile refuses: {error}"
        assert "--allow-inefficient" in str(error)
        return
    reason = report.to_dict()["reason"]
    assert report.verdict == "efficient", f"analyze calls it inefficient ({reason}), compile builds it"
    config = model.config
    assert report.layers == len(config["layers"])
    assert report.heads == [len(layer["heads"]) for layer in config["layers"]]
    built = [(head["name"], index) for index, layer in enumerate(config["layers"], start=1) for head in layer["heads"]]
    planned = [(head.name, head.layer) for head in report.schedule.heads]
    assert [sorted(names) for names in _layout(planned, report.layers)] == [
        sorted(names) for names in _layout(built, report.layers)]
    assert config["schedule"]["layers"] == report.layers and config["schedule"]["heads"] == report.heads
    assert [row["head"] for row in config["schedule"]["table"]] == [head.name for head in report.schedule.heads]
