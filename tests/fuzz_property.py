"""The property every generated program must satisfy (the differential fuzz campaign's oracle).

A program is either **refused with a located message** or **compiled honestly**:

- *Located* refusal: a :class:`~infoflow_dsl.errors.ProgramError` whose every diagnostic has a
  line and column ≥ 1; a :class:`~infoflow_dsl.errors.CompileError` whose ``span`` has a line
  ≥ 1, or whose message says "line L, column C", or quotes the construct (eight or more
  characters of the program's text, spaces ignored) or names the whole target or its bound
  ("the target", "the a-priori bound");
  a RASP :class:`~infoflow_dsl.rasp.literals.TranslationError` that names the node (its label
  in quotes). Any other refusal is the failure ``unlocated``.
- *Honest* compile (``ifl.compile(prog, eps=...)``): the a-priori bound is at most ε
  (``bound-above-eps``); the error measured here, independently of compile's own measurement,
  against ``ifl.evaluate`` (float64) is at most the bound (``wrong``: every sequence of lengths
  1..min(T, 4) of a token program, at most :data:`EXHAUSTIVE` of them, and random inputs at T);
  compiling twice gives the same bytes (``nondeterministic``); ``ifl.analyze``'s schedule
  (layers, heads per layer, head names) is the model's (``schedule``); ``infoflowc check``
  passes on the saved file (``check``); a RASP program's model agrees with RASP's own evaluator
  (``translation``).

Any other exception is ``crash``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import infoflow_dsl as ifl
from infoflow_dsl.errors import CompileError, ProgramError
from infoflow_dsl.measure.measurement import above_bound
from infoflow_dsl.oracle.tokens import UNDEFINED_ID

EXHAUSTIVE = 400  # the most short token sequences measured exhaustively
RANDOM = 64  # random inputs at T
FAILURES = ("crash", "unlocated", "bound-above-eps", "wrong", "nondeterministic", "schedule", "check", "translation",
            "timeout")
#: refusal reasons, by a phrase of the message (the first that matches names it)
REASONS = (("range of this", "empty range"), ("needs at least", "top(k) above its range"),
           ("outside 1..", "position outside 1..len"), ("margin", "needs a margin"),
           ("inefficient", "inefficient"), ("above ε", "bound above ε"), ("no key", "table without a key"),
           ("table", "table"), ("categorical", "categorical token misused"), ("causal", "not causal"),
           ("not a number", "not a number"), ("division", "division"), ("unknown", "unknown name"))


@dataclass(frozen=True)
class Outcome:
    """What one program did: ``kind`` is ``compiled``, ``refused`` or one of :data:`FAILURES`;
    ``detail`` the refusal's reason or the failure's symptom."""

    kind: str
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES

    @property
    def signature(self) -> str:
        """What a shrunk program must still show to stand for this failure: the kind, and a token
        output's wrong answers apart from a number's error; a crash's exception and where; an
        unlocated refusal's exception type."""
        if self.kind == "wrong":
            return f"wrong {'answers' if 'wrong answers' in self.detail else 'number'}"
        if self.kind in ("crash", "unlocated"):
            return f"{self.kind} {self.detail.split(':')[0]} {self.detail.rpartition(' at ')[2]}"
        return self.kind


def reason(message: str) -> str:
    """A refusal's reason for the summary: a phrase of :data:`REASONS`, or the message's start."""
    lowered = message.lower()
    for phrase, name in REASONS:
        if phrase in lowered:
            return name
    return re.sub(r"\d[\d.e+-]*", "N", message.split("\n")[0])[:60]


def quotes_source(message: str, source: str, width: int = 8) -> bool:
    """Whether ``message`` holds ``width`` consecutive characters of ``source`` (spaces ignored)."""
    text, program = re.sub(r"\s", "", message), re.sub(r"\s", "", source)
    return any(text[i:i + width] in program for i in range(len(text) - width + 1))


def located(error: Exception, source: str) -> bool:
    """Whether a refusal says where (see the module's docstring)."""
    if isinstance(error, ProgramError):
        return bool(error.diagnostics) and all(d.line >= 1 and d.column >= 1 for d in error.diagnostics)
    from infoflow_dsl.rasp.literals import TranslationError

    message = str(error)
    if isinstance(error, TranslationError):
        return "'" in message or "from_rasp" in message
    span = getattr(error, "span", None)
    return (getattr(span, "line", 0) >= 1 or re.search(r"line \d+, column \d+", message) is not None
            or quotes_source(message, source)
            or message.startswith(("the target", "the a-priori bound")))


def refusal(error: Exception, source: str) -> Outcome:
    """A refusal's outcome: ``refused`` with its reason, or ``unlocated`` with its message."""
    message = str(error)
    if located(error, source):
        return Outcome("refused", reason(message))
    return Outcome("unlocated", f"{type(error).__name__}: {message.splitlines()[0] if message else ''}")


def crash(error: BaseException) -> Outcome:
    """A crash's symptom: the exception and the innermost frame of the package."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "infoflow_dsl" in f.filename]
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return Outcome("crash", f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}{where}")


def token_inputs(program: Any, seed: int) -> list[torch.Tensor]:
    """A token program's inputs, one tensor per length: every sequence of lengths 1..min(T, 4)
    while they fit :data:`EXHAUSTIVE`, then :data:`RANDOM` random sequences at T."""
    size, batches, total = program.token_vocabulary.size, [], 0
    for length in range(1, min(program.length, 4) + 1):
        total += size ** length
        if total > EXHAUSTIVE:
            break
        batches.append(torch.tensor(list(itertools.product(range(size), repeat=length)), dtype=torch.int64))
    generator = torch.Generator().manual_seed(seed)
    batches.append(torch.randint(0, size, (RANDOM, program.length), generator=generator))
    return batches


def measured_error(model: Any, program: Any, x: torch.Tensor) -> tuple[float, str]:
    """The largest error of ``model`` against ``ifl.evaluate`` on ``x`` (a token output: the
    number of wrong answers), and the first worst input as text."""
    with torch.no_grad():
        y = model(x if program.over_tokens else x.to(model.dtype)).to(torch.float64)
    truth = ifl.evaluate(program, x)
    if program.token_output:
        defined = truth != UNDEFINED_ID
        error = (defined & ((y.argmax(dim=-1) != truth) | ~y.isfinite().all(dim=-1))).to(torch.float64)
    else:
        defined = truth.isfinite()
        error = torch.where(defined, (y - truth).abs().nan_to_num(nan=torch.inf), 0.0)
    per_input = error.reshape(error.shape[0], -1).amax(dim=1) if error.dim() > 1 else error
    worst = int(per_input.argmax())
    value = float(error.sum()) if program.token_output else float(per_input[worst])
    return value, f"input {x[worst].tolist()}: model {y[worst].tolist()}, reference {truth[worst].tolist()}"


def vector_inputs(program: Any, seed: int) -> list[torch.Tensor]:
    """A program over vectors: random inputs from its domain at T."""
    return [ifl.sample_inputs(program, RANDOM, seed=seed)]


def schedule_mismatch(report: Any, model: Any) -> str:
    """How analyze's schedule differs from the compiled model's ('' when it is the same)."""
    layers = model.config["layers"]
    built = [sorted(head["name"] for head in layer["heads"]) for layer in layers]
    planned = [sorted(h.name for h in report.schedule.heads if h.layer == index)
               for index in range(1, report.layers + 1)]
    if report.layers != len(layers) or report.heads != [len(layer["heads"]) for layer in layers]:
        return f"analyze: {report.layers} layers, heads {report.heads}; model: {[len(names) for names in built]}"
    return "" if planned == built else f"analyze's heads {planned}, the model's {built}"


def cli_check(path: Path) -> str:
    """``infoflowc check`` on a saved model: '' when it passes, else its last lines."""
    from infoflow_dsl.cli.main import run

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = run(["check", str(path), "--samples", str(RANDOM)])
    return "" if code == 0 else f"exit {code}: " + " | ".join(printed.getvalue().strip().splitlines()[-2:])


def compiled_honestly(program: Any, source: str, eps: float, dtype: str, seed: int) -> Outcome:
    """Compile ``program`` and check everything the module's docstring lists."""
    report = ifl.analyze(program)
    try:
        model = ifl.compile(program, eps=eps, dtype=dtype, samples=0)
    except CompileError as error:
        return refusal(error, source)
    bound = float(model.config["a_priori_bound"])
    if not bound <= eps:
        return Outcome("bound-above-eps", f"bound {bound:.3g} > ε {eps:g} ({dtype})")
    inputs = token_inputs(program, seed) if program.over_tokens else vector_inputs(program, seed)
    for x in inputs:
        error, where = measured_error(model, program, x)
        if (error > 0.0) if program.token_output else above_bound(error, bound):  # the reference rounds too
            what = f"{error:g} wrong answers" if program.token_output else f"measured {error:.3g}"
            return Outcome("wrong", f"{what} > bound {bound:.3g} (ε {eps:g}, {dtype}); {where}")
    mismatch = schedule_mismatch(report, model) if report.verdict == "efficient" else "analyze: inefficient"
    if mismatch:
        return Outcome("schedule", mismatch)
    return saved_twice(model, program, eps, dtype)


def saved_twice(model: Any, program: Any, eps: float, dtype: str) -> Outcome:
    """Compile again: the same bytes; then ``infoflowc check`` on the saved file."""
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder, "first.safetensors"), Path(folder, "second.safetensors")
        ifl.save(model, first)
        ifl.save(ifl.compile(program, eps=eps, dtype=dtype, samples=0), second)
        if first.read_bytes() != second.read_bytes():
            return Outcome("nondeterministic", "two compiles saved different bytes")
        failed = cli_check(first)
    return Outcome("check", failed) if failed else Outcome("compiled", f"{dtype} ε {eps:g}")


def check_iflow(source: str, eps: float = 1e-3, dtype: str = "float64", seed: int = 0) -> Outcome:
    """The property for a ``.iflow`` program's text."""
    try:
        program = ifl.parse_program(source, "fuzz.iflow")
    except ProgramError as error:
        return refusal(error, source)
    except Exception as error:
        return crash(error)
    try:
        return compiled_honestly(program, source, eps, dtype, seed)
    except Exception as error:
        return crash(error)


def rasp_program(source: str) -> tuple[Any, tuple[Any, ...], int]:
    """(the program, VOCAB, MAX_SEQ_LEN) that a generated RASP file defines."""
    namespace: dict[str, Any] = {}
    exec(compile(source, "fuzz_rasp.py", "exec"), namespace)
    return namespace["program"], tuple(namespace["VOCAB"]), int(namespace["MAX_SEQ_LEN"])


def check_rasp(source: str, eps: float = 1e-3, dtype: str = "float64", seed: int = 0) -> Outcome:
    """The property for a generated RASP program (a ``.py`` text): translated by ``from_rasp``."""
    from infoflow_dsl.rasp.agreement import agreement, every_input
    from infoflow_dsl.rasp.translate import rasp_source

    program, vocab, length = rasp_program(source)
    try:
        checked = ifl.from_rasp(program, vocab, length)
    except ProgramError as error:
        return Outcome("crash", f"from_rasp wrote a program that does not check: {str(error).splitlines()[0]}")
    except CompileError as error:
        return refusal(error, source)
    except Exception as error:
        return crash(error)
    try:
        outcome = compiled_honestly(checked, rasp_source(program, vocab, length), eps, dtype, seed)
        if outcome.kind != "compiled":
            return outcome
        model = ifl.compile(checked, eps=eps, dtype=dtype, samples=0)
        found = agreement(program, model, checked, list(every_input(list(vocab), min(length, 3))))
    except Exception as error:
        return crash(error)
    if not found.exact(eps) and not checked.undefined_in_rasp:  # a divergence the translation states is no failure
        return Outcome("translation", f"RASP's evaluator disagrees: {found.wrong_tokens} wrong tokens, worst "
                                      f"{found.worst_error:.3g}, first {found.first_wrong}")
    return outcome
