"""What a measurement will cost, estimated before anything is allocated, and the refusal of one
that cannot finish here.

A measurement (compile's, ``check``'s, the report's) runs the model and the reference on N inputs
at length T. Its cost is known from the model and the program before the first input is drawn:

- **memory held at once** = the inputs held together × T × d × 8 bytes (float64; a token
  program's ids: × 8 bytes, no d) + one forward batch's activations, B·(T+1)·(4·d_model + M)
  numbers of the model's dtype (the residual stream, q, k, v and the widest FFN's M hidden units);
- **work** = N × :func:`~infoflow_dsl.measure.vectors.measurement_cost` operations, turned into
  seconds at OPERATIONS_PER_SECOND (the rate behind the measurement budget: 4·10¹⁰ operations in
  about two seconds on a 2-core x86 machine, BENCHMARKS.md). A token program's inputs have every
  length 1..T, so its cost is summed over the lengths (:func:`token_workload`).

A request is refused (:class:`~infoflow_dsl.errors.WorkloadError`, exit 2) when its memory
exceeds what this process may use (the machine's physical memory, or a lower ``ulimit -v``) or
its estimated time exceeds the limit: one hour, or ``INFOFLOW_MAX_SECONDS`` seconds when that
variable is set. The message gives both figures and what to change. The estimate is rough (a
factor of a few either way: the rate depends on the machine and on T); it is there so that
``length T = 1000000`` or ``--samples 10000000`` fails in a second with a reason rather than
after minutes with an allocator's error.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from ..errors import WorkloadError
from ..language import typed as ir
from .tokens import exhaustive_lengths, largest_part
from .vectors import CORNERS, MEASUREMENT_BUDGET, measurement_batches, measurement_cost, model_size

OPERATIONS_PER_SECOND = MEASUREMENT_BUDGET / 2.0
DEFAULT_TIME_LIMIT = 3600.0  # seconds
TIME_LIMIT_VARIABLE = "INFOFLOW_MAX_SECONDS"
FLOAT_BYTES = 8  # inputs and outputs are measured in float64; ids are int64


def time_limit() -> float:
    """The longest estimated time a measurement may take: INFOFLOW_MAX_SECONDS, else one hour
    (an unreadable value is the user's fault, named)."""
    text = os.environ.get(TIME_LIMIT_VARIABLE)
    if text is None:
        return DEFAULT_TIME_LIMIT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise WorkloadError(f"{TIME_LIMIT_VARIABLE}={text!r}: expected a positive number of seconds")
    return value


def memory_limit() -> int:
    """The bytes this process may hold: the machine's physical memory, or ``ulimit -v`` when lower."""
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):  # not on every platform
        return physical
    return physical if soft == resource.RLIM_INFINITY else min(physical, soft)


def shown_bytes(count: float) -> str:
    """``8.2 GB``, ``35 MB``: decimal units, two or three significant figures."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count:.0f} bytes"


def shown_seconds(seconds: float) -> str:
    """``40 s``, ``12 minutes``, ``3.5 hours``, ``2.1e+03 days``."""
    if seconds < 120:
        return f"{seconds:.2g} s"
    if seconds < 7200:
        return f"{seconds / 60:.2g} minutes"
    if seconds < 172_800:
        return f"{seconds / 3600:.2g} hours"
    return f"{seconds / 86_400:.2g} days"


@dataclass(frozen=True, kw_only=True)
class Workload:
    """A measurement's estimated cost: ``what`` it is ("measuring 256 random inputs and 256
    corners at T = 1,000,000"), the bytes it holds at once, its operations, and what the user
    can change to make it smaller (a flag, T)."""

    what: str
    held_bytes: float
    operations: float
    change: str

    @property
    def seconds(self) -> float:
        return self.operations / OPERATIONS_PER_SECOND

    def over_limits(self) -> list[str]:
        """The figures over this machine's limits (none when it fits)."""
        memory, limit = memory_limit(), time_limit()
        over = []
        if self.held_bytes > memory:
            over.append(f"about {shown_bytes(self.held_bytes)} at once (this process may use {shown_bytes(memory)})")
        if self.seconds > limit:
            over.append(f"about {shown_seconds(self.seconds)} of work ({self.operations:.2g} operations at "
                        f"{OPERATIONS_PER_SECOND:.0e} a second; the limit is {shown_seconds(limit)}, "
                        f"{TIME_LIMIT_VARIABLE} raises it)")
        return over

    def refuse_if_unaffordable(self) -> None:
        """Raise :class:`WorkloadError` when the memory or the time is over this machine's limits."""
        over = self.over_limits()
        if over:
            raise WorkloadError(f"{self.what} would need {' and '.join(over)}; {self.change}")


def unless_fixed(requested: Workload, least: Workload, fixed: str) -> Workload:
    """``requested``, saying ``fixed`` as what to change when even ``least`` (the smallest
    request of its kind: the parts every measurement runs) is over the limits, where no flag helps."""
    return requested if not least.over_limits() else dataclasses.replace(requested, change=fixed)


def forward_bytes(model: Any, length: int) -> float:
    """One forward batch's activations at length T (inputs per batch from ``measurement_batches``):
    B·(T+1)·(4·d_model + M) numbers of the model's dtype, plus its (B, T+1, d_model) output in float64."""
    batch, _ = measurement_batches(model, length)
    size = model_size(model)
    return float(batch) * (length + 1) * ((4 * size.d_model + size.widest_hidden) * size.itemsize + FLOAT_BYTES)


def continuous_workload(model: Any, program: ir.Program, inputs: int, held: int, what: str,
                        change: str) -> Workload:
    """``inputs`` inputs of a vector program, ``held`` of them in memory at once."""
    length, size = program.length, program.length * program.dimension
    return Workload(what=f"{what} at T = {length:,}", held_bytes=float(held) * size * FLOAT_BYTES
                    + forward_bytes(model, length), operations=float(inputs) * measurement_cost(model, program),
                    change=change)


def _power_sums(first: int, last: int) -> tuple[int, int, int]:
    """(Σ 1, Σ L, Σ L²) over L = first..last (zeros when empty)."""
    def upto(n: int) -> tuple[int, int, int]:
        return n, n * (n + 1) // 2, n * (n + 1) * (2 * n + 1) // 6

    if last < first:
        return 0, 0, 0
    high, low = upto(last), upto(first - 1)
    return high[0] - low[0], high[1] - low[1], high[2] - low[2]


def token_workload(model: Any, program: ir.Program, samples: int, short: int, held_ids: float,
                   what: str, change: str) -> Workload:
    """A token measurement (:func:`~infoflow_dsl.measure.tokens.token_inputs`): every
    sequence of lengths 1..``short``, the V constant sequences of each longer length, and
    ``samples`` random ones of uniform lengths 1..T; ``held_ids`` ids in memory at once.

    One sequence of length L costs about c(L) = c(T)·(L/T)² operations (attention and the
    reference's pairs are quadratic in L; the linear part is bounded by it), so the work is
    c(T)/T² × (Σ_exhaustive V^L·L² + V·Σ_{L>short} L² + samples·(Σ_{L≤T} L²)/T)."""
    length, size = program.length, program.token_vocabulary.size
    per_square = measurement_cost(model, program) / float(length) ** 2
    exhaustive = sum(float(size) ** level * level**2 for level in range(1, short + 1))
    constant = size * _power_sums(short + 1, length)[2]
    random = samples * _power_sums(1, length)[2] / length
    return Workload(what=f"{what} at T = {length:,}", held_bytes=held_ids * FLOAT_BYTES + forward_bytes(model, length),
                    operations=per_square * (exhaustive + constant + random), change=change)


def measurement_workload(model: Any, program: ir.Program, samples: int, change: str) -> Workload:
    """What :func:`~infoflow_dsl.measure.vectors.measure_error` runs: ``samples`` random inputs
    and the CORNERS corners, all held at once; for a token program, what
    :func:`~infoflow_dsl.measure.tokens.measure_tokens` runs, one part at a time."""
    if program.over_tokens:
        short = exhaustive_lengths(program)
        return token_workload(model, program, samples, short, float(largest_part(program)),
                              f"measuring {samples:,} random sequences, every sequence up to length {short} and "
                              f"the constant ones", change)
    inputs = samples + CORNERS
    return continuous_workload(model, program, inputs, inputs,
                               f"measuring {samples:,} random inputs and {CORNERS} corners", change)
