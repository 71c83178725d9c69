"""The reference evaluator against an independent brute force (tests/bruteforce.py).

Acceptance: ``ifl.evaluate`` agrees to 1e-12 with plain Python loops over positions, for every
program of the table (every canonical example and the EXTRA programs, which together use every
construct) at T in {1, 2, 5, 9}. Where the checker refuses a program at some T, the refusal is
confirmed by enumeration instead (the range really is empty for some values of the enclosing
variables, x(k) really has k > T, top(k) really has fewer than k tuples).

Tolerance: |evaluate - brute force| <= 1e-12 * max(1, |brute force|), i.e. absolute 1e-12 for
values of magnitude at most 1 and relative 1e-12 above, entry by entry.
"""

from __future__ import annotations

import math
import re
import typing
import zlib

import bruteforce as bf
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from programs import ALL, CANONICAL, EXTRA, TOKENS, ExampleProgram
from random_programs import random_programs

import infoflow_dsl as ifl
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.check import Checker
from infoflow_dsl.language.parse import parse

LENGTHS = (1, 2, 5, 9)
TOLERANCE = 1e-12
CASES = [pytest.param(example, length, id=f"{example.name}-T{length}") for example in ALL for length in LENGTHS]


def declared(example: ExampleProgram) -> ir.Program:
    return ifl.parse_program(example.source, example.path)


def seed_of(example: ExampleProgram, length: int) -> int:
    return zlib.crc32(example.name.encode()) % 100_000 * 10 + length


def assert_close(got: torch.Tensor, want: list, program: ir.Program, what: str) -> None:
    """Entry by entry: |got - want| <= 1e-12 * max(1, |want|); shapes (B,) or (B, k), and for a
    per-token target (B, T) or (B, T, k) with NaN exactly where the brute force has None."""
    assert got.dtype == torch.float64
    if program.per_token:
        length = got.shape[1] if got.dim() > 1 else 0
        assert tuple(got.shape) == (len(want), length, *program.output_shape), what
        for b, (rows, expected) in enumerate(zip(got.tolist(), want, strict=True)):
            for t, (row, value) in enumerate(zip(rows, expected, strict=True)):
                if value is None:
                    entries = row if isinstance(row, list) else [row]
                    assert all(math.isnan(g) for g in entries), f"{what}, sequence {b}, t = {t + 1}: not NaN"
                else:
                    _assert_entries_close(row, value, f"{what}, sequence {b}, t = {t + 1}")
        return
    assert tuple(got.shape) == (len(want), *program.output_shape), what
    for b, (row, expected) in enumerate(zip(got.tolist(), want, strict=True)):
        _assert_entries_close(row, expected, f"{what}, sequence {b}")


def _assert_entries_close(row: float | list, expected: float | list, what: str) -> None:
    row = row if isinstance(row, list) else [row]
    expected = expected if isinstance(expected, list) else [expected]
    for g, w in zip(row, expected, strict=True):
        assert math.isfinite(g) and math.isfinite(w), f"{what}: {g} vs {w}"
        assert abs(g - w) <= TOLERANCE * max(1.0, abs(w)), f"{what}: {g!r} vs brute force {w!r}"


# ----------------------------------------------------------------------------- inputs


def lattice_levels(domain: ir.Box | ir.Ball, dimension: int) -> torch.Tensor:
    """A few exactly representable coordinate values inside the domain, so tokens and scores tie."""
    if isinstance(domain, ir.Box):
        low, high = domain.low, domain.high
        levels = {low, high, (low + high) / 2}
        levels |= {float(k) for k in range(math.ceil(low), math.floor(high) + 1)}
        return torch.tensor(sorted(levels), dtype=torch.float64)
    step = 2.0 ** math.floor(math.log2(domain.radius / math.sqrt(dimension)))  # |coordinates| <= step: in the ball
    return torch.tensor([-step, 0.0, step], dtype=torch.float64)


def input_batch(program: ir.Program, length: int, seed: int, count: int) -> torch.Tensor:
    """``count`` uniform sequences, then ``count`` with repeated tokens (the first: all tokens equal),
    then ``count`` with lattice coordinates (equal scores for different tokens: ties for argmin,
    argmax, top, min and max)."""
    d = program.dimension
    generator = torch.Generator().manual_seed(seed)
    uniform = ifl.sample_inputs(program, count, seed=seed, length=length)
    pool = ifl.sample_inputs(program, count, seed=seed + 1, length=2)  # two distinct tokens per sequence
    choice = torch.randint(0, 2, (count, length), generator=generator)
    choice[0] = 0
    repeated = pool.gather(1, choice.unsqueeze(-1).expand(-1, -1, d))
    levels = lattice_levels(program.domain, d)
    lattice = levels[torch.randint(0, len(levels), (count, length, d), generator=generator)]
    return torch.cat([uniform, repeated, lattice])


def test_input_batch_has_ties_and_stays_in_the_domain() -> None:
    for example in ALL:
        program = declared(example)
        x = input_batch(program, 9, seed_of(example, 9), 3)
        assert x.shape == (9, 9, program.dimension)
        assert torch.equal(x[3], x[3, :1].expand(9, -1)), "the first repeated sequence has one token"
        for sequence in x[6:]:  # equal coordinates at different positions: scores tie
            assert len(set(sequence[:, 0].tolist())) < 9
        if isinstance(program.domain, ir.Box):
            assert program.domain.low <= x.min() and x.max() <= program.domain.high
        else:
            assert torch.linalg.vector_norm(x, dim=-1).max() <= program.domain.radius


# ----------------------------------------------------------------------------- range checks


_WITNESS = re.compile(r"\(T = (\d+)((?:, [^,()=\s]+ = \d+)*)\)$")


def witness_of(message: str, length: int) -> dict[str, int]:
    """The enclosing values a range diagnostic names: '... (T = 5, t = 1)' -> {'t': 1}."""
    match = _WITNESS.search(message)
    assert match, f"a range diagnostic names T and the witness values: {message!r}"
    assert int(match.group(1)) == length
    return {name: int(value) for name, value in re.findall(r", ([^,()=\s]+) = (\d+)", match.group(2))}


def diagnostic_kind(message: str) -> str:
    if re.search(r"can be -?\d+, outside 1..T", message):
        return "offset"
    if "the per-token target is defined at no position" in message:
        return "target"
    if "is outside 1..T" in message:
        return "position"
    if re.search(r"the range of this \w+ is empty", message):
        return "empty"
    if re.match(r"top\(\d+\) needs at least \d+ positions", message):
        return "top"
    raise AssertionError(f"not a range diagnostic: {message!r}")


def assert_refusal_is_right(diagnostic: ifl.Diagnostic, faults: list[bf.Fault], length: int) -> None:
    """The diagnostic names a fault the enumeration found: same place, same kind, a true witness."""
    kind = diagnostic_kind(diagnostic.message)
    matching = [f for f in faults if f.kind == kind and (f.span == diagnostic.span or kind == "target")]
    assert matching, f"no {kind} fault at {diagnostic.span} by enumeration: {diagnostic.message!r} / {faults}"
    fault = matching[0]
    if kind == "target":
        return
    if kind == "position":
        position = fault.node.position
        if isinstance(position, ir.LastPosition):
            assert not 1 <= length + position.offset <= length
            assert f"is outside 1..T (T = {length})" in diagnostic.message
            return
        assert position.index > length
        assert f"position {position.index} is outside 1..T (T = {length})" in diagnostic.message
        return
    witness = witness_of(diagnostic.message, length)
    assert set(witness) <= set(fault.enclosing)
    if kind == "offset":  # the witness is allowed and reads outside 1..T
        position = fault.node.position
        assert bf.conditions_hold([c for c in fault.conditions if bf._mentioned([c]) <= set(witness)], witness, length)
        assert not 1 <= witness[position.name] + position.offset <= length
        return
    at_witness = bf.smallest_range_size(fault.node, fault.enclosing, length, fixed=witness,
                                        conditions=fault.conditions)
    assert at_witness == fault.smallest, "the witness reaches the smallest range"
    if kind == "top":
        assert f"top({fault.node.rank}) needs at least {fault.node.rank} positions" in diagnostic.message
        assert f"but the range has {fault.smallest} " in diagnostic.message


@pytest.mark.parametrize(("example", "length"), CASES)
def test_checker_refuses_exactly_the_programs_with_a_range_fault(example: ExampleProgram, length: int) -> None:
    faults = bf.range_faults(declared(example), length)
    try:
        ifl.parse_program(example.source, example.path, length=length)
    except ifl.ProgramError as error:
        assert faults, f"refused at T = {length} but enumeration finds no fault:\n{error}"
        assert error.diagnostics
        for diagnostic in error.diagnostics:
            assert_refusal_is_right(diagnostic, faults, length)
    else:
        assert not faults, f"accepted at T = {length} but enumeration finds {faults}"


# ----------------------------------------------------------------------------- the evaluator


def batch_size(program: ir.Program, length: int) -> int:
    """Sequences per kind of input: fewer where the brute force loops over T^3 tuples."""
    order = max((len(n.variables) for n in bf.walk(program.target) if isinstance(n, ir.Reduce)), default=0)
    nesting = sum(isinstance(n, ir.Reduce | ir.ArgPosition) for n in bf.walk(program.target))
    return 3 if length >= 9 and (order >= 3 or nesting >= 3) else 6


@pytest.mark.parametrize(("example", "length"), CASES)
def test_evaluate_agrees_with_bruteforce(example: ExampleProgram, length: int, device: str) -> None:
    base = declared(example)
    try:
        program = ifl.parse_program(example.source, example.path, length=length)
    except ifl.ProgramError:
        # the refusal itself is checked above; here: it is a real fault, and evaluate refuses too
        assert bf.range_faults(base, length)
        x = ifl.sample_inputs(base, 2, seed=seed_of(example, length), length=length)
        with pytest.raises((ifl.ProgramError, ValueError)):
            ifl.evaluate(base, x)
        return
    assert program.length == length
    x = input_batch(program, length, seed_of(example, length), batch_size(program, length))
    want = bf.evaluate_batch(program, x)
    got = ifl.evaluate(program, x.to(device))  # the reference on the device: its float64 on the device
    assert got.device.type == device
    assert_close(got.cpu(), want, program, f"{example.name} at T = {length}")
    if length > base.length:  # longer than the declared T: refused, as the model refuses it
        with pytest.raises(ValueError, match=f"input length {length} exceeds the program's T = {base.length}"):
            ifl.evaluate(base, x)
    else:  # the declared program, given shorter sequences, is re-checked for their length
        assert_close(ifl.evaluate(base, x), want, program, f"{example.name} re-checked for T = {length}")


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_evaluate_agrees_with_bruteforce_on_small_integer_inputs(data: st.DataObject) -> None:
    """Hypothesis picks a program, T and coordinates from a few half-integers: many exact ties."""
    example = data.draw(st.sampled_from(ALL), label="program")
    ranks = [n.rank for n in bf.walk(declared(example).target) if isinstance(n, ir.Reduce) and n.rank]
    shortest = max([3, *ranks])  # top(k) needs k positions: ineff_top4 is refused at T = 3
    length = data.draw(st.integers(shortest, max(shortest, 6)), label="T")
    program = ifl.parse_program(example.source, example.path, length=length)
    coordinates = st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0])
    rows = data.draw(st.lists(st.lists(st.lists(coordinates, min_size=program.dimension, max_size=program.dimension),
                                       min_size=length, max_size=length), min_size=1, max_size=3), label="x")
    x = torch.tensor(rows, dtype=torch.float64)
    assert_close(ifl.evaluate(program, x), bf.evaluate_batch(program, x), program, example.name)


# ----------------------------------------------------------------------------- random programs


class _Unranged(Checker):
    """The checker without its range checks: the typed IR of a program that may be refused at T.

    The IR does not depend on T (``x(T)`` stays symbolic), so the IR checked at a length where
    every literal position is in range is the program's IR at any T.
    """

    def check_range(self, expr: object, names: object, conditions: object, enclosing: object) -> None:
        return None

    def check_offset(self, expr: object, position: object, scope: object) -> None:
        return None

    def target_defined_somewhere(self, target: object, conditions: object) -> bool:
        return True


def unranged_ir(source: str) -> ir.Program:
    checker = _Unranged("random.iflow", source, 9, None)
    program = checker.check_program(parse(source, "random.iflow"))
    assert program is not None and not checker.errors, [d.message for d in checker.errors]
    return program



@settings(max_examples=500, deadline=None)
@given(case=random_programs(), seed=st.integers(0, 1000))
def test_random_programs_agree_with_bruteforce_or_are_rightly_refused(case: tuple[str, int], seed: int) -> None:
    """Random programs over every construct: the checker refuses exactly those with a range fault
    at T (confirmed by enumeration), and evaluate agrees with the brute force on the others, on
    uniform inputs and on inputs from {-1, -1/2, 0, 1/2, 1} (exact ties)."""
    source, length = case
    faults = bf.range_faults(unranged_ir(source), length)
    try:
        program = ifl.parse_program(source, "random.iflow")
    except ifl.ProgramError as error:
        assert faults, f"refused but enumeration finds no fault:\n{source}\n{error}"
        for diagnostic in error.diagnostics:
            assert_refusal_is_right(diagnostic, faults, length)
        return
    assert not faults, f"accepted but enumeration finds {faults}:\n{source}"
    generator = torch.Generator().manual_seed(seed)
    levels = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0], dtype=torch.float64)
    lattice = levels[torch.randint(0, 5, (2, length, program.dimension), generator=generator)]
    x = torch.cat([ifl.sample_inputs(program, 2, seed=seed), lattice])
    assert_close(ifl.evaluate(program, x), bf.evaluate_batch(program, x), program, source)


# ----------------------------------------------------------------------------- semantics by hand


def token_rows(*columns: list[float]) -> torch.Tensor:
    """One sequence whose coordinate i runs through ``columns[i]``: shape (1, T, d)."""
    return torch.tensor([list(zip(*columns, strict=True))], dtype=torch.float64)


HAND_CASES = [
    # argmax / argmin ties go to the smallest position; the retrieved tokens differ in coordinate 2
    ("x(argmax_<s> x(s)[1])", token_rows([0, 2, 1, 2], [10, 20, 30, 40]), [2.0, 20.0]),
    ("x(argmin_<s> x(s)[1])", token_rows([1, 0, 3, 0], [10, 20, 30, 40]), [0.0, 20.0]),
    ("x(argmax_<s : s > 2> x(s)[1])", token_rows([5, 2, 1, 2], [10, 20, 30, 40]), [2.0, 40.0]),
    ("x(argmin_<s : s != T> ||x(s) - x(T)||^2)", token_rows([1, -1, 1, 0], [0, 0, 0, 0]), [1.0, 0.0]),
    # top(k) counts values with multiplicity
    ("top(2)_<t> x(t)[1]", token_rows([3, 1, 3], [0, 0, 0]), 3.0),
    ("top(3)_<t> x(t)[1]", token_rows([3, 1, 3], [0, 0, 0]), 1.0),
    ("top(2)_<s, t : s != t> x(s)[1] + x(t)[1]", token_rows([1, 2, 4], [0, 0, 0]), 6.0),
    # conditions restrict tuples; mean divides by the number of tuples kept
    ("mean_<s, t : s < t> x(s)[1] * x(t)[1]", token_rows([1, 2, 3], [0, 0, 0]), (2 + 3 + 6) / 3),
    ("sum_<s, t : s <= t and t <= 2> x(s)[1] * x(t)[2]", token_rows([1, 2, 3], [5, 7, 11]), 1 * 5 + 1 * 7 + 2 * 7),
    ("sum_<t : t == 2> x(t)", token_rows([1, 2, 3], [5, 7, 11]), [2.0, 7.0]),
    ("mean_<t : t >= 2> x(t)", token_rows([1, 2, 3], [5, 7, 11]), [2.5, 9.0]),
    ("min_<t : t > 1 and t < T> x(t)[2]", token_rows([1, 2, 3, 4], [-5, 7, 6, -9]), 6.0),
    # the body extends right and the inner t shadows the outer one
    ("max_<t> x(t)[1] + max_<t> x(t)[2]", token_rows([1, 5, 2], [9, 0, 3]), 14.0),
    ("sum_<t> x(t)[1] * sum_<t> x(t)[2]", token_rows([1, 2], [3, 4]), (1 + 2) * (3 + 4)),
    # fixed positions, T, pointwise functions, constants
    ("x(T) - x(1) + 2 * x(2) / 4", token_rows([1, 2, 7], [0, 4, 1]), [7.0, 3.0]),
    ("relu(x(1)[1]) + relu(x(2)[1]) + |x(3)[1]| + min(x(1)[2], x(2)[2]) + max(x(1)[2], x(2)[2])",
     token_rows([-2, 3, -4], [1, 6, 0]), 0 + 3 + 4 + 1 + 6),
    ("(x(1)[1] - x(2)[1])^2 + ||x(3)|| + ||x(3)||^2", token_rows([1, 4, 3], [0, 0, 4]), 9 + 5 + 25),
]


@pytest.mark.parametrize(("target", "x", "expected"), HAND_CASES, ids=[c[0] for c in HAND_CASES])
def test_semantics_by_hand(target: str, x: torch.Tensor, expected: float | list[float]) -> None:
    """Values worked out by hand from docs/language.md, for both the evaluator and the brute force."""
    source = f"input x : R^2 in [-100, 100]\nlength T = {x.shape[1]}\ntarget {target}\n"
    program = ifl.parse_program(source, "hand.iflow")
    want = [expected]
    assert_close(ifl.evaluate(program, x), want, program, target)
    assert bf.evaluate_batch(program, x) == want


def test_constants_are_row_major_and_matvec_multiplies_rows() -> None:
    source = """
input x : R^3
length T = 2
const A : R^{2 x 3} = [[1, 2, 3], [4, 5, 6]]
const w : R^2 = [10, -1]
const c = 0.5
target <w, A @ x(1)> * c + (A @ x(2))[2]
"""
    program = ifl.parse_program(source, "matvec.iflow")
    x = torch.tensor([[[1.0, 0.0, -1.0], [0.0, 1.0, 2.0]]], dtype=torch.float64)
    # A @ x(1) = [1 - 3, 4 - 6] = [-2, -2]; <w, .> = -20 + 2 = -18; * 0.5 = -9; A @ x(2) = [8, 17]
    want = [-9.0 + 17.0]
    assert_close(ifl.evaluate(program, x), want, program, "matvec")
    assert bf.evaluate_batch(program, x) == want


# ----------------------------------------------------------------------------- the table covers every construct


def _literal_values(cls: type, name: str) -> set[str]:
    return set(typing.get_args(typing.get_type_hints(cls)[name]))


def _constructs(example: ExampleProgram) -> set[tuple]:
    """What one program uses, read off its typed tree."""
    found: set[tuple] = set()
    for node in bf.walk(declared(example).target):
        found.add(("node", type(node).__name__))
        if isinstance(node, ir.PositionCondition):
            found.add(("condition", node.operator))
            for term in (node.left, node.right):
                found.add(("condition term", type(term).__name__))
        elif isinstance(node, ir.Reduce):
            found.add(("reduction", node.kind))
            found.add(("reduction of a", node.kind, node.type.kind))
            if node.kind == "top" and node.rank is not None and node.rank > 1:
                found.add(("top(k), k > 1",))
            if len(node.variables) > 1:
                found.add(("reduction over tuples",))
            if node.conditions:
                found.add(("condition", "count", min(len(node.conditions), 2)))
        elif isinstance(node, ir.ArgPosition):
            found.add(("reduction", node.kind))
        elif isinstance(node, ir.Token):
            found.add(("token at", type(node.position).__name__))
        elif isinstance(node, ir.Pointwise):
            found.add(("pointwise", node.function))
        elif isinstance(node, ir.Arithmetic):
            found.add(("arithmetic", node.operator, node.left.type.kind, node.right.type.kind))
        elif isinstance(node, ir.Divide):
            found.add(("divide a", node.type.kind))
        elif isinstance(node, ir.Constant):
            found.add(("constant", node.type.kind))
        if isinstance(node, ir.Reduce | ir.ArgPosition):
            names = node.variables if isinstance(node, ir.Reduce) else (node.variable,)
            if any("′" in name for name in names):
                found.add(("shadowed variable",))
    found.add(("target", declared(example).target.type.kind))
    return found


#: The pointwise functions of docs/language.md (the IR may hold more that later stages introduce, e.g. sqrt).
LANGUAGE_POINTWISE = {"relu", "abs", "min", "max"}


def required_constructs() -> set[tuple]:
    """Every construct of the language, listed from the IR's own definitions where it can be."""
    expr_classes = {cls.__name__ for cls in typing.get_args(ir.Expr)} - {"Presence"}  # compile's gather route only
    required = {("node", name) for name in expr_classes | {"PositionCondition"}}
    required |= {("condition", op) for op in _literal_values(ir.PositionCondition, "operator")}
    required |= {("condition term", cls.__name__) for cls in typing.get_args(ir.PositionTerm)}
    required |= {("reduction", kind) for kind in _literal_values(ir.Reduce, "kind")}
    required |= {("reduction", kind) for kind in _literal_values(ir.ArgPosition, "kind")}
    required |= {("reduction of a", kind, "vector") for kind in ("sum", "mean")}
    required |= {("token at", cls.__name__) for cls in typing.get_args(ir.Position)}
    assert LANGUAGE_POINTWISE <= _literal_values(ir.Pointwise, "function")
    required |= {("pointwise", f) for f in LANGUAGE_POINTWISE}
    required |= {("arithmetic", op, kind, kind) for op in ("+", "-") for kind in ("scalar", "vector")}
    required |= {("arithmetic", "*", "scalar", "scalar"), ("arithmetic", "*", "scalar", "vector")}
    required |= {("divide a", "vector"), ("constant", "scalar"), ("constant", "vector"), ("constant", "matrix")}
    required |= {("top(k), k > 1",), ("reduction over tuples",), ("condition", "count", 2), ("shadowed variable",)}
    required |= {("target", "scalar"), ("target", "vector")}
    return required


def test_the_table_uses_every_construct() -> None:
    """The programs of tests/programs.py, with its token table (language v3), use every construct."""
    used = set().union(*(_constructs(example) for example in ALL + TOKENS))
    required = required_constructs()
    assert len({r for r in required if r[0] == "node"}) == 27
    assert not required - used, f"constructs no program of tests/programs.py uses: {sorted(required - used)}"


def test_the_table_has_the_canonical_examples_and_at_least_15_more() -> None:
    assert len(EXTRA) >= 15
    names = [example.name for example in ALL]
    assert len(set(names)) == len(names)
    assert {example.name for example in CANONICAL} >= {
        "min_pairwise", "triangle_center", "d_retrieval", "kth_largest", "first_three", "nearest_neighbour",
        *(f"intrinsic_{d}" for d in range(2, 7)),
    }


def test_evaluate_is_deterministic_and_batched_independently() -> None:
    """Each sequence's value does not depend on the others in its batch."""
    for example in ALL:
        program = declared(example)
        x = ifl.sample_inputs(program, 3, seed=5, length=min(5, program.length))
        whole = ifl.evaluate(program, x)
        for b in range(3):  # NaN (a per-token target's undefined positions) equals NaN here
            assert torch.equal(ifl.evaluate(program, x[b:b + 1])[0].nan_to_num(7.0), whole[b].nan_to_num(7.0))
        assert torch.equal(ifl.evaluate(program, x).nan_to_num(7.0), whole.nan_to_num(7.0)), example.name
