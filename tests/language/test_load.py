"""``infoflow_dsl.language.load``: the Python API takes a program or a model, or the path of one, and
answers misuse with a TypeError/ValueError that says what to call; ``dir(ifl)`` lists the API.

Each case failed before the module existed (an AttributeError deep inside, a UnicodeDecodeError,
a torch RuntimeError, a temporary file's name, or values where the model refuses the input).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl

SOURCE = EXAMPLES_DIR / "min_pairwise.iflow"
MODEL = EXAMPLES_DIR / "min_pairwise.safetensors"


@pytest.fixture(scope="module")
def program() -> ifl.Program:
    return ifl.load_program(SOURCE)


@pytest.mark.parametrize("as_path", [str, Path])
def test_a_path_is_taken_where_a_program_is(as_path, program) -> None:
    assert ifl.analyze(as_path(SOURCE)).to_dict() == ifl.analyze(program).to_dict()
    x = ifl.sample_inputs(as_path(SOURCE), 3, seed=1)
    assert torch.equal(x, ifl.sample_inputs(program, 3, seed=1))
    assert torch.equal(ifl.evaluate(as_path(SOURCE), x), ifl.evaluate(program, x))
    compiled = ifl.compile(as_path(SOURCE), eps=1e-2, samples=0)
    assert compiled.config == ifl.compile(program, eps=1e-2, samples=0).config


@pytest.mark.parametrize("as_path", [str, Path])
def test_a_path_is_taken_where_a_model_is(as_path, tmp_path) -> None:
    assert ifl.circuit(as_path(MODEL)) == ifl.circuit(ifl.load(MODEL))
    ifl.report(as_path(MODEL), tmp_path / "page.html")
    assert (tmp_path / "page.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("function", ["circuit", "hooked", "export", "report"])
def test_a_program_where_a_model_is_expected_says_to_compile_it(function, program, tmp_path) -> None:
    arguments = (program, tmp_path / "out") if function in ("export", "report") else (program,)
    with pytest.raises(TypeError, match=rf"ifl\.{function} takes a compiled model, not a program: compile it first"):
        getattr(ifl, function)(*arguments)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("function", ["compile", "analyze", "evaluate", "sample_inputs"])
def test_a_model_or_a_number_where_a_program_is_expected_is_a_type_error_naming_what_to_call(function) -> None:
    extra = {"evaluate": (torch.zeros(1, 4, 4),), "sample_inputs": (2,)}.get(function, ())
    with pytest.raises(TypeError, match=rf"ifl\.{function} takes a program, not a compiled model"):
        getattr(ifl, function)(ifl.load(MODEL), *extra)
    with pytest.raises(TypeError, match=rf"ifl\.{function} takes a program \(ifl\.load_program\(path\)\).* not int"):
        getattr(ifl, function)(3, *extra)


def test_a_binary_program_file_is_a_program_error_at_its_first_bad_byte(tmp_path) -> None:
    path = tmp_path / "binary.iflow"
    path.write_bytes(b"input x : R^2 in [0, 1]\nlen\xffgth T = 4\n")
    with pytest.raises(ifl.ProgramError, match=r"binary\.iflow:2:4: error: not a UTF-8 text file: byte 0xff"):
        ifl.load_program(path)


def test_a_byte_order_mark_is_accepted(tmp_path, program) -> None:
    path = tmp_path / "bom.iflow"
    path.write_bytes(b"\xef\xbb\xbf" + SOURCE.read_bytes())
    assert ifl.load_program(path).target == program.target


def test_saving_into_a_missing_folder_names_the_file_asked_for(tmp_path) -> None:
    target = tmp_path / "missing" / "m.safetensors"
    with pytest.raises(FileNotFoundError) as caught:
        ifl.save(ifl.load(MODEL), target)
    assert caught.value.filename == str(target)


def test_evaluate_refuses_a_sequence_longer_than_t_as_the_model_does(program) -> None:
    x = ifl.sample_inputs(program, 2)
    longer = torch.cat([x, x[:, :1]], dim=1)
    with pytest.raises(ValueError, match="input length 33 exceeds"):
        ifl.load(MODEL)(longer.float())
    with pytest.raises(ValueError, match="input length 33 exceeds the program's T = 32"):
        ifl.evaluate(program, longer)


@pytest.mark.parametrize("count", [-1, 2.5, True])
def test_a_negative_or_fractional_sample_count_is_a_value_error(count, program) -> None:
    with pytest.raises(ValueError, match="whole number ≥ 0"):
        ifl.sample_inputs(program, count)


def test_dir_lists_the_public_api_and_nothing_else() -> None:
    listed = subprocess.run([sys.executable, "-c", "import infoflow_dsl as ifl; print(' '.join(dir(ifl)))"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert listed == sorted(ifl.__all__)
    assert "ExportError" in listed and not {"Any", "Path", "importlib", "annotations"} & set(listed)
