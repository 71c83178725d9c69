"""compiled_examples/: the shipped models and reports are exactly what the compiler builds today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from compiled import CANONICAL_EFFICIENT
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.io import model_to_bytes

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "regenerate_examples.py"


def _regenerate_module():
    spec = importlib.util.spec_from_file_location("regenerate_examples", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_model_and_report_are_rebuilt_byte_for_byte(name):
    regenerate = _regenerate_module()
    program = ifl.load_program(EXAMPLES_DIR / f"{name}.iflow")
    model = ifl.compile(program, eps=regenerate.EPS, dtype="float32", device="cpu", samples=regenerate.SAMPLES)
    assert model_to_bytes(model) == (EXAMPLES_DIR / f"{name}.safetensors").read_bytes()
    report = regenerate.report(name, ifl.analyze(program), model)
    assert report == (EXAMPLES_DIR / f"{name}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_model_loads_and_meets_its_bound(name):
    model = ifl.load(EXAMPLES_DIR / f"{name}.safetensors")
    assert model.config["measured_error"]["max_error"] <= model.config["a_priori_bound"] <= model.config["eps"]


def test_every_efficient_canonical_example_is_shipped():
    shipped = sorted(p.stem for p in EXAMPLES_DIR.glob("*.safetensors"))
    assert shipped == sorted(CANONICAL_EFFICIENT)
