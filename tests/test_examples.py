"""compiled_examples/: the shipped models and reports are exactly what the compiler builds today."""

from __future__ import annotations

import importlib.util
import json
import math
import struct
from pathlib import Path

import pytest
from compiled import CANONICAL_EFFICIENT
from pages import page_data, page_measured
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.page import model_data
from infoflow_dsl.page.html import render_page
from infoflow_dsl.transformer.io import model_to_bytes

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "regenerate_examples.py"


def _regenerate_module():
    spec = importlib.util.spec_from_file_location("regenerate_examples", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _split_measured_error(data: bytes) -> tuple[dict, bytes, float]:
    """(the header with the measured max error taken out of the config, the data section, that error)."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    config = json.loads(header["__metadata__"]["infoflow"])
    measured = config["measured_error"].pop("max_error")
    header["__metadata__"]["infoflow"] = config
    return header, data[8 + n:], measured


def _measurement_slack(config: dict, *values: float) -> float:
    """How far two machines' measured max errors may lie apart: each measurement is the float32
    model's error, and the model's own rounding (the budget's ``rounding`` share, a bound for any
    order of summation a CPU's kernels choose) moves each by at most that much; each is stored
    to 3 significant digits (half a unit of the third digit)."""
    digits = sum(0.5 * 10 ** (math.floor(math.log10(v)) - 2) for v in values if v > 0)
    return 2 * config["error_budget"]["rounding"] + digits


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_model_and_report_are_rebuilt_byte_for_byte(name):
    """Weights, config and report byte for byte, except the measured max error: the same inputs
    through another CPU's float32 kernels (AVX2 against AVX-512: intrinsic_6 measured 0.00377 on
    one and 0.00378 on the other) round differently, within the model's rounding bound."""
    regenerate = _regenerate_module()
    program = ifl.load_program(EXAMPLES_DIR / f"{name}.iflow")
    model = ifl.compile(program, eps=regenerate.EPS, dtype="float32", device="cpu", samples=regenerate.SAMPLES)
    header, tensors, measured = _split_measured_error(model_to_bytes(model))
    shipped_file = (EXAMPLES_DIR / f"{name}.safetensors").read_bytes()
    shipped_header, shipped_tensors, shipped = _split_measured_error(shipped_file)
    assert tensors == shipped_tensors and header == shipped_header
    assert abs(measured - shipped) <= _measurement_slack(model.config, measured, shipped), (measured, shipped)
    report = regenerate.report(name, ifl.analyze(program), model)
    shown = f"| measured max error | {shipped:.3g} ("
    assert report.replace(f"| measured max error | {measured:.3g} (", shown) == \
        (EXAMPLES_DIR / f"{name}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_model_loads_and_meets_its_bound(name):
    model = ifl.load(EXAMPLES_DIR / f"{name}.safetensors")
    assert model.config["measured_error"]["max_error"] <= model.config["a_priori_bound"] <= model.config["eps"]


def test_every_efficient_canonical_example_is_shipped():
    shipped = sorted(p.stem for p in EXAMPLES_DIR.glob("*.safetensors"))
    assert shipped == sorted(CANONICAL_EFFICIENT)


#: The page sizes the README promises (issue 23): bytes.
PAGE_LIMITS = {"min_pairwise": 1_000_000, "intrinsic_6": 5_000_000}


@pytest.mark.parametrize("name", CANONICAL_EFFICIENT)
def test_shipped_page_is_rebuilt_byte_for_byte_from_the_shipped_model(name):
    """NAME.html is ``infoflowc report NAME.safetensors``: every byte but the measured block (the
    float32 forward's errors, which another CPU rounds differently: ``test_measured`` checks them
    against a recomputation within the model's rounding) is rebuilt from the file alone."""
    shipped = (EXAMPLES_DIR / f"{name}.html").read_text(encoding="utf-8")
    model = ifl.load(EXAMPLES_DIR / f"{name}.safetensors", device="cpu")
    measured = page_measured(shipped)
    assert measured is not None and page_data(shipped)["kind"] == "model"
    assert render_page(model_data(model), measured) == shipped


def test_every_shipped_model_has_a_page_within_its_size():
    pages = sorted(p.stem for p in EXAMPLES_DIR.glob("*.html"))
    assert pages == sorted(CANONICAL_EFFICIENT)
    for name, limit in PAGE_LIMITS.items():
        assert (EXAMPLES_DIR / f"{name}.html").stat().st_size < limit, name


TRACR_NAMES = sorted(p.stem for p in (EXAMPLES_DIR / "tracr").glob("*.iflow"))


def _token_measurement_free(data: bytes) -> tuple[dict, bytes, dict]:
    """(header without the float32-measured figures, data section, those figures): a token
    model's max error and smallest score margin come from another CPU's kernels."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    config = json.loads(header["__metadata__"]["infoflow"])
    measured = {key: config["measured_error"].pop(key) for key in ("max_error", "min_margin")
                if key in config["measured_error"]}
    header["__metadata__"]["infoflow"] = config
    return header, data[8 + n:], measured


@pytest.mark.parametrize("name", TRACR_NAMES)
def test_shipped_tracr_model_analysis_and_report_are_rebuilt(name):
    """compiled_examples/tracr/NAME.{safetensors,analysis.json,md} are what the compiler builds
    today (T = 10, ε = 1e-3, float32); the measured figures within the model's rounding."""
    regenerate = _regenerate_module()
    directory = EXAMPLES_DIR / "tracr"
    program = ifl.load_program(directory / f"{name}.iflow")
    analysis = ifl.analyze(program)
    assert analysis.to_json() == (directory / f"{name}.analysis.json").read_text(encoding="utf-8")
    model = ifl.compile(program, eps=regenerate.TRACR_EPS, dtype="float32", device="cpu", samples=regenerate.SAMPLES)
    header, tensors, measured = _token_measurement_free(model_to_bytes(model))
    shipped_header, shipped_tensors, shipped = _token_measurement_free((directory / f"{name}.safetensors").read_bytes())
    assert tensors == shipped_tensors and header == shipped_header
    slack = 2 * model.config["a_priori_bound"]
    assert all(abs(measured[key] - shipped[key]) <= slack for key in shipped), (measured, shipped)
    assert measured.get("min_margin", 1.0) > 0.5 and model.config["measured_error"].get("wrong", 0) == 0
    if measured == shipped:
        assert regenerate.report(name, analysis, model, regenerate.TRACR_EPS) == \
            (directory / f"{name}.md").read_text(encoding="utf-8")
