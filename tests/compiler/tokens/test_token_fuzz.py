"""The token lowering on random token programs: every program the checker accepts either
compiles, and then agrees with the reference on random ids of every length, or is refused with
a CompileError (exit 2 in the CLI) — never another exception."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import infoflow_dsl as ifl
from infoflow_dsl.errors import CompileError, ProgramError
from infoflow_dsl.oracle.tokens import random_ids

LENGTH = 4


class TokenProgramDrawer:
    """Random per-token targets over {1, 2, 3} (numeric) or {"a", "b", "c"} (categorical)."""

    def __init__(self, draw: st.DrawFn, numeric: bool) -> None:
        self.draw, self.numeric, self.fresh = draw, numeric, 0

    def pick(self, options: list[str]) -> str:
        return self.draw(st.sampled_from(options))

    def variable(self, scope: tuple[str, ...]) -> str:
        return self.pick(list(scope))

    def literal(self) -> str:
        return self.pick(["1", "2", "3"] if self.numeric else ['"a"', '"b"', '"c"'])

    def condition(self, scope: tuple[str, ...], depth: int) -> str:
        kinds = ["token-literal", "token-token", "positions", "scalars"] + (["and", "or", "not"] if depth else [])
        kind = self.pick(kinds)
        if kind == "token-literal":
            return f"x({self.variable(scope)}) == {self.literal()}"
        if kind == "token-token":
            op = self.pick(["==", "!=", "<", ">="] if self.numeric else ["==", "!="])
            return f"x({self.variable(scope)}) {op} x({self.variable(scope)})"
        if kind == "positions":
            return f"{self.variable(scope)} {self.pick(['<', '<=', '==', '!='])} {self.variable(scope)}"
        if kind == "scalars":
            return f"{self.scalar(scope, depth - 1)} {self.pick(['<', '>=', '=='])} {self.scalar(scope, depth - 1)}"
        if kind == "not":
            return f"not ({self.condition(scope, depth - 1)})"
        return f"({self.condition(scope, depth - 1)}) {kind} ({self.condition(scope, depth - 1)})"

    def scalar(self, scope: tuple[str, ...], depth: int) -> str:
        leaves = ["number", "position", "len", "bracket"] + (["token"] if self.numeric else [])
        nodes = ["sum", "mean", "max", "min", "plus", "minus", "abs", "times"] if depth > 0 else []
        kind = self.pick(leaves + nodes)
        if kind == "number":
            return self.pick(["1", "2", "0.5"])
        if kind == "position":
            return self.variable(scope)
        if kind == "len":
            return "len"
        if kind == "token":
            return f"x({self.variable(scope)})"
        if kind == "bracket":
            return f"[{self.condition(scope, max(depth - 1, 0))}]"
        if kind in ("plus", "minus", "times"):
            op = {"plus": "+", "minus": "-", "times": "*"}[kind]
            return f"({self.scalar(scope, depth - 1)} {op} {self.scalar(scope, depth - 1)})"
        if kind == "abs":
            return f"|{self.scalar(scope, depth - 1)}|"
        self.fresh += 1
        inner = f"s{self.fresh}"
        condition = self.pick(["", f" : {inner} <= {self.variable(scope)}", f" : {inner} != {self.variable(scope)}"])
        if kind == "mean" and condition.startswith(" : s") and "!=" in condition:
            condition = ""
        return f"{kind}_<{inner}{condition}> {self.scalar((*scope, inner), depth - 1)}"


@st.composite
def token_programs(draw: st.DrawFn) -> str:
    numeric = draw(st.booleans())
    drawer = TokenProgramDrawer(draw, numeric)
    vocabulary = "{1, 2, 3}" if numeric else '{"a", "b", "c"}'
    return f"input x : token {vocabulary}\nlength T = {LENGTH}\ntarget(t) = {drawer.scalar(('t',), 2)}\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(token_programs())
def test_random_token_programs_compile_exactly_or_are_refused(source: str) -> None:
    try:
        program = ifl.parse_program(source, "fuzz.iflow")
    except ProgramError:
        assume(False)
        return
    try:
        model = ifl.compile(program, eps=1e-3, dtype="float64", samples=0)
    except CompileError:
        return
    for length in range(1, LENGTH + 1):
        ids = random_ids(program, 64, seed=length, length=length)
        reference, output = ifl.evaluate(program, ids), model(ids)
        if program.token_output:
            assert torch.equal(output.argmax(-1), reference), source
            continue
        error = torch.where(reference.isnan(), 0.0, (output - reference).abs())
        assert float(error.max()) <= max(model.config["a_priori_bound"], 1e-9), source
