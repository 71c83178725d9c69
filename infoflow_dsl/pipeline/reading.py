"""A compiled model read back: the program its file stores (:func:`program_of`) and its circuit
rebuilt as compile built it (:func:`relower`: the same ε, dtype, square route and route give the
same circuit, lowering being deterministic), for ``check --trace``, ``circuit``, ``export`` and
the page. Nothing here writes a model."""

from __future__ import annotations

from functools import lru_cache

from ..collector import fewer_collections
from ..errors import ProgramError, StoredProgramError
from ..language import typed as ir
from ..language.check import check
from ..language.parse import parse
from ..transformer.model import CompiledTransformer
from .devices import resolve_dtype
from .lowering import Lowering, build_circuit

#: what compile writes in every model's config besides its circuit, and relowering reads
#: (their values' kinds are checked when the file is read: transformer/config.py)
COMPILED_FIELDS = ("eps", "a_priori_bound", "dtype")


def program_of(model: CompiledTransformer) -> ir.Program:
    """The checked program stored in the model's config (its T and margin as compiled)."""
    stored = model.card.program
    if stored is None:
        raise StoredProgramError("the file holds no program source")
    return _stored_program(stored.source, stored.name, stored.margin, model.T)


def _stored_program(source: object, name: str, margin: float | None, length: int) -> ir.Program:
    if not isinstance(source, str):
        raise StoredProgramError("the file holds no program source")
    try:
        return check(parse(source, name), name, source, length=length, margin=margin)
    except ProgramError as error:
        first = error.diagnostics[0].headline() if error.diagnostics else str(error)
        raise StoredProgramError(f"the program stored in the file no longer checks: {first}") from None
    except ValueError as error:  # a stored T or margin that is no declaration's value
        raise StoredProgramError(f"the program stored in the file cannot be checked: {error}") from None


@fewer_collections()
def relower(model: CompiledTransformer, program: ir.Program | None = None) -> Lowering:
    """The lowering of a compiled model, again as ``compile`` did it: its program (``program``,
    else the one its file stores: :func:`program_of`) at the ε, dtype, square route (``ffn``)
    and route (``"route": "gather"``) its config stores. Lowering is deterministic, so this is
    the model's own circuit unless the file was compiled by another version (its
    ``residual_labels`` then differ from the circuit's directions)."""
    card = model.card
    if program is None and card.program is None:
        raise StoredProgramError("the file holds no program source")
    missing = [key for key in COMPILED_FIELDS if getattr(card, key) is None]
    if missing:
        raise StoredProgramError(f"the config lacks {' and '.join(repr(key) for key in missing)}, which every "
                                 f"compiled model holds: the file was changed after compiling")
    assert card.eps is not None and card.dtype is not None
    route = (float(card.eps), card.dtype, card.route == "gather", card.ffn or "wide")
    if program is not None:
        return build_circuit(program, route[0], resolve_dtype(route[1]), allow_inefficient=route[2], ffn=route[3])
    assert card.program is not None
    return _stored_lowering(card.program.source, card.program.name, card.program.margin, model.T, *route)


@lru_cache(maxsize=16)
def _stored_lowering(source: object, name: str, margin: float | None, length: int, eps: float, dtype: str,
                     gather: bool, ffn: str) -> Lowering:
    """The lowering of a stored program, kept for the next call with the same file's settings
    (export checks a model's weights against it, then reads its circuit map off it; check
    --trace and circuit relower too). Lowering is deterministic and its result immutable."""
    program = _stored_program(source, name, margin, length)
    return build_circuit(program, eps, resolve_dtype(dtype), allow_inefficient=gather, ffn=ffn)
