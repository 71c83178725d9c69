"""``ifl.from_rasp`` and ``infoflowc from-rasp``: a RASP program -> its ``.iflow`` text -> the
checked program. The writer is :class:`~.translator.Translator`; the rule of each RASP class
(:mod:`.rules`, :mod:`.selectors`) is handed to it here (:data:`RULES`), since the rules build on
the translator's classes."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable

from ..analysis.causality import is_causal
from ..errors import ProgramError
from ..language.load import parse_program
from ..language.program import Program
from .evaluation import kind
from .expressions import RASPExpr
from .literals import TranslationError
from .rules import SOP_RULES, target_text
from .selectors import SELECTOR_RULES
from .translator import Translation, TranslationRules, Translator, describe

#: how each RASP class is written
RULES = TranslationRules(sop=SOP_RULES, selector=SELECTOR_RULES, target_text=target_text)


def rasp_source(program: RASPExpr, vocab: Iterable[Hashable], max_seq_len: int) -> str:
    """The ``.iflow`` text of a RASP program over ``vocab`` and lengths 1..``max_seq_len``
    (what ``infoflowc from-rasp`` writes)."""
    return translate(program, vocab, max_seq_len).text


def translate(program: RASPExpr, vocab: Iterable[Hashable], max_seq_len: int) -> Translation:
    """:func:`rasp_source`'s text, and the RASP node each of its declaration lines was written for."""
    if kind(program) is None or kind(program) in ("Select", "ConstantSelector", "SelectorAnd", "SelectorOr",
                                                  "SelectorNot"):
        raise TranslationError(f"from_rasp compiles an SOp (a value per position), got {type(program).__name__}")
    if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int) or max_seq_len < 1:
        raise TranslationError(f"max_seq_len must be a whole number ≥ 1, got {max_seq_len!r}")
    return Translator(vocab, max_seq_len, program, RULES).translation(program)


def from_rasp(program: RASPExpr, vocab: Iterable[Hashable], max_seq_len: int, causal: bool = False,
              name: str | None = None) -> Program:
    """``ifl.from_rasp``: a RASP program (of :mod:`infoflow_dsl.rasp`, or duck-typed, of Tracr's
    ``tracr.rasp.rasp``) as a checked :class:`Program`, the one ``load_program`` gives for the
    text :func:`rasp_source` writes (its name ``NAME.iflow``, ``name`` or the program's label).
    ``causal``: require that every output depend on the tokens up to its position only (Tracr's
    causal flag); a program that reads later tokens is refused, naming why.

    Args:
        program: the RASP SOp to compile.
        vocab: the input's tokens.
        max_seq_len: the longest input length (T).
        causal: require that every output read the tokens up to its position only.
        name: the program's name (default the SOp's label).

    Returns:
        The checked :class:`Program` (compile it with ``ifl.compile``).

    Each refusal, here or by ``ifl.compile`` of the program, names the RASP node it is about
    and where its author built it (``prog.py:12:5: Aggregate 'frac': ...``).

    Raises:
        TranslationError: a construct that cannot be written, a non-causal program with
            ``causal``, or a written program that does not check (a bug: please report it).
    """
    translation = translate(program, vocab, max_seq_len)
    try:
        checked = parse_program(translation.text, f"{name or program.label}.iflow")
    except ProgramError as error:
        raise unchecked(error, translation, program) from None
    if causal and not is_causal(checked):
        raise TranslationError(f"{describe(program)} is not causal: its output at a position reads later tokens "
                               f"(a selector that is not bounded by the query's position, or length)", program)
    return dataclasses.replace(checked, origins=translation.origins())


def unchecked(error: ProgramError, translation: Translation, program: RASPExpr) -> TranslationError:
    """The refusal of a translation that does not check, located at the node its first fault's
    line was written for (the text's own place after it)."""
    fault = error.diagnostics[0]
    node = translation.node_at(fault.line) or program
    return TranslationError(f"{describe(node)}: its .iflow translation does not check (line {fault.line}, column "
                            f"{fault.column}: {fault.message}); please report it", node)
