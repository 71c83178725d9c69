"""``infoflowc train --keep-circuit``'s admission: the settings tried in turn
(``circuit_keeping.train_until_certified``), the first model the certification admits written,
none when every try is refused. The training and the certification are stood in for (both have
their own tests: tests/training/test_circuit_keeping.py, tests/circuits/test_certify.py); what is
tested here is the loop that connects them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import run_cli

import infoflow_dsl as ifl
from infoflow_dsl.cli.train import admission_schedule
from infoflow_dsl.training import circuit_keeping
from infoflow_dsl.transformer.card import KeptCircuit

torch.set_num_threads(1)
SHIFT = Path(__file__).resolve().parents[2] / "compiled_examples" / "tracr" / "shift_by_2"


def test_the_default_schedule_tries_a_tenth_of_both_after_a_refusal() -> None:
    assert admission_schedule(None, None, rebalance=True) == [(1e-3, 1e-5), (1e-4, 1e-6)]
    assert admission_schedule(None, None, rebalance=False) == [(1e-4, 1e-5), (1e-5, 1e-6)]


@pytest.mark.parametrize(("noise", "lr", "expected"), [(1e-2, None, [(1e-2, 1e-5)]), (None, 1e-4, [(1e-3, 1e-4)]),
                                                        (0.0, 1e-6, [(0.0, 1e-6)])])
def test_settings_the_user_gives_are_tried_alone(noise: float | None, lr: float | None,
                                                 expected: list[tuple[float, float]]) -> None:
    assert admission_schedule(noise, lr, rebalance=True) == expected


@dataclass
class Verdicts:
    """A stand-in certification: refuses the first ``refusals`` models it sees."""

    refusals: int
    seen: list[Any] = field(default_factory=list)

    def __call__(self, model: Any, samples: int, seed: int) -> Any:
        self.seen.append(model)
        holds = len(self.seen) > self.refusals
        return _Certification(holds)


@dataclass
class _Certification:
    holds: bool
    function: str = "stand-in"
    truths: dict[str, Any] = field(default_factory=dict)

    def failures(self) -> list[str]:
        return [] if self.holds else ["stand-in refusal"]

    def to_json(self) -> dict[str, Any]:
        return {"holds": self.holds}


@dataclass
class _Result:
    model: Any
    graph: Any = None
    losses: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class _Graph:
    edges: tuple[Any, ...] = ()


def _fake_training(tries: list[tuple[float, float]]) -> Any:
    def trained(program: Any, settings: Any, init: Any, keep: Any) -> _Result:
        tries.append((keep.noise, settings.lr))
        model = ifl.load(SHIFT.with_suffix(".safetensors"), device="cpu")
        model.card = dataclasses.replace(model.card, kept_circuit=KeptCircuit(graph={"try": len(tries)}, eps=0.1,
                                                                             init=None))
        return _Result(model, _Graph())
    return trained


@pytest.mark.parametrize(("refusals", "code", "tries"), [(0, 0, 1), (1, 0, 2), (2, 3, 2)])
def test_a_refused_model_is_trained_again_at_a_tenth_and_the_first_admitted_is_written(
        refusals: int, code: int, tries: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    verdicts, made = Verdicts(refusals), []
    monkeypatch.setattr(circuit_keeping, "certify", verdicts)
    monkeypatch.setattr(circuit_keeping, "train_keeping_circuit", _fake_training(made))
    out = tmp_path / "kept.safetensors"
    got, stdout, err = run_cli(["train", str(SHIFT.with_suffix(".iflow")), "--heads", "2", "--init",
                                str(SHIFT.with_suffix(".safetensors")), "--keep-circuit", "-o", str(out)])
    assert (got, len(made)) == (code, tries), err
    assert made == [(1e-3, 1e-5), (1e-4, 1e-6)][:tries]
    assert ("training again at 0.0001, 1e-06" in stdout) == (refusals > 0)
    assert out.exists() == (code == 0)
    if code == 0:
        assert ifl.load(out, device="cpu").card.kept_circuit.graph["try"] == tries  # the admitted one
    else:
        assert err.count("refused: stand-in refusal") == 2
