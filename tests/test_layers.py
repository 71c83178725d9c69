"""The house's layers: every import of the package goes down, and no two files import each other
round a circle, at run time (an import inside a function counts; one under ``TYPE_CHECKING``
does not, since it never runs), nor even for typing: no file needs, for its type hints alone, a
module that imports it (a callee states the narrow interface it reads of its caller instead).

:data:`LAYERS` is the order, lowest first: a module may import its own layer's modules and any
lower layer's, never a higher one's. A layer of several packages holds peers that may import
each other (``circuits`` before the features that read its graphs), as long as no circle forms.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "infoflow_dsl"

#: The layers, lowest first; each names top-level modules or packages of ``infoflow_dsl``.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "progress", "collector", "files"),  # every user-facing fault; progress; files on disk
    ("language",),  # text -> typed program
    ("transformer",),  # the compiled model: config, sparse, model, hooks, io
    ("analysis",),  # typed program -> comparison tree, schedule, report
    ("oracle",),  # the exact float64 evaluator, token encoding, sampling
    ("rasp",),  # RASP with Tracr's API -> typed program
    ("compiler",),  # schedule -> circuit IR -> tensors
    ("measure",),  # a model against the oracle
    ("pipeline",),  # the stages as named calls: compile_program, analyze, a model read back
    ("verify",),  # check, trace, the circuit's sites (they relower: above the pipeline)
    ("circuits",),  # edge graphs, truths, disguise
    ("discovery", "exporters", "page", "training", "sae"),  # the features
    ("cli",),  # the command line only
    ("__init__",),  # the face: re-exports and the lazy loader
)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The index in LAYERS of a module of the package (``infoflow_dsl`` itself is the face)."""
    top = module.split(".")[1] if "." in module else "__init__"
    for index, layer in enumerate(LAYERS):
        if top in layer:
            return index
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS in tests/test_layers.py")


def _under_type_checking(tree: ast.Module) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    blocks = [b for b in ast.walk(tree) if isinstance(b, ast.If) and "TYPE_CHECKING" in ast.unparse(b.test)]
    return {id(node) for block in blocks for node in ast.walk(block)}


def runtime_imports(path: Path, modules: set[str], package: Path, *, typing: bool = False) -> set[str]:
    """The package's modules that ``path`` imports at run time (top level or inside a function),
    and with ``typing`` also those it imports under ``TYPE_CHECKING`` only."""
    name = module_name(path, package)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if typing else _under_type_checking(tree)
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            parent = (node.module or "") if node.level == 0 else ".".join(
                [*base[: len(base) - node.level + 1], *([node.module] if node.module else [])])
            for alias in node.names:
                child = f"{parent}.{alias.name}"
                found.add(child if child in modules else parent)
    return {module for module in found if module in modules and module != name}


@functools.cache
def import_graph(package: Path = PACKAGE, *, typing: bool = False) -> nx.DiGraph:
    """Every module of the package and its run-time imports of the package's modules (with
    ``typing``, its imports under ``TYPE_CHECKING`` too)."""
    paths = {module_name(path, package): path for path in package.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for module, path in paths.items():
        targets = runtime_imports(path, set(paths), package, typing=typing)
        graph.add_edges_from((module, target) for target in targets)
    return graph


def upward_imports(graph: nx.DiGraph) -> list[str]:
    return sorted(f"{a} -> {b}" for a, b in graph.edges if layer_of(b) > layer_of(a))


def import_circles(graph: nx.DiGraph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def circle_paths(graph: nx.DiGraph) -> list[str]:
    """One circle through each group of modules that import each other, as ``a -> b -> a``
    (the same one every run: the search starts at the group's first module, edges in order)."""
    found = []
    for group in import_circles(graph):
        cycle = nx.find_cycle(nx.DiGraph(sorted(graph.subgraph(group).edges)), source=group[0])
        found.append(" -> ".join([*(a for a, _ in cycle), cycle[0][0]]))
    return found


def test_every_module_is_in_a_layer() -> None:
    for module in import_graph().nodes:
        layer_of(module)


def test_no_import_goes_up_a_layer() -> None:
    assert upward_imports(import_graph()) == []


def test_no_two_files_import_each_other_round_a_circle() -> None:
    assert import_circles(import_graph()) == []


def test_no_circle_even_for_typing() -> None:
    """No file needs, even for its type hints, a module that imports it: a callee takes the
    narrow interface it uses (a Protocol or a small dataclass defined at or below it)."""
    circles = circle_paths(import_graph(typing=True))
    assert not circles, "import circles, counting imports under TYPE_CHECKING:\n" + "\n".join(circles)


def test_the_check_sees_an_upward_import_and_a_circle(tmp_path: Path) -> None:
    """The checks above can fail: a copy of two layers with the language importing the
    compiler (upward), two analysis modules importing each other inside functions, and a third
    that imports, for typing only, the compiler module that imports it (a circle only for typing)."""
    package = tmp_path / "infoflow_dsl"
    for folder in ("language", "compiler", "analysis"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "compiler" / "assemble.py").write_text("from ..analysis import c\n\nX = 1\n")
    (package / "language" / "parse.py").write_text("def f():\n    from ..compiler.assemble import X\n    return X\n")
    (package / "analysis" / "a.py").write_text("def f():\n    from . import b\n")
    (package / "analysis" / "b.py").write_text("from .a import f\n")
    only_typing = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ..compiler import assemble\n"
    (package / "analysis" / "c.py").write_text(only_typing)
    graph = import_graph(package)
    assert upward_imports(graph) == ["infoflow_dsl.language.parse -> infoflow_dsl.compiler.assemble"]
    assert import_circles(graph) == [["infoflow_dsl.analysis.a", "infoflow_dsl.analysis.b"]]
    typed = import_graph(package, typing=True)
    assert import_circles(typed) == [["infoflow_dsl.analysis.a", "infoflow_dsl.analysis.b"],
                                     ["infoflow_dsl.analysis.c", "infoflow_dsl.compiler.assemble"]]
    assert circle_paths(typed)[1] == \
        "infoflow_dsl.analysis.c -> infoflow_dsl.compiler.assemble -> infoflow_dsl.analysis.c"
