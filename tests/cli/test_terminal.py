"""What the commands print of a hostile file: control characters as escapes, long messages cut,
and a report page whose JSON no name can break out of (issue 34, point 10)."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import safetensors.torch
from cli_runner import run_cli
from pages import page_block
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.cli.terminal import MAX_MESSAGE, shortened, visible

ESCAPE = "\x1b]0;pwned\x07\x1b[2J"  # retitle the window, clear the screen


def _renamed(tmp_path: Path, name: str) -> Path:
    model = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors")
    model.card = dataclasses.replace(model.card, program=dataclasses.replace(model.card.program, name=name))
    path = tmp_path / "renamed.safetensors"
    ifl.save(model, path)
    return path


def test_control_characters_from_a_file_are_printed_as_escapes(tmp_path: Path) -> None:
    path = _renamed(tmp_path, f"evil{ESCAPE}.iflow")
    for argv in (["check", str(path), "--samples", "20"], ["circuit", str(path)]):
        code, out, err = run_cli(argv)
        assert code == 0, err
        assert "\x1b" not in out + err and "\x07" not in out + err
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J.iflow" in run_cli(["check", str(path), "--samples", "20"])[1]


def test_visible_keeps_the_outputs_own_line_breaks() -> None:
    assert visible("a\tb\nc\rd\x00") == "a\tb\nc\\x0dd\\x00"
    assert visible("bar\r", keep_return=True) == "bar\r"  # the progress display's carriage return, on stderr
    assert visible("\x9b31m") == "\\x9b31m"  # a C1 control sequence introducer


def test_a_long_message_is_cut_with_the_count_left_out(tmp_path: Path) -> None:
    assert shortened("x" * 10) == "x" * 10
    cut = shortened("y" * (MAX_MESSAGE + 5_000))
    assert cut.startswith("y" * MAX_MESSAGE) and cut.endswith("… (5,000 more characters)")
    data = (EXAMPLES_DIR / "min_pairwise.safetensors").read_bytes()  # a config of 2,000 layers, no tensors for them
    size = struct.unpack("<Q", data[:8])[0]
    metadata = json.loads(data[8:8 + size])["__metadata__"]
    config = json.loads(metadata["infoflow"])
    config["layers"] = [config["layers"][0]] * 2_000
    path = tmp_path / "layers.safetensors"
    path.write_bytes(safetensors.torch.save(safetensors.torch.load(data),
                                            metadata={**metadata, "infoflow": json.dumps(config)}))
    code, _, err = run_cli(["check", str(path)])  # it names every missing tensor: 390,000 characters
    assert code == 2 and "missing tensor(s): blocks.2.attn.W_Q" in err and len(err) < MAX_MESSAGE + 100
    assert err.rstrip().endswith("more characters)")


def test_a_name_cannot_break_out_of_the_pages_json(tmp_path: Path) -> None:
    name = "a<!--<script>b.iflow"  # what used to leave the rest of the page as script data
    path = _renamed(tmp_path, name)
    code, _, err = run_cli(["report", str(path), "-o", str(tmp_path / "page.html")])
    assert code == 0, err
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert page_block(page, "ifl-data")["program"]["name"] == name
    script = page.split('<script type="application/json" id="ifl-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in script and json.loads(script)["program"]["name"] == name
