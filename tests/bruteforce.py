"""An independent brute-force evaluator of the typed IR, for testing the reference evaluator.

It reads the checked program (``infoflow_dsl.language.typed``) and computes the target for ONE sequence
at a time with plain Python: Python floats and lists, ``math``, and nested loops over every
tuple of positions (``itertools.product``). It shares no code with ``infoflow_dsl.oracle.evaluate``
(which is vectorised torch) or ``infoflow_dsl.language.positions`` (which decides range emptiness), so
agreement between them is evidence that both implement docs/language.md's semantics:

- positions are 1-based; ``T`` is the sequence length;
- a reduction ranges over every tuple of its variables in {1..T}^k that satisfies all of its
  conditions; min / max / sum / mean over those tuples; ``top(k)`` is the k-th largest value
  counted with multiplicity (top(2) of 3, 3, 1 is 3);
- argmin / argmax pick the smallest position among those with the best score;
- a constant's ``values`` are row-major in its declared shape; ``Component.index`` is 1-based;
- a position offset ``t - 1`` is the variable's value minus 1 (``T - 1`` likewise);
- a per-token target ``target(t : cond) = e`` is ``e`` at every t = 1..T where ``cond`` holds,
  and None (NaN in the evaluator) elsewhere;
- a token program (v3) reads one number per token (its value, or its id for a categorical
  vocabulary) at any length T' ≤ T: ``len`` is T', ``T`` the compiled length, ``len + c − v``
  and ``c − v`` are positions, a position in arithmetic is its number, ``[cond]`` is 1 or 0,
  and a token output is the id at the position the target reads (:func:`evaluate_tokens_one`).

:func:`range_faults` recomputes, by enumeration, which compile-time range errors a program
has at a length T (a fixed position outside 1..T, an empty reduction range for some values of
the enclosing variables that the enclosing conditions allow, ``top(k)`` over fewer than k
tuples, an offset that reads outside 1..T), so a test can confirm that the checker refuses
exactly the programs it should.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Union

from infoflow_dsl.language import nodes
from infoflow_dsl.language import typed as ir
from infoflow_dsl.language.syntax import Span

Value = Union[float, list[float], list[list[float]]]


class EmptyRange(Exception):
    """A reduction or argmin/argmax met a range with no tuple in it."""


def compare(left: int, operator: str, right: int) -> bool:
    """``left operator right`` for two positions."""
    if operator == "!=":
        return left != right
    if operator == "==":
        return left == right
    if operator == "<":
        return left < right
    if operator == "<=":
        return left <= right
    if operator == ">":
        return left > right
    if operator == ">=":
        return left >= right
    raise ValueError(f"unknown condition operator {operator!r}")


def term_position(term: Any, env: dict[str, int], length: int, last: int | None = None) -> int:
    """The value of a position term: a variable, a literal, T (``last``, default ``length``) or
    len (``length``), plus an offset; a reflection (len or 0) + offset − v."""
    if isinstance(term, ir.PositionVariable):
        return env[term.name] + term.offset
    if isinstance(term, ir.FixedPosition):
        return term.index
    if isinstance(term, ir.LastPosition):
        return (length if last is None else last) + term.offset
    if isinstance(term, ir.RunLength):
        return length + term.offset
    if isinstance(term, ir.ReflectedPosition):
        return (length if term.from_length else 0) + term.offset - term_position(term.mirrored, env, length, last)
    raise TypeError(f"not a position term: {term!r}")


def conditions_hold(conditions: Sequence[ir.PositionCondition], env: dict[str, int], length: int,
                    last: int | None = None) -> bool:
    return all(
        compare(term_position(c.left, env, length, last), c.operator, term_position(c.right, env, length, last))
        for c in conditions
    )


class BruteForce:
    """Evaluates expressions on one sequence ``tokens`` (a list of T lists of d floats)."""

    def __init__(self, tokens: Sequence[Sequence[float]], last: int | None = None) -> None:
        self.tokens = [[float(v) for v in token] for token in tokens]
        self.length = len(self.tokens)
        self.last = self.length if last is None else last  # what T means (a token program's compiled length)
        self._free: dict[int, tuple[str, ...]] = {}
        self._memo: dict[tuple[int, tuple[int, ...]], Any] = {}
        self._keep: list[Any] = []  # the memo is keyed by id(node): keep the nodes alive

    def free_variables(self, node: Any) -> tuple[str, ...]:
        """The position variables ``node`` uses that are bound outside it, sorted."""
        key = id(node)
        if key not in self._free:
            self._keep.append(node)
            self._free[key] = tuple(sorted(free_variables(node)))
        return self._free[key]

    def memoised(self, node: Any, env: dict[str, int], compute: Any) -> Any:
        """``compute()``, cached on the values of the variables ``node`` depends on.

        Nested reductions are written side by side (``max_<t> f(t) + max_<t> g(t)`` nests the
        second in the first's body), so without this the loops would multiply; a subexpression
        is a pure function of its free variables, so caching changes no value.
        """
        key = (id(node), tuple(env[name] for name in self.free_variables(node)))
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # ------------------------------------------------------------------ positions

    def position(self, expr: Any, env: dict[str, int]) -> int:
        """A 1-based position."""
        if isinstance(expr, ir.PositionVariable | ir.FixedPosition | ir.LastPosition | ir.RunLength
                      | ir.ReflectedPosition):
            position = term_position(expr, env, self.length, self.last)
            if not 1 <= position <= self.length:
                raise IndexError(f"x({position}) with T = {self.length}")
            return position
        if isinstance(expr, ir.ArgPosition):
            return self.memoised(expr, env, lambda: self.arg_position(expr, env))
        raise TypeError(f"not a position: {expr!r}")

    def arg_position(self, expr: ir.ArgPosition, env: dict[str, int]) -> int:
        best_position = None
        best_score = 0.0
        for p in range(1, self.length + 1):  # increasing, and only a strict win replaces: ties -> smallest
            inner = {**env, expr.variable: p}
            if not conditions_hold(expr.conditions, inner, self.length, self.last):
                continue
            score = self.value(expr.body, inner)
            assert isinstance(score, float)
            better = best_position is None or (score < best_score if expr.kind == "argmin" else score > best_score)
            if better:
                best_position, best_score = p, score
        if best_position is None:
            raise EmptyRange(f"{expr.kind} over an empty range")
        return best_position

    # ------------------------------------------------------------------ values

    def value(self, expr: Any, env: dict[str, int]) -> Value:
        """A float (scalar), a list of floats (vector) or a list of rows (matrix)."""
        if isinstance(expr, ir.NumberLiteral):
            return float(expr.value)
        if isinstance(expr, ir.Constant):
            return constant_value(expr)
        if isinstance(expr, ir.Token):
            token = list(self.tokens[self.position(expr.position, env) - 1])
            return token if expr.type.shape else token[0]  # a token program's token is one number
        if isinstance(expr, ir.TokenLiteral):
            return float(expr.index)
        if isinstance(expr, ir.PositionNumber):
            if isinstance(expr.position, ir.ArgPosition):
                return float(self.position(expr.position, env))
            return float(term_position(expr.position, env, self.length, self.last))
        if isinstance(expr, ir.Compare):
            return compare(self.value(expr.left, env), expr.operator, self.value(expr.right, env))  # type: ignore
        if isinstance(expr, ir.Logical):
            left, right = self.value(expr.left, env), self.value(expr.right, env)
            return (left and right) if expr.operator == "and" else (left or right)  # type: ignore[return-value]
        if isinstance(expr, ir.Not):
            return not self.value(expr.argument, env)  # type: ignore[return-value]
        if isinstance(expr, ir.Bracket):
            return 1.0 if self.value(expr.condition, env) else 0.0
        if isinstance(expr, ir.Component):
            vector = self.value(expr.vector, env)
            return vector[expr.index - 1]  # type: ignore[index,return-value]
        if isinstance(expr, ir.Inner):
            left, right = self.value(expr.left, env), self.value(expr.right, env)
            total = 0.0
            for a, b in zip(left, right, strict=True):  # type: ignore[arg-type]
                total += a * b
            return total
        if isinstance(expr, ir.Norm):
            total = 0.0
            for a in self.value(expr.argument, env):  # type: ignore[union-attr]
                total += a * a
            return math.sqrt(total)
        if isinstance(expr, ir.Square):
            a = self.value(expr.argument, env)
            return a * a  # type: ignore[operator]
        if isinstance(expr, ir.Pointwise):
            arguments = [self.value(a, env) for a in expr.arguments]
            if expr.function == "relu":
                return arguments[0] if arguments[0] > 0.0 else 0.0  # type: ignore[operator,return-value]
            if expr.function == "abs":
                return abs(arguments[0])  # type: ignore[arg-type]
            if expr.function == "min":
                return arguments[0] if arguments[0] <= arguments[1] else arguments[1]  # type: ignore[operator]
            if expr.function == "max":
                return arguments[0] if arguments[0] >= arguments[1] else arguments[1]  # type: ignore[operator]
            if expr.function == "sqrt":  # not in the language; later stages' rewrites introduce it
                return math.sqrt(arguments[0])  # type: ignore[arg-type]
            raise ValueError(f"unknown pointwise function {expr.function!r}")
        if isinstance(expr, ir.Arithmetic):
            return arithmetic(expr.operator, self.value(expr.left, env), self.value(expr.right, env))
        if isinstance(expr, ir.Negate):
            return scale(-1.0, self.value(expr.argument, env))
        if isinstance(expr, ir.Divide):
            numerator = self.value(expr.numerator, env)
            if isinstance(numerator, list):
                return [a / expr.divisor for a in numerator]  # type: ignore[operator]
            return numerator / expr.divisor
        if isinstance(expr, ir.MatVec):
            rows = constant_value(expr.matrix)
            vector = self.value(expr.vector, env)
            out = []
            for row in rows:  # type: ignore[union-attr]
                total = 0.0
                for a, b in zip(row, vector, strict=True):  # type: ignore[arg-type]
                    total += a * b
                out.append(total)
            return out
        if isinstance(expr, ir.Reduce):
            return self.memoised(expr, env, lambda: self.reduce(expr, env))
        if isinstance(expr, ir.TableLookup):
            key = [self.value(a, env) for a in expr.arguments]
            for index, entry in enumerate(expr.table.keys):
                if all(a == k for a, k in zip(key, entry, strict=True)):
                    return expr.table.values[index]
            assert expr.table.default is not None, f"{expr.table.name} has no entry for {key}"
            return expr.table.default
        raise TypeError(f"not a value expression: {type(expr).__name__}")

    def reduce(self, expr: ir.Reduce, env: dict[str, int]) -> Value:
        values: list[Value] = []
        for positions in itertools.product(range(1, self.length + 1), repeat=len(expr.variables)):
            inner = {**env, **dict(zip(expr.variables, positions, strict=True))}
            if conditions_hold(expr.conditions, inner, self.length, self.last):
                values.append(self.value(expr.body, inner))
        if not values:
            raise EmptyRange(f"{expr.kind} over an empty range")
        if expr.kind == "min":
            best = values[0]
            for v in values[1:]:
                if v < best:  # type: ignore[operator]
                    best = v
            return best
        if expr.kind == "max":
            best = values[0]
            for v in values[1:]:
                if v > best:  # type: ignore[operator]
                    best = v
            return best
        if expr.kind in ("sum", "mean"):
            total = values[0]
            for v in values[1:]:
                total = arithmetic("+", total, v)
            return total if expr.kind == "sum" else divide(total, len(values))
        if expr.kind == "top":
            assert expr.rank is not None
            if expr.rank > len(values):
                raise EmptyRange(f"top({expr.rank}) over {len(values)} tuples")
            ordered = sorted(values, reverse=True)  # type: ignore[type-var]
            return ordered[expr.rank - 1]
        raise ValueError(f"unknown reduction {expr.kind!r}")


def constant_value(constant: ir.Constant) -> Value:
    """A constant's entries in its declared shape (row-major)."""
    values = [float(v) for v in constant.values]
    shape = constant.type.shape
    if constant.type.kind == "scalar":
        assert len(values) == 1
        return values[0]
    if constant.type.kind == "vector":
        assert len(values) == shape[0]
        return values
    rows, columns = shape
    assert len(values) == rows * columns
    return [values[i * columns:(i + 1) * columns] for i in range(rows)]


def scale(factor: float, value: Value) -> Value:
    if isinstance(value, list):
        return [factor * a for a in value]  # type: ignore[operator]
    return factor * value


def divide(value: Value, divisor: float) -> Value:
    if isinstance(value, list):
        return [a / divisor for a in value]  # type: ignore[operator]
    return value / divisor


def arithmetic(operator: str, left: Value, right: Value) -> Value:
    """``left op right``: elementwise + and - for equal shapes, * with at least one scalar."""
    if operator == "*":
        if isinstance(left, list) and isinstance(right, list):
            raise TypeError("'*' of two vectors")
        if isinstance(left, list):
            return [a * right for a in left]  # type: ignore[operator]
        if isinstance(right, list):
            return [left * b for b in right]  # type: ignore[operator]
        return left * right
    if isinstance(left, list) != isinstance(right, list):
        raise TypeError(f"'{operator}' of a scalar and a vector")
    if isinstance(left, list):
        assert isinstance(right, list) and len(left) == len(right)
        if operator == "+":
            return [a + b for a, b in zip(left, right, strict=True)]  # type: ignore[operator]
        return [a - b for a, b in zip(left, right, strict=True)]  # type: ignore[operator]
    if operator == "+":
        return left + right  # type: ignore[operator]
    if operator == "-":
        return left - right  # type: ignore[operator]
    raise ValueError(f"unknown operator {operator!r}")


def evaluate_one(program: ir.Program, tokens: Sequence[Sequence[float]]) -> Value:
    """The target on one sequence of T tokens: a float, or a list of floats for a vector target;
    for a per-token target, a list over t = 1..T of those, None where its condition fails."""
    if any(len(token) != program.dimension for token in tokens):
        raise ValueError("token of the wrong dimension")
    force = BruteForce(tokens)
    if program.token_variable is None:
        return force.value(program.target, {})
    out: list[Any] = []
    for t in range(1, len(tokens) + 1):
        env = {program.token_variable: t}
        defined = conditions_hold(program.token_conditions, env, len(tokens))
        out.append(force.value(program.target, env) if defined else None)
    return out


def evaluate_tokens_one(program: ir.Program, ids: Sequence[int]) -> Any:
    """A token program on one sequence of token ids (any length 1..T): as :func:`evaluate_one`,
    and for a token output the id at the position the target reads (None where undefined)."""
    vocabulary = program.vocabulary
    assert vocabulary is not None
    numbers = [float(i) if vocabulary.values is None else vocabulary.values[i] for i in ids]
    force = BruteForce([[n] for n in numbers], last=program.length)
    length = len(ids)

    def at(env: dict[str, int]) -> Any:
        if program.token_output:
            return ids[force.position(program.target.position, env) - 1]  # type: ignore[attr-defined]
        return force.value(program.target, env)

    if program.token_variable is None:
        return at({})
    return [at({program.token_variable: t})
            if conditions_hold(program.token_conditions, {program.token_variable: t}, length, program.length) else None
            for t in range(1, length + 1)]


def evaluate_batch(program: ir.Program, batch: Any) -> list[Value]:
    """``evaluate_one`` on each sequence of a (B, T, d) batch (anything with ``.tolist()`` or lists)."""
    rows = batch.tolist() if hasattr(batch, "tolist") else batch
    return [evaluate_one(program, sequence) for sequence in rows]


# ----------------------------------------------------------------------------- the typed tree


def children(node: Any) -> Iterator[Any]:
    """The typed-IR nodes directly below ``node`` (expressions, conditions, position terms)."""
    for f in fields(node):
        if f.name in ("span", "type"):
            continue
        value = getattr(node, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if is_dataclass(item) and type(item).__module__ == nodes.__name__:
                yield item


def free_variables(node: Any) -> set[str]:
    """The position variables used in ``node`` (conditions included) and not bound inside it."""
    if isinstance(node, ir.PositionVariable):
        return {node.name}
    used: set[str] = set()
    for child in children(node):
        used |= free_variables(child)
    if isinstance(node, ir.Reduce):
        used -= set(node.variables)
    elif isinstance(node, ir.ArgPosition):
        used.discard(node.variable)
    return used


def walk(node: Any) -> Iterator[Any]:
    """``node`` and every typed-IR node below it, depth first."""
    yield node
    for child in children(node):
        yield from walk(child)


# ----------------------------------------------------------------------------- range faults


@dataclass(frozen=True)
class Fault:
    """A compile-time range error at length T.

    ``kind``: "position" (a literal x(k) or x(T − k) outside 1..T), "empty" (a reduction or
    argmin/argmax whose range is empty for some values of the enclosing variables that the
    enclosing conditions allow), "top" (``top(k)`` whose range can have fewer than k tuples),
    "offset" (x(t ± k) outside 1..T for some allowed values) or "target" (a per-token target
    defined at no position). ``smallest`` is the smallest range size over the allowed values
    of the enclosing variables (for "empty"/"top"), ``enclosing`` the enclosing variables,
    outermost first, and ``conditions`` the enclosing conditions.
    """

    kind: str
    span: Span
    smallest: int = 0
    enclosing: tuple[str, ...] = ()
    node: Any = field(default=None, compare=False, repr=False)
    conditions: tuple[Any, ...] = field(default=(), compare=False, repr=False)


def range_size(node: Any, assignment: dict[str, int], length: int) -> int:
    """How many tuples of ``node``'s own variables satisfy its conditions, given the enclosing values."""
    variables = node.variables if isinstance(node, ir.Reduce) else (node.variable,)
    count = 0
    for positions in itertools.product(range(1, length + 1), repeat=len(variables)):
        env = {**assignment, **dict(zip(variables, positions, strict=True))}
        if conditions_hold(node.conditions, env, length):
            count += 1
    return count


def _mentioned(conditions: Sequence[Any]) -> set[str]:
    return {t.name for c in conditions for t in (c.left, c.right) if isinstance(t, ir.PositionVariable)}


def allowed_assignments(enclosing: Sequence[str], conditions: Sequence[Any], length: int,
                        fixed: dict[str, int] | None = None, also: Sequence[Any] = ()) -> Iterator[dict[str, int]]:
    """Every value in 1..T of each enclosing variable not in ``fixed`` that ``also`` or
    ``conditions`` mention, such that the enclosing ``conditions`` hold."""
    fixed = dict(fixed or {})
    mentioned = _mentioned([*conditions, *also])
    free = [name for name in enclosing if name not in fixed and name in mentioned]
    for values in itertools.product(range(1, length + 1), repeat=len(free)):
        env = {**fixed, **dict(zip(free, values, strict=True))}
        if all(_holds_where_known(c, env, length) for c in conditions):
            yield env


def _holds_where_known(condition: Any, env: dict[str, int], length: int) -> bool:
    """A condition over the variables in ``env`` (one naming another variable holds for some value of it)."""
    names = _mentioned([condition])
    if not names <= set(env):
        return True
    return conditions_hold([condition], env, length)


def smallest_range_size(node: Any, enclosing: Sequence[str], length: int, fixed: dict[str, int] | None = None,
                        conditions: Sequence[Any] = ()) -> int:
    """The smallest ``range_size`` over every value in 1..T of each enclosing variable not in
    ``fixed`` that the enclosing ``conditions`` allow (a large number when they allow none)."""
    sizes = [range_size(node, env, length)
             for env in allowed_assignments(enclosing, conditions, length, fixed, node.conditions)]
    return min(sizes, default=1 << 30)


def range_faults(program: ir.Program, length: int) -> list[Fault]:
    """Every compile-time range error of ``program``'s target at length ``length``, by enumeration.

    As README.md decides, an empty range is an error when it is empty for *some* values of the
    enclosing variables (each in 1..T) that the enclosing conditions allow; an offset is an
    error when it leaves 1..T for some such values.
    """
    faults: list[Fault] = []

    def visit(node: Any, enclosing: tuple[str, ...], conditions: tuple[Any, ...]) -> None:
        if isinstance(node, ir.Token):
            position = node.position
            if isinstance(position, ir.FixedPosition) and not 1 <= position.index <= length:
                faults.append(Fault("position", position.span, node=node))
            if isinstance(position, ir.LastPosition) and not 1 <= length + position.offset <= length:
                faults.append(Fault("position", position.span, node=node))
            if isinstance(position, ir.PositionVariable) and position.offset:
                reads = [position]
                outside = [env for env in allowed_assignments(enclosing, conditions, length, also=_fake(reads))
                           if not 1 <= env[position.name] + position.offset <= length]
                if outside:
                    faults.append(Fault("offset", position.span, 0, enclosing, node, conditions))
        if isinstance(node, ir.Reduce | ir.ArgPosition):
            smallest = smallest_range_size(node, enclosing, length, conditions=conditions)
            if smallest == 0:
                faults.append(Fault("empty", node.span, 0, enclosing, node, conditions))
            elif isinstance(node, ir.Reduce) and node.kind == "top" and node.rank > smallest:  # type: ignore[operator]
                faults.append(Fault("top", node.span, smallest, enclosing, node, conditions))
            variables = node.variables if isinstance(node, ir.Reduce) else (node.variable,)
            inner = conditions + tuple(node.conditions)
            visit(node.body, enclosing + tuple(variables), inner)
            return
        for child in children(node):
            if not isinstance(child, ir.PositionCondition):
                visit(child, enclosing, conditions)

    if program.token_variable is None:
        visit(program.target, (), ())
        return faults
    token = program.token_variable
    defined = [t for t in range(1, length + 1) if conditions_hold(program.token_conditions, {token: t}, length)]
    if not defined:
        return [Fault("target", Span(0, 0, 0, 0), 0, (token,))]
    visit(program.target, (token,), tuple(program.token_conditions))
    return faults


def _fake(positions: Sequence[ir.PositionVariable]) -> list[ir.PositionCondition]:
    """Conditions that only mention ``positions``' variables (so assignments range over them)."""
    return [ir.PositionCondition(p.base, "==", p.base) for p in positions]
