"""``infoflowc from-rasp FILE.py:NAME``: a RASP program, as its author wrote it, written out as
the equivalent ``.iflow`` program (:mod:`infoflow_dsl.rasp.translate`).

NAME is a module-level SOp of FILE.py or a function of no arguments that returns one. The
vocabulary and the longest length come from ``--vocab``/``--max-seq-len`` or, when a flag is
left out, from the file's module-level ``vocab`` and ``max_seq_len`` (as Tracr's
``compile_rasp_to_model`` takes them). ``--vocab`` tokens are numbers when every one of them
reads as a number, else names. The file is run as Python (as ``python FILE.py`` would: its
folder first on the import path, so it imports the modules beside it): it is the user's own program.
The output (default ``NAME.iflow``) is written atomically; compiling it gives the model
``ifl.compile(ifl.from_rasp(program, vocab, max_seq_len, name=OUTPUT's stem))`` gives, byte for
byte (a model records its program's file name).
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .common import EXIT_OK, Command, add_output_flag, positive_int


def command_from_rasp(arguments: argparse.Namespace) -> int:
    from ..files import check_writable, write_atomically
    from ..rasp.literals import TranslationError
    from ..rasp.translate import from_rasp

    file, name = _source(arguments.source)
    namespace = _run(file)
    program = _program(namespace, file, name)
    vocab = _tokens(arguments.vocab) if arguments.vocab else namespace.get("vocab")
    max_seq_len = arguments.max_seq_len or namespace.get("max_seq_len")
    if vocab is None or max_seq_len is None:
        missing = "--vocab" if vocab is None else "--max-seq-len"
        raise UsageError(f"{file}: give {missing} (or define vocab and max_seq_len in the file)")
    output = arguments.output or Path(f"{name}.iflow")
    check_writable(output, file)
    try:
        source = from_rasp(program, vocab, max_seq_len, causal=arguments.causal, name=output.stem).source
    except TranslationError as error:  # located at the node's line of FILE (or of a module it imports) first
        raise UsageError(f"{error} ({file}:{name} cannot be compiled)" if error.origin is not None
                         else f"{file}:{name}: cannot compile: {error}") from None
    write_atomically(output, source.encode("utf-8"))
    print(f"wrote {output} ({source.count(chr(10))} lines): infoflowc compile {output}")
    return EXIT_OK


def _source(text: str) -> tuple[Path, str]:
    file, colon, name = text.rpartition(":")
    if not colon or not file or not name.isidentifier():
        raise UsageError(f"{text}: write FILE.py:NAME, NAME a module-level SOp or a function returning one")
    return Path(file), name


def _run(file: Path) -> dict[str, Any]:
    """FILE's module namespace, run as ``python FILE.py`` runs it: FILE's folder (symbolic links
    resolved) first on ``sys.path`` while it runs, so it imports the modules beside it."""
    if not file.is_file():
        raise UsageError(f"{file}: no such file")
    folder = str(file.resolve().parent)
    sys.path.insert(0, folder)
    try:
        return runpy.run_path(str(file), run_name="__rasp__")
    except SystemExit as stop:
        raise UsageError(f"{file}: the file exits when run (SystemExit {stop.code})") from None
    except Exception as error:  # the user's program: what it raises is reported, never a traceback
        raise UsageError(f"{file}: running it raised {type(error).__name__}: {error}") from None
    finally:
        if folder in sys.path:  # the first copy: the one inserted above (unless the file took it out)
            sys.path.remove(folder)


def _program(namespace: dict[str, Any], file: Path, name: str) -> Any:
    from ..rasp.evaluation import kind

    if name not in namespace:
        raise UsageError(f"{file}: defines no '{name}'")
    program = namespace[name]
    if kind(program) is None and callable(program):
        try:
            program = program()
        except Exception as error:
            raise UsageError(f"{file}:{name}(): raised {type(error).__name__}: {error}") from None
    if kind(program) is None:
        raise UsageError(f"{file}:{name} is a {type(program).__name__}, not a RASP SOp (or a function returning one)")
    return program


def _tokens(texts: list[str]) -> list[Hashable]:
    """Numbers when every token reads as one (whole numbers as int), else the names as written."""
    try:
        numbers = [float(t) for t in texts]
    except ValueError:
        return list(texts)
    return [int(n) if n.is_integer() else n for n in numbers]



def _from_rasp_arguments(parser: argparse.ArgumentParser) -> None:
    """``from-rasp FILE.py:NAME [--vocab TOKEN ...] [--max-seq-len N] [--causal] [-o OUT.iflow]``."""
    parser.add_argument("source", metavar="FILE.py:NAME", help="a module-level SOp, or a function returning one")
    parser.add_argument("--vocab", nargs="+", metavar="TOKEN", help="the input's tokens (default: the file's vocab)")
    parser.add_argument("--max-seq-len", type=positive_int, help="the longest input (default: the file's max_seq_len)")
    parser.add_argument("--causal", action="store_true", help="refuse a program whose output reads later tokens")
    add_output_flag(parser, "the .iflow file (default: NAME.iflow)")


FROM_RASP = Command("from-rasp", "write a RASP program (Tracr's API) as an .iflow program", _from_rasp_arguments,
                    command_from_rasp)
