"""Random well-typed ``.iflow`` programs over every construct (hypothesis), shared by the
evaluator, ranges and pipeline tests."""

from __future__ import annotations

import typing

from hypothesis import strategies as st

DYADIC = ("1", "-1", "0.5", "2", "-0.25", "0")
#: constants users write that no binary fraction holds exactly (the fuzz campaign draws them)
NON_DYADIC = ("0.3", "0.1", "1e-14", "1e-10", "1 / 3", "2 / 3", "0.7", "1.1")
NAMES = ("s", "t", "u")


class ProgramText:
    """Draws the text of a random well-typed target; ``exact`` parts use only operations that stay
    exact on dyadic inputs (no mean, no norm, no division by 3, no randn), so argmin/argmax scores
    tie exactly the same way in both evaluators."""

    def __init__(self, draw: typing.Callable, dimension: int, constants: typing.Sequence[str] = DYADIC[:-1]) -> None:
        self.draw = draw
        self.d = dimension
        self.constants = tuple(f"({c})" if " " in c else c for c in constants)
        self.variables = 0  # how many position variables the program binds, in all

    def pick(self, options: typing.Sequence) -> typing.Any:
        return self.draw(st.sampled_from(options))

    def binders(self, scope: tuple[str, ...], most: int) -> tuple[str, str, tuple[str, ...]]:
        """``"<s, t : conditions>"``-style binder list, the names, and the new scope."""
        count = self.draw(st.integers(1, max(1, min(most, 3 - self.variables))))
        names = tuple(self.draw(st.lists(st.sampled_from(NAMES), min_size=count, max_size=count, unique=True)))
        self.variables += count
        terms = [*names, *scope, "1", "2", "3", "T", *(f"{v} - 1" for v in scope[:1]), "T - 1"]
        conditions = []
        for _ in range(self.draw(st.integers(0, 2))):
            left = self.pick(names) if self.draw(st.booleans()) else self.pick(terms)
            conditions.append(f"{left} {self.pick(('!=', '<', '<=', '>', '>=', '=='))} {self.pick(terms)}")
        text = ", ".join(names) + (" : " + " and ".join(conditions) if conditions else "")
        return text, names, tuple(dict.fromkeys((*scope, *names)))

    def position(self, scope: tuple[str, ...], depth: int) -> str:
        options = ["literal", "T", "T - 1"] + (["variable"] * 3 + ["offset"] if scope else [])
        options += ["arg"] * 2 if depth > 0 else []
        kind = self.pick(options)
        if kind == "variable":
            return self.pick(scope)
        if kind == "offset":
            return f"{self.pick(scope)} {self.pick(('-', '+'))} {self.draw(st.integers(1, 2))}"
        if kind == "T - 1":
            return "T - 1"
        if kind == "literal":
            return str(self.draw(st.integers(1, 3)))
        if kind == "T":
            return "T"
        if self.variables >= 3:
            return "T"
        binders, _, inner = self.binders(scope, 1)
        body = self.scalar(inner, depth - 1, exact=True)
        return f"{self.pick(('argmin', 'argmax'))}_<{binders}> {body}"

    def token(self, scope: tuple[str, ...], depth: int) -> str:
        return f"x({self.position(scope, depth)})"

    def index(self) -> int:
        return self.draw(st.integers(1, self.d))

    def scalar(self, scope: tuple[str, ...], depth: int, exact: bool) -> str:
        leaves = ["number", "c", "component", "inner_w", "inner_tokens"]
        composite = ["+", "-", "*", "neg", "/2", "/-4", "^2", "relu", "abs", "min", "max", "index", "inner"]
        if not exact:
            composite += ["/3", "norm", "norm2"]
        category = self.pick(("leaf", "composite", "composite", "reduce", "reduce")) if depth > 0 else "leaf"
        kind = self.pick({"leaf": leaves, "composite": composite, "reduce": ["reduce"]}[category])
        sub = depth - 1
        if kind == "number":
            return self.pick(self.constants)
        if kind == "c":
            return "c"
        if kind == "component":
            return f"{self.token(scope, depth)}[{self.index()}]"
        if kind == "inner_w":
            return f"<{self.token(scope, depth)}, w>"
        if kind == "inner_tokens":
            return f"<{self.token(scope, depth)}, {self.token(scope, depth)}>"
        if kind in ("+", "-", "*"):
            return f"({self.scalar(scope, sub, exact)}) {kind} ({self.scalar(scope, sub, exact)})"
        if kind == "neg":
            return f"-({self.scalar(scope, sub, exact)})"
        if kind in ("/2", "/-4", "/3"):
            return f"({self.scalar(scope, sub, exact)}) / {kind[1:]}"
        if kind == "^2":
            return f"({self.scalar(scope, sub, exact)})^2"
        if kind in ("relu",):
            return f"relu({self.scalar(scope, sub, exact)})"
        if kind == "abs":
            return f"|({self.scalar(scope, sub, exact)})|"
        if kind in ("min", "max"):
            return f"{kind}({self.scalar(scope, sub, exact)}, {self.scalar(scope, sub, exact)})"
        if kind == "index":
            return f"({self.vector(scope, sub, exact)})[{self.index()}]"
        if kind == "inner":
            return f"<{self.vector(scope, sub, exact)}, {self.vector(scope, sub, exact)}>"
        if kind == "norm":
            return f"||({self.vector(scope, sub, exact)})||"
        if kind == "norm2":
            return f"||({self.vector(scope, sub, exact)})||^2"
        if self.variables >= 3:
            return f"<{self.token(scope, 0)}, w>"
        reducer = self.pick(("min", "max", "sum", "top(1)", "top(2)", "top(3)") + (("mean",) if not exact else ()))
        binders, _, inner = self.binders(scope, 2)
        return f"({reducer}_<{binders}> {self.scalar(inner, sub, exact)})"

    def vector(self, scope: tuple[str, ...], depth: int, exact: bool) -> str:
        leaves = ["token", "w"]
        composite = ["+", "-", "scale", "/2", "/-4", "neg", "matvec"] + ([] if exact else ["randn"])
        reductions = ["sum"] + ([] if exact else ["mean"])
        category = self.pick(("leaf", "composite", "composite", "reduce", "reduce")) if depth > 0 else "leaf"
        kind = self.pick({"leaf": leaves, "composite": composite, "reduce": reductions}[category])
        sub = depth - 1
        if kind == "token":
            return self.token(scope, depth)
        if kind == "w":
            return "w"
        if kind in ("+", "-"):
            return f"({self.vector(scope, sub, exact)}) {kind} ({self.vector(scope, sub, exact)})"
        if kind == "scale":
            return f"({self.scalar(scope, sub, exact)}) * ({self.vector(scope, sub, exact)})"
        if kind in ("/2", "/-4"):
            return f"({self.vector(scope, sub, exact)}) / {kind[1:]}"
        if kind == "neg":
            return f"-({self.vector(scope, sub, exact)})"
        if kind in ("matvec", "randn"):
            return f"{'M' if kind == 'matvec' else 'B'} @ ({self.vector(scope, sub, exact)})"
        if self.variables >= 3:
            return self.token(scope, 0)
        binders, _, inner = self.binders(scope, 2)
        return f"({kind}_<{binders}> {self.vector(inner, sub, exact)})"


@st.composite
def random_programs(draw: typing.Callable, constants: typing.Sequence[str] = DYADIC[:-1],
                    lengths: tuple[int, int] = (1, 5)) -> tuple[str, int]:
    """(source, T): a random well-typed program over every construct, and the length to check it at;
    its scalar literals drawn from ``constants`` (the fuzz campaign adds :data:`NON_DYADIC`)."""
    d = draw(st.integers(1, 3))
    length = draw(st.integers(*lengths))
    text = ProgramText(draw, d, constants)
    depth = draw(st.integers(1, 3))
    per_token = draw(st.booleans())
    scope = ("v",) if per_token else ()  # v: never a binder's name, so nothing shadows it
    target = text.vector(scope, depth, exact=False) if draw(st.booleans()) else text.scalar(scope, depth, exact=False)
    if per_token:
        condition = draw(st.sampled_from(["", " : v >= 2", " : v < T", " : v >= 2 and v <= T - 1", " : v != 2"]))
        target = f"(v{condition}) = {target}"
    else:
        target = f" {target}"
    w = ", ".join(draw(st.lists(st.sampled_from(DYADIC), min_size=d, max_size=d)))
    rows = ", ".join("[" + ", ".join(draw(st.lists(st.sampled_from(DYADIC), min_size=d, max_size=d))) + "]"
                     for _ in range(d))
    source = (f"input x : R^{d} in [-1, 1]\nlength T = {length}\nconst c = 0.5\nconst w : R^{d} = [{w}]\n"
              f"const M : R^{{{d} x {d}}} = [{rows}]\nconst B : R^{{{d} x {d}}} = randn(3)\ntarget{target}\n")
    return source, length
