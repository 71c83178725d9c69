"""``analyze``: what a researcher learns about a target before anything is trained.

:func:`analyze` runs the comparisons and schedule stages and gathers their results in an
:class:`AnalysisReport`: the comparison tree, the order β′ and dimension β₁ of comparison,
the number of comparisons, the InfoFlow schedule (layers × heads, what each head compares),
the information sets, the predicted cost law and the verdict with its reason.

JSON (``to_json``) has docs/design.md's keys ("The command line"): ``order``, ``dimension``, ``comparisons``,
``layers``, ``heads``, ``info_sets``, ``cost``, ``verdict``, ``reason``; and also ``program``,
``T``, ``d``, ``tree``, ``schedule``, ``notes``, ``heads_budget``, ``undefined_in_rasp`` (only
for a program translated from RASP that has such places: where RASP's evaluator has no output
the model gives). ``cost.exponent`` is the
exponent of 1/ε as a number when it does not depend on T (efficient targets), else null, with
``cost.exponent_formula`` always the formula; ``cost.roots_at_zero`` lists the norms whose square
can be 0 on the domain (each makes the exponent 1: see ``ranges``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..language import typed as ir
from ..language.printer import describe
from ..language.syntax import Span
from .causality import is_causal
from .comparisons import ComparisonTree
from .growth import t_growth
from .ranges import RootAtZero
from .schedule import Schedule, build_schedule, square_steps
from .token_costs import exactness, finite_ranks, token_growth
from .tree import build_tree

KEYS_SHOWN = 6  # the key features analyze's text lists per head (the JSON has them all)
TOKEN_ROUTE = "a token program compiles exactly by the token lowering (compiler.tokens), not the gather route"
INFOFLOW_UPPER_BOUND = "O(ε^-1)"
BUDGET_ONLY = ("the target is efficient without a head budget: --heads asks analyze whether that budget suffices, "
               "and compile builds the schedule's own heads (no route unrolls anything for it)")


def gather_applies(program: ir.Program, schedule: Schedule) -> bool:
    """Is compile's gather route the fallback of this analysis: a program over vectors with a
    problem other than a head budget (a budget is analyze's question; compile ignores it)?"""
    return not program.over_tokens and any(p.kind != "heads" for p in schedule.problems)


def _refused_fallback(why: str) -> dict[str, Any]:
    """The fallback entry of a target no gather route applies to, with why."""
    return {"route": "gather", "law": None, "exponent_T": None, "law_wide": None, "exponent_T_wide": None,
            "parameters_at_eps_1e-2": None, "refused": why}


def _span_json(span: Span | None) -> dict[str, int] | None:
    if span is None:
        return None
    return {"line": span.line, "column": span.column, "end_line": span.end_line, "end_column": span.end_column}


@dataclass(frozen=True)
class AnalysisReport:
    """The analysis of one program (what ``infoflowc analyze`` prints)."""

    program: ir.Program
    tree: ComparisonTree
    schedule: Schedule
    roots_at_zero: tuple[RootAtZero, ...] = ()
    #: the gather route's size for the fallback: {"parameters_at_eps_1e-2": n, "refused": None} or
    #: {..: None, "refused": why}; measured by whoever builds models (``pipeline.analyzing.analyze``), not here
    gather_size: dict[str, Any] | None = None

    @property
    def verdict(self) -> str:
        return self.schedule.verdict

    @property
    def order(self) -> int:
        return self.tree.order

    @property
    def dimension(self) -> int:
        return self.schedule.dimension

    @property
    def layers(self) -> int:
        return self.schedule.layers

    @property
    def heads(self) -> list[int]:
        return list(self.schedule.heads_per_layer)

    def cost(self) -> dict[str, Any]:
        problems = self.schedule.problems
        roots = [{"norm": r.expression, "span": _span_json(r.span)} for r in self.roots_at_zero]
        if problems:
            worst = problems[0]
            return {"law": worst.law, "exponent": None, "exponent_formula": worst.exponent,
                    "interpolated_functions": self.schedule.interpolated_functions, "roots_at_zero": roots,
                    "infoflow_upper_bound": None, "independent_of_T": False, "fallback": self.fallback()}
        functions = self.schedule.interpolated_functions
        if self.program.over_tokens:  # compiler.tokens: exact constructions on finite values
            law, exponent, formula = ("O(1) in ε: exact (every value is finite: steps narrower than their gaps, "
                                      "β from the gaps; the bound is softmax tails below 1e-9 plus rounding)", 0.0, "0")
        elif self.roots_at_zero:
            law, exponent, formula = f"O({functions}·ε^-1): a norm that can be 0 turns an error δ into √δ", 1.0, "1"
        elif functions:
            law, exponent, formula = f"O({functions}·ε^-1/2)", 0.5, "1/2"
        else:
            law, exponent, formula = "O(1): every step is exact or sharpened by β alone", 0.0, "0"
        growth = (*t_growth(self.program.target), *token_growth(self.program, self.schedule))
        ranks = finite_ranks(self.schedule)
        if ranks:
            law += "; score ranks " + ", ".join(f"{r['node']} {r['rank']} ({'~T' if r['grows_with_T'] else 'V'})"
                                                for r in ranks) + " (a head's key dimension is its score's rank)"
        cost = {"law": law, "exponent": exponent, "exponent_formula": formula,
                "interpolated_functions": functions,
                "roots_at_zero": roots,
                "infoflow_upper_bound": INFOFLOW_UPPER_BOUND, "independent_of_T": not growth,
                "T_exponent": max((g.exponent for g in growth), default=0),
                "T_growth": [{"function": g.function, "span": _span_json(g.span), "exponent": g.exponent,
                              "reason": g.reason} for g in growth],
                "routes": self.routes(law)}
        if self.program.over_tokens:
            cost["finite_ranks"] = ranks
        return cost

    def routes(self, wide_law: str) -> dict[str, dict[str, Any]]:
        """The cost law and layer count of each square route (``--ffn``; see ``approximations``).

        wide: one FFN layer per square, units ~ ε^(-1/2) per function, the schedule's L layers.
        deep: m = ⌈log₄(R²/e)⌉ − 1 tent levels per square (R its input's range, e its share of ε),
        2 units and one attention-free layer each: units O(F·log(1/ε)), layers ≤ L + S·(m − 1),
        S the most squares in a row on a path (``schedule.square_steps``). A √ stays wide, so a
        norm that can be 0 keeps its ε^-1 under every route.
        """
        functions = self.schedule.interpolated_functions
        layers = self.schedule.layers
        steps = square_steps(self.tree)
        roots = " (a √ of a norm that can be 0 stays wide: O(ε^-1))" if self.roots_at_zero else ""
        return {
            "wide": {"law": wide_law, "layers": layers},
            "deep": {"law": f"O({functions}·log(1/ε)) units, O({steps}·log(1/ε)) extra layers{roots}",
                     "layers": f"≤ {layers} + {steps}·(m − 1), m = ⌈log₄(R²/e)⌉ − 1 tent levels per square",
                     "square_steps": steps, "base_layers": layers},
            "auto": {"law": "per function the route with fewer nonzero parameters at its share of ε",
                     "layers": f"between {layers} and the deep count"},
        }

    def fallback(self) -> dict[str, Any]:
        """compile --allow-inefficient's gather route (``unroll``): its cost law in T and ε, and its
        nonzero parameter count at the program's T and ε = 1e-2 (or why it is refused)."""
        from .gather import UnrollError, gather

        if self.program.over_tokens:
            return _refused_fallback(TOKEN_ROUTE)
        if not gather_applies(self.program, self.schedule):
            return _refused_fallback(BUDGET_ONLY)
        try:
            gathered = gather(self.program)
        except UnrollError as error:
            return _refused_fallback(str(error))
        k, unrolled = len(gathered.unrolled), ", ".join(gathered.unrolled)
        rewritten = dataclasses.replace(self.program, target=gathered.target)
        tree = build_tree(rewritten, gathered=True)
        functions = build_schedule(tree, None, self.program.margin).interpolated_functions
        if functions:
            # T^k slots, each with F functions; the error budget is shared by all T^k slots' sources
            # (a linear bound cannot take the max over slots), so each share shrinks like ε/T^k. One
            # wide layer pays (T^k/ε)^e per function: T^(k(1+e)) in all; the deep route pays
            # log(T^k/ε) per square, and auto (compile's default here) the cheaper of the two per
            # function: at most T^k·log(T^k/ε), exponent k up to the logarithm
            e = 1.0 if self.roots_at_zero else 0.5
            wide_exponent = k * (1 + e)
            slots = f"{unrolled} unrolled into T position slots (k = {k}), each with {functions} interpolated functions"
            law = (f"O(T^{k}·log(T^{k}/ε)) with --ffn auto (the default): {slots} whose error shares shrink like "
                   f"T^-{k}, each square by tent maps in O(log(T^{k}/ε)) units")
            wide_law = f"O(T^{wide_exponent:g}·ε^-{e:g}) with --ffn wide: {slots}, (T^{k}/ε)^{e:g} units each"
            exponent = float(k)
        else:
            exponent = wide_exponent = float(k)
            law = f"O(T^{k}): {unrolled} unrolled into T position slots (k = {k}); every step exact or sharpened by β"
            wide_law = law
        tail = f", plus O(T^{k}) exact min/max units in O(k·log T) layers"
        entry: dict[str, Any] = {"route": "gather", "unrolled": list(gathered.unrolled), "law": law + tail,
                                 "exponent_T": exponent, "law_wide": wide_law + tail,
                                 "exponent_T_wide": wide_exponent, "parameters_at_eps_1e-2": None, "refused": None}
        entry.update(self.gather_size or {})
        return entry

    def reason(self) -> dict[str, Any] | None:
        if not self.schedule.problems:
            return None
        problem = self.schedule.problems[0]
        return {"kind": problem.kind, "node": problem.node, "message": problem.message,
                "span": _span_json(problem.span), "law": problem.law}

    def to_dict(self) -> dict[str, Any]:
        tree = self.tree
        return {
            "program": Path(self.program.path).name,
            "T": self.program.length,
            "d": self.program.dimension,
            "order": tree.order,
            "dimension": self.schedule.dimension,
            "comparisons": {
                "polynomial": tree.comparisons_text,
                "coefficients": [str(c) for c in tree.comparisons],
                "value": tree.comparisons_at_length,
                "T": self.program.length,
            },
            "layers": self.schedule.layers,
            "heads": self.heads,
            "heads_budget": list(self.schedule.budget) if self.schedule.budget is not None else None,
            "info_sets": [{"layer": 0, "token": ["t"], "readout": ["T+1"]}] + [
                {"layer": s.layer, "token": list(s.token), "readout": list(s.readout)} for s in self.schedule.info_sets
            ],
            "cost": self.cost(),
            "verdict": self.verdict,
            "reason": self.reason(),
            "tree": [
                {"name": n.name, "kind": n.kind, "variables": list(n.variables), "context": list(n.context),
                 "order": n.order, "site": n.site, "conditions": n.header, "body": describe(n.body),
                 "children": list(n.children), "origin": n.origin, "span": _span_json(n.span),
                 "comparisons": {"polynomial": _poly(n.count), "value": n.count_at_length}}
                for n in tree.nodes
            ],
            "schedule": [
                {"head": h.name, "layer": h.layer, "kind": h.kind, "site": h.site, "compares": h.compares,
                 "query_features": list(h.query_features), "key_features": list(h.key_features),
                 "mask": h.mask, "dimension": h.dimension}
                for h in self.schedule.heads
            ],
            "notes": list(self.schedule.notes),
            **({"undefined_in_rasp": list(self.program.undefined_in_rasp)} if self.program.undefined_in_rasp else {}),
            "output": tree.output_site,
            "causal": is_causal(self.program),
            "output_expression": describe(tree.output),
            "defined_at": self._defined_at(),
            **({"exactness": exactness(self.program, tree)} if self.program.over_tokens else {}),
        }

    def _defined_at(self) -> str:
        """Where the output is read: ``readout``, ``every t`` or ``t where <conditions>``."""
        if not self.program.per_token:
            return "readout"
        conditions = self.program.token_conditions
        if not conditions:
            return f"every {self.program.token_variable}"
        text = " and ".join(f"{describe(c.left)} {c.operator} {describe(c.right)}" for c in conditions)
        return f"{self.program.token_variable} where {text}"

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def to_text(self) -> str:
        return render_text(self)


def _poly(coefficients: Sequence[Any]) -> str:
    from ..language.positions import format_polynomial

    return format_polynomial(coefficients)


# ----------------------------------------------------------------------------- text


def _where(report: AnalysisReport, span: dict[str, int] | None) -> str:
    """``file:line:column: `` of a span in the report's JSON form (empty without one)."""
    return f"{report.program.path}:{span['line']}:{span['column']}: " if span else ""


def render_text(report: AnalysisReport) -> str:
    data = report.to_dict()
    lines = [f"{data['program']}: T = {data['T']}, d = {data['d']}", ""]
    lines.append("comparison tree")
    lines.extend(_tree_lines(report.tree))
    if not report.tree.nodes:
        lines.append("  (no comparisons: the target reads fixed positions and offsets only)")
    if data["output"] == "token":
        causal = "causal" if data["causal"] else "not causal (it reads positions after t)"
        lines.append(f"  output at every token ({data['defined_at']}; {causal}): {data['output_expression']}")
    else:
        lines.append(f"  output at the readout: {data['output_expression']}")
    lines.append("")
    lines.append(f"order of comparison β′   {data['order']}")
    lines.append(f"dimension of comparison β₁  {data['dimension']}")
    comparisons = data["comparisons"]
    lines.append(f"number of comparisons    {comparisons['polynomial']}  (= {comparisons['value']} at T = {data['T']})")
    lines.append("")
    budget = f"  (budget {','.join(map(str, data['heads_budget']))})" if data["heads_budget"] else ""
    lines.append(f"schedule: {data['layers']} layer(s), heads per layer {data['heads']}{budget}")
    lines.append(f"  {'layer':<6}{'head':<6}{'kind':<17}{'site':<9}compares")
    for head in sorted(data["schedule"], key=lambda h: (h["layer"], h["head"])):
        mask = f"   [mask {head['mask']}]" if head["mask"] else ""
        row = f"{head['layer']:<6}{head['head']:<6}{head['kind']:<17}{head['site']:<9}"
        lines.append(f"  {row}{head['compares']}{mask}")
        if head["key_features"]:
            keys = head["key_features"]
            shown = ", ".join(keys[:KEYS_SHOWN]) + (f", … ({len(keys) - KEYS_SHOWN} more: --json lists them)"
                                                     if len(keys) > KEYS_SHOWN else "")
            count = f"{len(keys)}" if len(keys) == head["dimension"] else \
                f"{len(keys)}, head dimension {head['dimension']}: those with a constant query side share one"
            lines.append(f"  {'':<38}keys ({count}): {shown}")
    lines.append("")
    lines.append("information sets")
    for entry in data["info_sets"]:
        layer = entry["layer"]
        lines.append(f"  I(t, {layer}) = {{{', '.join(entry['token'])}}}    "
                     f"I(T+1, {layer}) = {{{', '.join(entry['readout'])}}}")
    lines.append("")
    cost = data["cost"]
    lines.append(f"cost law  {cost['law']}")
    if cost["infoflow_upper_bound"] and cost["independent_of_T"]:
        lines.append(f"          InfoFlow's upper bound: {cost['infoflow_upper_bound']}; parameters do not grow with T")
    elif cost["infoflow_upper_bound"]:
        lines.append(f"          InfoFlow's upper bound: {cost['infoflow_upper_bound']} at each T; parameters grow "
                     f"with T as T^{cost['T_exponent']:g} (wide route; the deep route pays log T instead):")
        for growth in cost["T_growth"]:
            lines.append(f"          {_where(report, growth['span'])}{growth['function']}: {growth['reason']}")
    for root in cost["roots_at_zero"]:
        lines.append(f"          {_where(report, root['span'])}{root['norm']} can be 0, "
                     "so the squares under its √ must be within (ε/2)²")
    for note in data["notes"]:
        lines.append(f"note      {note}")
    for where in data.get("undefined_in_rasp", []):
        lines.append(f"RASP      undefined: {where}")
    for entry in (data.get("exactness") or {}).get("comparisons", []):
        gap = f"smallest gap {entry['gap']}" if entry["gap"] is not None else "no gap derivable (a margin is needed)"
        lines.append(f"exact     {_where(report, entry['span'])}{entry['comparison']}: {gap}")
    lines.append("")
    lines.append(f"verdict   {data['verdict']}")
    reason = data["reason"]
    if reason:
        lines.append(f"reason    {_where(report, reason['span'])}{reason['message']}")
        lines.append(f"          {reason['law']}")
        fallback = data["cost"].get("fallback")
        if fallback:
            lines.append(f"fallback  compile --allow-inefficient: {fallback['law'] or 'no gather route'}")
            if fallback["law_wide"] and fallback["law_wide"] != fallback["law"]:
                lines.append(f"          {fallback['law_wide']}")
            if fallback["refused"]:
                lines.append(f"          refused at ε = 1e-2: {fallback['refused']}")
            else:
                lines.append(f"          {fallback['parameters_at_eps_1e-2']:,} nonzero parameters at ε = 1e-2, "
                             f"T = {data['T']}")
    return "\n".join(lines) + "\n"


def _tree_lines(tree: ComparisonTree) -> list[str]:
    parents = {child for node in tree.nodes for child in node.children}
    roots = [n for n in tree.nodes if n.name not in parents]
    lines: list[str] = []

    def visit(name: str, depth: int) -> None:
        node = tree.node(name)
        context = ", ".join(node.context) or "—"
        lines.append(f"  {'  ' * depth}{node.name}: {node.header} {describe(node.body)}"
                     f"    [context {context}; order {node.order}; {_poly(node.count)} comparisons; {node.site}]")
        for child in node.children:
            visit(child, depth + 1)

    for root in roots:
        visit(root.name, 0)
    return lines
