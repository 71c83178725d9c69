"""``infoflowc report MODEL -o OUT.html`` and ``infoflowc analyze FILE --html OUT.html``: the page
is written whole or not at all; a bad input (not a model, a trained model, an unwritable output)
exits 2 with one line and no traceback, and leaves nothing behind."""

from __future__ import annotations

import os
import shutil

import pytest
from cli_runner import run_cli
from pages import page_data, page_measured
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.transformer.card import Trained

MODEL = EXAMPLES_DIR / "kth_largest.safetensors"


def test_report_writes_the_shipped_page(tmp_path):
    out = tmp_path / "page.html"
    code, stdout, stderr = run_cli(["report", str(MODEL), "-o", str(out)])
    assert (code, stderr) == (0, "")
    assert f"wrote {out}" in stdout
    page = out.read_text(encoding="utf-8")
    shipped = (EXAMPLES_DIR / "kth_largest.html").read_text(encoding="utf-8")
    assert page_data(page) == page_data(shipped)
    assert page_measured(page)["errors"] and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_report_defaults_to_the_models_name_with_html(tmp_path):
    model = tmp_path / "m.safetensors"
    shutil.copy(MODEL, model)
    assert run_cli(["report", str(model)])[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.html", "m.safetensors"]


def test_python_report_writes_the_same_page(tmp_path):
    ifl.report(ifl.load(MODEL, device="cpu"), tmp_path / "p.html")
    code, _, _ = run_cli(["report", str(MODEL), "-o", str(tmp_path / "q.html")])
    assert code == 0
    assert (tmp_path / "p.html").read_bytes() == (tmp_path / "q.html").read_bytes()


def _refused(argv: list[str], tmp_path, message: str) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    code, stdout, stderr = run_cli(argv)
    assert code == 2 and stdout == ""
    assert message in stderr and "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, no temporary file left


def test_a_file_that_is_not_a_model_exits_2(tmp_path):
    bad = tmp_path / "notes.safetensors"
    bad.write_text("not a model", encoding="utf-8")
    _refused(["report", str(bad), "-o", str(tmp_path / "out.html")], tmp_path, "not a safetensors file")
    _refused(["report", str(EXAMPLES_DIR / "min_pairwise.iflow"), "-o", str(tmp_path / "out.html")], tmp_path,
             "min_pairwise.iflow")
    _refused(["report", str(tmp_path / "missing.safetensors"), "-o", str(tmp_path / "o.html")], tmp_path,
             "no such file")


def test_an_unwritable_output_exits_2_before_any_work(tmp_path):
    _refused(["report", str(MODEL), "-o", str(tmp_path / "no" / "such" / "folder.html")], tmp_path,
             "does not exist")
    _refused(["report", str(MODEL), "-o", str(tmp_path)], tmp_path, "is a folder")
    _refused(["analyze", str(EXAMPLES_DIR / "min_pairwise.iflow"), "--html", str(tmp_path / "no" / "x.html")],
             tmp_path, "does not exist")


def test_a_failed_write_leaves_the_old_page_and_no_temporary_file(tmp_path, monkeypatch):
    out = tmp_path / "page.html"
    out.write_text("the old page", encoding="utf-8")
    (tmp_path / "file").write_text("", encoding="utf-8")
    _refused(["report", str(MODEL), "-o", str(tmp_path / "file" / "out.html")], tmp_path, "does not exist")

    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    _refused(["report", str(MODEL), "-o", str(out)], tmp_path, "No space left on device")
    assert out.read_text(encoding="utf-8") == "the old page"


def test_a_trained_model_has_no_page(tmp_path):
    model = ifl.load(MODEL, device="cpu")
    model.card = model.card.with_fields(trained=Trained(final_nmse=0.1, dist="uniform"))
    path = tmp_path / "trained.safetensors"
    ifl.save(model, path)
    _refused(["report", str(path), "-o", str(tmp_path / "t.html")], tmp_path, "a trained model has no circuit")


def test_analyze_html_is_the_analysis_page(tmp_path):
    out = tmp_path / "a.html"
    code, stdout, stderr = run_cli(["analyze", str(EXAMPLES_DIR / "triangle_center.iflow"), "--html", str(out)])
    assert (code, stderr) == (0, "") and "verdict" in stdout  # the text report is printed as before
    page = out.read_text(encoding="utf-8")
    data = page_data(page)
    assert data["kind"] == "analysis" and page_measured(page) is None
    assert data["analysis"]["verdict"] == "inefficient" and data["analysis"]["reason"]
    assert 'id="attention"' not in page and 'id="schedule"' in page


@pytest.mark.parametrize("name", ["reverse", "sort", "frac_prevs"])
def test_a_token_model_gets_its_page(tmp_path, name):
    """Tracr's programs: the page draws the model's layers and heads, shows the example ids by
    name with their patterns, and measures the model exact on the inputs its compile measured."""
    source = EXAMPLES_DIR / "tracr" / f"{name}.safetensors"
    code, _out, err = run_cli(["report", str(source), "-o", str(tmp_path / "page.html")])
    assert (code, err) == (0, "")
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    data, measured = page_data(page), page_measured(page)
    model = ifl.load(source)
    built = sorted((h["name"], i) for i, layer in enumerate(model.config["layers"], start=1) for h in layer["heads"])
    assert sorted((h["name"], h["layer"]) for h in data["schedule"]["flow"]["heads"]) == built
    assert data["schedule"]["flow"]["layers"] == len(model.config["layers"])
    attention = data["attention"]
    names = set(model.vocabulary.names)
    assert attention["rows"] == model.T + 1 and all(token[0] in names for example in attention["examples"]
                                                    for token in example)
    assert measured["errors"] and max(measured["errors"]) <= model.config["eps"]
    assert measured["examples"]["model"] == measured["examples"]["reference"]
