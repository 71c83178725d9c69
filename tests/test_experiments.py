"""scripts/experiments.py: EXPERIMENTS.md is rendered from the committed files in experiments/
alone, byte for byte; the paper-scale sweep refuses to start on the CPU without --force."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("experiments_script", ROOT / "scripts" / "experiments.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_render_only_gives_the_committed_experiments_md_byte_for_byte(tmp_path, monkeypatch) -> None:
    script = load_script()
    data = tmp_path / "experiments"  # experiments/ without any model file: what is committed
    shutil.copytree(ROOT / "experiments", data, ignore=shutil.ignore_patterns("models", "*.safetensors"))
    monkeypatch.setattr(script, "OUT", data)
    monkeypatch.setattr(script, "COMPILED", data / "compiled")
    monkeypatch.setattr(script, "THROUGHPUT", data / "throughput.json")
    monkeypatch.setattr(script, "PILOT", data / "paper_pilot.json")
    assert script.render() == (ROOT / "EXPERIMENTS.md").read_text(encoding="utf-8")


def test_the_paper_scale_sweep_refuses_the_cpu_without_force_and_says_how_long(capsys) -> None:
    script = load_script()
    code = script.main(["--paper-scale", "--device", "cpu", "--measure-steps", "2"])
    captured = capsys.readouterr()
    assert code == 2
    assert "refused" in captured.err and "hours" in captured.err and "--force" in captured.err
    assert "steps/s" in captured.out
    assert not (ROOT / "experiments" / "paper_pilot_intrinsic_2").exists()


@pytest.mark.parametrize("rate, steps", [(1.0, 1000), (100.0, 15000), (1000.0, 150000)])
def test_the_pilot_fits_its_ten_minutes(rate, steps) -> None:
    script = load_script()
    assert script.pilot_steps(rate) == steps
    if steps > 1000:
        assert 3 * steps / rate <= 0.75 * script.PILOT_BUDGET
