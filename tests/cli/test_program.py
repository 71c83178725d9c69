"""``infoflowc compile``'s summary (``cli/program.py``) says which input lengths the model takes.

Seen (issue 69): a gather-route model refused a shorter input (``input length 8 is below the
minimum length 16``) that nothing in compile's output had announced. The summary now prints
``inputs`` wherever the lengths are not all of 1..T, and the model takes exactly those.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli

import infoflow_dsl as ifl

PROGRAMS = {  # source, the line compile prints (None: every length 1..T, no line), the shortest length
    "gather": ("input x : R^2\nlength T = 6\ntarget max_<a, b, c> x(a)[1] * x(b)[2] * x(c)[1]\n",
               "  inputs           length 6 only", 6),
    "gather_prefixes": ("input x : R^2\nlength T = 6\n"
                        "target(t) = max_<s, r : s <= t and r <= t> x(s)[1] * x(r)[2] * x(t)[2]\n", None, 1),
    "reads_x4": ("input x : R^2\nlength T = 8\ntarget x(4)[2] + max_<s> x(s)[1]\n",
                 "  inputs           lengths 4..8", 4),
    "efficient": ("input x : R^2\nlength T = 8\ntarget max_<s> x(s)[1]\n", None, 1),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compile_prints_the_input_lengths_the_model_takes(tmp_path: Path, name: str) -> None:
    source, line, shortest = PROGRAMS[name]
    path, out = tmp_path / f"{name}.iflow", tmp_path / f"{name}.safetensors"
    path.write_text(source, encoding="utf-8")
    code, printed, _ = run_cli(["compile", str(path), "--eps", "1e-2", "--samples", "100", "--allow-inefficient",
                                "-o", str(out)])
    assert code == 0, printed
    lines = [text for text in printed.splitlines() if text.startswith("  inputs")]
    assert lines == ([] if line is None else [line])
    model = ifl.load(out)
    x = ifl.sample_inputs(ifl.parse_program(source, name), 2, seed=0)
    model(x[:, :shortest])  # the shortest length it names is taken
    if shortest > 1:
        with pytest.raises(ValueError, match=f"below the minimum length {shortest}"):
            model(x[:, :shortest - 1])
