"""The model card (infoflow_dsl/transformer/card.py): the only reader of a config's keys, every
earlier version's file read and written back unchanged, every fault a ModelFileError naming
the field, and every shipped model's config given back exactly."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from hostile_files import JSON_VALUES, header_of, with_header
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import EXAMPLES_DIR

import infoflow_dsl as ifl
from infoflow_dsl.errors import ModelFileError
from infoflow_dsl.transformer.card import (
    CARD_FORMAT,
    FORMATS_READ,
    CardError,
    ModelCard,
    ProgramRecord,
    Trained,
)
from infoflow_dsl.transformer.io import model_from_bytes, model_to_bytes

PACKAGE = Path(__file__).resolve().parents[2] / "infoflow_dsl"
#: the modules that read a config's JSON: the card, and the shape it checks (ModelConfig)
CARD_MODULES = {"transformer/card.py", "transformer/card_fields.py", "transformer/card_parts.py",
                "transformer/config.py"}
#: what reading a config's key by hand looks like
BY_HAND = re.compile(r"""config\[["']|config\.get\(|\.config\[|in \w+\.config\b|\.config\.(items|keys|values)\(""")

VERSIONS = Path(__file__).resolve().parent / "card_versions"
#: each earlier version's file (tests/transformer/card_versions/README.md) and a key it first had
EARLIER = {
    "d_retrieval.7376019": ("error_budget",), "induction.6ca03ac": ("output", "causal"),
    "count_a.28573c1": ("input", "vocabulary", "token_output"), "reverse.28573c1": ("measured_error",),
    "count_a.22d2a62": ("layers",), "trained.87e360d": ("trained",), "deep.125267a": ("ffn",),
    "gather.3e8ffc0": ("route",), "disguised.af62ced": ("disguised",), "truth.8d7b9d5": ("circuit_truth",),
    "flip.1d642cd": ("output_vocabulary",), "superposed.4e5b027": ("superposition",),
    "kept.c3e6002": ("kept_circuit", "trained"),
}
SHIPPED = sorted(EXAMPLES_DIR.rglob("*.safetensors"))


def stored_config(data: bytes) -> dict[str, Any]:
    return json.loads(header_of(data)["__metadata__"]["infoflow"])


def with_config(data: bytes, config: Any) -> bytes:
    """The file ``data`` with its config replaced (the tensors kept)."""
    header = header_of(data)
    header["__metadata__"]["infoflow"] = json.dumps(config)
    return with_header(data, header)


# ---------------------------------------------------------------------------- one reader


def test_no_module_reads_a_config_key_but_the_card() -> None:
    """Every read of a config's key goes through the card's typed fields (issue 66, point 1)."""
    found = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if str(path.relative_to(PACKAGE)) not in CARD_MODULES
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if BY_HAND.search(line)]
    assert not found, "config keys read outside the card:\n" + "\n".join(found)


# ---------------------------------------------------------------------------- earlier versions


@pytest.mark.parametrize("name", sorted(EARLIER))
def test_a_file_of_every_earlier_version_loads_runs_and_keeps_its_bytes(name: str) -> None:
    data = (VERSIONS / f"{name}.safetensors").read_bytes()
    stored = stored_config(data)
    assert all(key in stored for key in EARLIER[name])  # the version it stands for
    model = model_from_bytes(data, name=name)
    assert model.card.to_json() == stored and model.config == stored
    # read, then written: the same metadata, byte for byte (the oldest files' tensors were written
    # before the sparse layout, so their tensor entries are laid out anew)
    assert header_of(model_to_bytes(model))["__metadata__"] == header_of(data)["__metadata__"]
    assert model.card.format in (None, *FORMATS_READ)
    x = (torch.randint(0, model.d, (2, model.T)) if model.token_input
         else torch.rand(2, model.T, model.d, dtype=model.dtype) * 2 - 1)
    with torch.no_grad():
        y = model(x)
    assert y.shape[0] == 2 and bool(torch.isfinite(y).all())


def test_the_earlier_files_hold_every_field_the_card_has() -> None:
    """Together the earlier versions' files exercise every field of the card but ``token_view``
    (a token model's vector view, made by ``export`` in memory and never written) and
    ``dtype_rule`` (a note beside ``dtype``, a string since it came)."""
    seen = set()
    for path in VERSIONS.glob("*.safetensors"):
        seen |= set(stored_config(path.read_bytes()))
    fields = {f.name for f in dataclasses.fields(ModelCard)} - {"nulls"}
    assert fields - seen == {"token_view", "dtype_rule"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(EXAMPLES_DIR)))
def test_every_shipped_config_round_trips_exactly(path: Path) -> None:
    stored = stored_config(path.read_bytes())
    assert ModelCard.from_json(stored).to_json() == stored


# ---------------------------------------------------------------------------- faults


def _good() -> bytes:
    return (EXAMPLES_DIR / "tracr" / "reverse.safetensors").read_bytes()


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c.update(format="infoflow/2"), r"config\['format'\] is 'infoflow/2': a card of a version this one "
                                              r"cannot read \(it reads infoflow/1\)"),
    (lambda c: c.update(colour="blue"), r"config has an unknown field 'colour' \(this version reads infoflow/1"),
    (lambda c: c["measured_error"].update(weather=1), r"config\['measured_error'\] has an unknown field 'weather'"),
    (lambda c: c["program"].pop("source"), r"config\['program'\] lacks 'source' \(a string\)"),
    (lambda c: c["schedule"]["table"][0].pop("compares"), r"config\['schedule'\]\['table'\]\[0\] lacks 'compares'"),
    (lambda c: c["layers"][0]["heads"][0].update(beta="hot"),
     r"config\['layers'\]\[0\]\['heads'\]\[0\]\['beta'\] must be a number, got 'hot'"),
    (lambda c: c["error_budget"].update(shares=[["head c1"]]),
     r"config\['error_budget'\]\['shares'\]\[0\] must be a pair \[name, share\]"),
    (lambda c: c["measured_error"].pop("accuracy"), r"config\['measured_error'\] lacks 'accuracy', which a token "
                                                    r"output's measurement always has with 'wrong'"),
    (lambda c: c.update(residual_labels="one"),
     r"config\['residual_labels'\] must be a list, each item a string, got 'one'"),
    (lambda c: c.update(superposition={"features_alive": 3}), r"config\['superposition'\] lacks 'd_model'"),
    (lambda c: c.update(eps=None), r"config\['eps'\] is null, which only a trained model's may be"),
    (lambda c: c.update(T=None), r"config\['T'\] must be a positive integer, got None"),
])
def test_a_missing_unknown_or_ill_typed_field_is_a_model_file_error_naming_it(change: Any, message: str) -> None:
    config = stored_config(_good())
    change(config)
    with pytest.raises(ModelFileError, match=rf"^bad\.safetensors: bad config: {message}"):
        model_from_bytes(with_config(_good(), config), name="bad.safetensors")


def test_a_file_of_another_format_is_refused_by_its_metadata_too() -> None:
    header = header_of(_good())
    header["__metadata__"]["format"] = "infoflow/2"
    with pytest.raises(ModelFileError, match=r"unsupported format 'infoflow/2' \(this version reads 'infoflow/1'\)"):
        model_from_bytes(with_header(_good(), header))


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indices), depth first."""
    found = [path] if path else []
    if isinstance(value, dict):
        found += [p for key, item in value.items() for p in _paths(item, (*path, key))]
    elif isinstance(value, list):
        found += [p for i, item in enumerate(value) for p in _paths(item, (*path, i))]
    return found


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


#: configs whose cards have most parts: a token output, a superposed, a disguised, a kept circuit
FUZZED = [stored_config(_good()), *(stored_config((VERSIONS / f"{name}.safetensors").read_bytes())
                                    for name in ("superposed.4e5b027", "disguised.af62ced", "kept.c3e6002"))]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.integers(0, len(FUZZED) - 1), delete=st.booleans())
def test_a_card_changed_anywhere_is_read_or_refused_with_a_card_error(data: Any, which: int, delete: bool) -> None:
    """A value at any depth removed or replaced by any JSON: the card reads it or raises
    CardError (a ValueError, which loading reports as ModelFileError), never KeyError or
    TypeError; a removed key the card needs is named."""
    config = json.loads(json.dumps(FUZZED[which]))
    paths = [p for p in _paths(config) if not delete or isinstance(p[-1], str)]
    path = data.draw(st.sampled_from(paths))
    parent = _at(config, path[:-1])
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(JSON_VALUES)
    try:
        card = ModelCard.from_json(config)
    except CardError as error:
        assert not delete or str(path[-1]) in str(error), (path, str(error))
        return
    except ValueError:  # the shape's own checks (masks, vocabulary: ModelConfig), naming the fault
        return
    assert card.to_json() == config  # what is read is given back


# ---------------------------------------------------------------------------- the card in memory


def test_a_card_is_frozen_and_a_change_is_a_new_card() -> None:
    model = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors")
    card = model.card
    with pytest.raises(dataclasses.FrozenInstanceError):
        card.eps = 1.0  # type: ignore[misc]
    renamed = dataclasses.replace(card, program=dataclasses.replace(card.program, name="other.iflow"))
    assert card.program.name == "min_pairwise.iflow" and renamed.to_json()["program"]["name"] == "other.iflow"
    model.card = renamed
    assert model.config["program"]["name"] == "other.iflow"
    with pytest.raises(ValueError, match="same shape"):  # the weights are the card's shape
        model.card = dataclasses.replace(card, T=card.T + 1)


def test_nullable_fields_keep_null_apart_from_absent() -> None:
    card = ifl.load(EXAMPLES_DIR / "min_pairwise.safetensors").card
    assert card.measured_error is not None
    unmeasured = card.with_fields(measured_error=None)
    assert unmeasured.to_json()["measured_error"] is None
    assert "measured_error" not in card.without("measured_error").to_json()
    trained = card.with_fields(trained=Trained(dist="uniform"), eps=None, a_priori_bound=None)
    assert (trained.to_json()["eps"], trained.to_json()["trained"]) == (None, {"dist": "uniform"})
    assert ModelCard.from_json(trained.to_json()) == trained
    margin = ProgramRecord(name="p.iflow", source="x", margin=None)
    assert margin.to_json() == {"name": "p.iflow", "source": "x", "margin": None}


def test_the_card_format_is_the_file_format() -> None:
    from infoflow_dsl.transformer.io import FORMAT

    assert FORMAT == CARD_FORMAT == "infoflow/1" and FORMATS_READ == (CARD_FORMAT,)
