"""``infoflowc discover``: its report, its JSON, its page; bad arguments exit 2."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli
from programs import EXAMPLES_DIR

from infoflow_dsl.circuits.picture import COLORS
from infoflow_dsl.discovery.picture import SHOWN, classified

torch.set_num_threads(1)
REVERSE = str(EXAMPLES_DIR / "tracr" / "reverse.safetensors")
FRAC = str(EXAMPLES_DIR / "tracr" / "frac_prevs.safetensors")


def test_discover_reports_its_scores_and_draws_them_against_the_truth(tmp_path: Path) -> None:
    page = tmp_path / "found.html"
    code, out, err = run_cli(["discover", REVERSE, "--method", "eap", "--ablation", "zero", "--samples", "40",
                              "--html", str(page)])
    assert code == 0, err
    assert "eap under zero ablation (logit-diff)" in out and "edge AUROC" in out and "faithfulness" in out
    code, text, _ = run_cli(["discover", REVERSE, "--method", "eap", "--ablation", "zero", "--samples", "40",
                             "--json"])
    data = json.loads(text)
    assert data["method"] == "eap" and set(data["necessary"]) <= set(data["scores"])
    ranked = sorted(data["scores"], key=lambda name: -data["scores"][name])
    assert f"edge AUROC {data['auroc']:.3f}" in out and ranked[0] in out
    html = page.read_text(encoding="utf-8")
    assert '<section id="edges">' in html  # the model's report page, with the found graph after it
    found = html.split('<section id="discovery"><h2>Circuit discovery</h2>')[1].split("</section>")[0]
    assert found.count("<line") == found.count("<title>")  # every drawn edge is labelled
    for kind, color in ((k, COLORS[k]) for k in SHOWN):
        count = sum(1 for name in data["scores"] if escape(f"{name}: {kind}") in found)
        assert found.count(f'stroke="{color}"') == count


def test_a_disguised_model_gets_a_page_of_the_found_graph_alone(tmp_path: Path) -> None:
    import infoflow_dsl as ifl

    disguised = tmp_path / "disguised.safetensors"
    ifl.save(ifl.disguise(FRAC, split_heads=2, rotate=True), disguised)
    code, _, err = run_cli(["discover", str(disguised), "--method", "eap", "--samples", "20",
                            "--html", str(tmp_path / "found.html")])
    assert code == 0, err
    html = (tmp_path / "found.html").read_text(encoding="utf-8")
    assert "<svg" in html and '<section id="edges">' not in html  # no report page: not its program's weights


def test_the_drawn_classes_are_the_top_n_against_the_truth() -> None:
    from infoflow_dsl.discovery.discover import discover

    result = discover(FRAC, "random", "resample", samples=20)
    kinds = classified(result)
    found = sorted(result.scores, key=lambda p: -result.scores[p])[:len(result.necessary)]
    assert {p for p, k in kinds.items() if k == "found"} == set(found) & result.necessary
    assert {p for p, k in kinds.items() if k == "missed"} == result.necessary - set(found)
    assert {p for p, k in kinds.items() if k == "spurious"} == set(found) - result.necessary


@pytest.mark.parametrize("argv, message", [
    (["discover", REVERSE, "--method", "nope"], "invalid choice"),
    (["discover", REVERSE, "--metric", "l2"], "has a token output"),
    (["discover", FRAC, "--length", "3"], "--length is for a model over vectors"),
    (["discover", "/nonexistent.safetensors"], "nonexistent"),
    (["discover", REVERSE, "--html", "/nonexistent/page.html"], "does not exist"),
    (["discover", str(EXAMPLES_DIR / "min_pairwise.safetensors"), "--samples", "0"], "--samples must be at least 1"),
    (["benchmark", "/nonexistent", "-o", "/tmp/x"], "not a ground-truth corpus"),
])
def test_bad_arguments_exit_2(argv: list[str], message: str) -> None:
    code, _, err = run_cli(argv)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("method", ["exact", "eap"])
def test_discover_on_the_device_scores_as_on_the_cpu(method: str, device: str) -> None:
    """``discover --device``: the patched forwards (and EAP's backward) on the device give the
    CPU's scores to float rounding, the same truth and the same AUROC."""
    import infoflow_dsl as ifl

    on_cpu = ifl.discover(REVERSE, method, "zero", samples=30, device="cpu")
    there = ifl.discover(REVERSE, method, "zero", samples=30, device=device)
    assert there.necessary == on_cpu.necessary and there.scores.keys() == on_cpu.scores.keys()
    for pair, score in on_cpu.scores.items():
        assert there.scores[pair] == pytest.approx(score, rel=1e-6, abs=1e-9)
    assert there.auroc == on_cpu.auroc and there.certified_k == on_cpu.certified_k
    code, out, err = run_cli(["discover", REVERSE, "--method", method, "--samples", "30", "--json", "--device", device])
    assert code == 0, err
    assert json.loads(out)["auroc"] == on_cpu.auroc
