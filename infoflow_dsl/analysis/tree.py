"""Stage 2, the comparison tree of a checked program (:func:`build_tree`): the target's
comparisons extracted (:mod:`.comparisons`) and, for a token program, every node's finite value
set recorded (:mod:`.finite`), which the token lowering and the exactness argument read."""

from __future__ import annotations

import dataclasses

from ..language import typed as ir
from .comparisons import ComparisonTree, TreeBuilder
from .finite import finite_domain, tree_value_sets
from .normalise import all_variables, normalise


def build_tree(program: ir.Program, gathered: bool = False) -> ComparisonTree:
    """The comparison tree of a checked program. A per-token target's expression is extracted
    with its position variable t as the enclosing context (and its conditions around every
    node), so its nodes run at the token site and ``output`` is read at every token."""
    taken = all_variables(program.target)
    target = normalise(program.target, taken)
    builder = TreeBuilder(program.length, taken, at_tokens=program.per_token, gathered=gathered,
                          source=program.source)
    if program.per_token:
        output = builder.extract(target, program.output_scope, program.token_conditions)
    else:
        output = builder.extract(target, (), ())
    site = "token" if program.per_token else "readout"
    tree = ComparisonTree(tuple(builder.nodes), output, program.length, site, gathered)
    if program.over_tokens:  # every value is in a finite set: value sets of the nodes' results
        tree = dataclasses.replace(tree, finite=tree_value_sets(tree, finite_domain(program)))  # type: ignore[arg-type]
    return tree
