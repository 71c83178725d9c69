"""Token models exported (transformer/export/directory.vector_view): the one-hot view computes
what the table does, and every target reads ids."""

from __future__ import annotations

from functools import cache

import pytest
import torch
from programs import TRACR_DIR

import infoflow_dsl as ifl
from infoflow_dsl.exporters.directory import vector_view
from infoflow_dsl.measure.tokens import constant_sequences
from infoflow_dsl.oracle.tokens import random_ids

NAMES = sorted(p.stem for p in TRACR_DIR.glob("*.iflow"))


@cache
def compiled(name: str) -> tuple[ifl.Program, ifl.CompiledTransformer]:
    program = ifl.load_program(TRACR_DIR / f"{name}.iflow")
    return program, ifl.compile(program, eps=1e-3, dtype="float64", samples=0)


def _ids(program: ifl.Program, per_length: int) -> list[torch.Tensor]:
    """Random ids of every length 1..T, each batch with the V constant sequences (the corners' analogue)."""
    size = program.vocabulary.size
    return [torch.cat([random_ids(program, per_length, seed=length, length=length), constant_sequences(size, length)])
            for length in range(1, program.length + 1)]


def test_the_vector_view_is_the_table_on_one_hot_rows() -> None:
    program, model = compiled("hist")
    view = vector_view(model)
    assert not view.token_input and view.embed.W_E.shape == (program.vocabulary.size + 1, model.d_model)
    for ids in _ids(program, 20):
        one_hot = torch.nn.functional.one_hot(ids, program.vocabulary.size).double()
        assert torch.equal(view(one_hot), model(ids))


@pytest.mark.parametrize("name", NAMES)
def test_every_tracr_program_exported_to_gpt2_matches_the_model_and_the_reference(name: str, tmp_path) -> None:
    """AutoModelForCausalLM on export_inputs(DIR, ids): within 1e-12 of model(ids) (float64),
    the reference's token (or within ε) on 2,000 random ids of every length and the constant
    sequences, after a save_pretrained round trip too."""
    import transformers

    program, model = compiled(name)
    ifl.export(model, tmp_path / "gpt2")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "gpt2"), dtype=torch.float64,
                                                           attn_implementation="eager").eval()
    hf.save_pretrained(tmp_path / "again")
    again = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "again"), dtype=torch.float64,
                                                              attn_implementation="eager").eval()
    for ids in _ids(program, 2000 // program.length):
        with torch.no_grad():
            outputs = [ifl.export_outputs(tmp_path / "gpt2", m(**ifl.export_inputs(tmp_path / "gpt2", ids)))
                       for m in (hf, again)]
        expected, reference = model(ids), ifl.evaluate(program, ids)
        for y in outputs:
            assert float((y - expected).abs().max()) <= 1e-12
            if program.token_output:
                defined = reference >= 0
                assert torch.equal(y.argmax(-1)[defined], reference[defined])
            else:
                assert float(torch.where(reference.isnan(), 0.0, (y - reference).abs()).max()) <= 1e-3


@pytest.mark.parametrize("to", ["tl-native", "hf-llama"])
def test_the_other_targets_read_ids_too(to: str, tmp_path) -> None:
    program, model = compiled("sort")
    ifl.export(model, tmp_path / to, to=to)
    exported = ifl.load_exported(tmp_path / to)
    assert exported.token_input
    for ids in _ids(program, 20):
        assert torch.equal(exported(ids).argmax(-1), ifl.evaluate(program, ids))
