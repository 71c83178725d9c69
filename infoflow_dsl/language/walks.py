"""Walks over the typed IR (:mod:`.nodes`): a node's children, its free position variables
(remembered by each node), a copy with each child mapped, renaming a free variable, and every
node below one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .nodes import ArgPosition, PositionVariable, Reduce, ValueType
from .syntax import Span


def children(node: object) -> list[object]:
    """The typed sub-nodes of ``node``: its fields and tuple items that are nodes (not spans or types)."""
    out: list[object] = []
    for name in getattr(node, "__dataclass_fields__", {}):
        if name in ("span", "type"):
            continue
        value = getattr(node, name)
        for item in value if isinstance(value, tuple) else (value,):
            if hasattr(item, "__dataclass_fields__") and not isinstance(item, Span | ValueType):
                out.append(item)
    return out


def free_variables(node: object) -> set[str]:
    """The position variables ``node`` reads and does not bind itself (a later stage's leaf that
    stands for a value at some positions, such as a comparison node's result, names them in its
    ``context_variables``)."""
    return set(_free(node))


def _free(node: object) -> frozenset[str]:
    """:func:`free_variables`, remembered by each typed node."""
    remembered = getattr(type(node), "typed_node", False)
    if remembered and "_free" in node.__dict__:
        return frozenset(node.__dict__["_free"])
    if isinstance(node, PositionVariable):
        names = frozenset({node.name})
    elif (context := getattr(node, "context_variables", None)) is not None:
        names = frozenset(context)
    else:
        names = frozenset().union(*(_free(child) for child in children(node)))
        if isinstance(node, Reduce):
            names -= set(node.variables)
        elif isinstance(node, ArgPosition):
            names -= {node.variable}
    if remembered:
        object.__setattr__(node, "_free", names)
    return names


#: any typed node (a dataclass of this module, or a later stage's leaf such as a comparison result)
NodeT = TypeVar("NodeT")


def _is_node(value: object) -> bool:
    return hasattr(value, "__dataclass_fields__") and not isinstance(value, Span | ValueType)


def map_children(expr: NodeT, function: Callable[[Any], object]) -> NodeT:
    """A copy of a typed node with ``function`` applied to each typed child."""
    changes: dict[str, object] = {}
    for name in getattr(expr, "__dataclass_fields__", {}):
        if name in ("span", "type"):
            continue
        value = getattr(expr, name)
        if isinstance(value, tuple):
            mapped = tuple(function(v) if _is_node(v) else v for v in value)
            if mapped != value:
                changes[name] = mapped
        elif _is_node(value):
            changes[name] = function(value)
    return dataclasses.replace(expr, **changes) if changes else expr  # type: ignore[type-var]  # any dataclass node


def rename(expr: NodeT, old: str, new: str, offset: int = 0,
           memo: dict[int, tuple[object, object]] | None = None) -> NodeT:
    """``expr`` with the free position variable ``old`` read as ``new + offset``. ``memo`` (by
    node id, the node kept beside its form) remembers every subtree's renamed form, for a caller
    that renames the same trees and their subtrees again and again with the same names."""
    if memo is not None and (known := memo.get(id(expr))) is not None and known[0] is expr:
        return known[1]  # type: ignore[return-value]
    form: object
    if isinstance(expr, PositionVariable):
        form = dataclasses.replace(expr, name=new, offset=expr.offset + offset) if expr.name == old else expr
    elif ((getattr(type(expr), "typed_node", False) and old not in _free(expr))
          or (isinstance(expr, Reduce) and old in expr.variables)
          or (isinstance(expr, ArgPosition) and expr.variable == old)):
        form = expr  # nothing free to rename below (a typed node's free variables are its children's)
    else:
        form = map_children(expr, lambda child: rename(child, old, new, offset, memo))
    if memo is not None:
        memo[id(expr)] = (expr, form)
    return form


def sub_nodes(expr: object) -> Iterator[object]:
    """Every typed node below ``expr`` (not ``expr`` itself), conditions included, parents first."""
    for item in children(expr):
        yield item
        yield from sub_nodes(item)
