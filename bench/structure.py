"""The package's structure, measured: its largest modules, its import circles, imports that run back up.

    .venv/bin/python bench/structure.py [--top 15]

Reads the source of ``twisted_kafka/`` with ``ast`` (nothing is imported), builds the
module import graph -- every ``import``/``from ... import`` of a ``twisted_kafka`` module,
those inside functions and under ``if TYPE_CHECKING:`` too, marked as such -- and prints:

* the largest modules with their line counts;
* the import circles: strongly connected components of the graph with more than one module
  (first counting every import, then module-level imports only, which are the ones that can
  fail at import time);
* the imports that go against ``LAYERS``, the package order: a package may import the
  packages below it and its own, never one above it.

``tests/unit/test_layers.py`` checks the same graph against the same order, so this file is
the one place the graph code and the order live (the test imports it; nothing here imports
the tests).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "twisted_kafka"

#: The package order, from the bottom.  A package may import its own modules and those of the
#: packages in earlier rows; packages in one row are peers and do not import each other.
#: As in Kafka: the wire protocol, metrics and the security primitives (ACL types, the
#: authorizer, the password encoder) at the bottom, the configuration that names them above,
#: then the storage, SASL, the network layer and the broker's own client, ZooKeeper, the
#: coordinators and the controller below the broker that builds them, the admin endpoint the
#: broker serves, the broker (``server``), and at the top what drives a broker from outside
#: (the command line, the operator tools, the Spark source, the test harness).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("protocol",),
    ("metrics", "logging", "waiting", "security"),
    ("config",),
    ("purgatory",),
    ("log",),
    ("sasl",),
    ("network",),
    ("client",),
    ("zk",),
    ("controller",),
    ("coordinator.group",),
    ("coordinator.transaction",),
    ("admin",),
    ("server",),
    ("cli", "tools", "spark", "testing"),
)

#: Units of the order that are folders inside a package folder.
NESTED_UNITS = ("coordinator.group", "coordinator.transaction")


@dataclass(frozen=True)
class Import:
    """One import of a ``twisted_kafka`` module by another."""

    source: str          # the importing module, e.g. "twisted_kafka.sasl.scram"
    target: str          # the imported module
    path: Path
    line: int
    in_function: bool    # inside a def (runs when called, not at import)
    type_checking: bool  # under ``if TYPE_CHECKING:`` (never runs)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def marks(self) -> str:
        return " ".join(m for m, on in (("[in function]", self.in_function),
                                        ("[TYPE_CHECKING]", self.type_checking)) if on)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module of ``twisted_kafka/`` by its dotted name (packages by their own name)."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, in_function: bool, type_checking: bool):
    """Yield (import node, in_function, type_checking) for every import under ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function, type_checking
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(child, True, type_checking)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), in_function, True)
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), in_function, type_checking)
        else:
            yield from _walk(child, in_function, type_checking)


def imports_of(path: Path, modules: dict[str, Path]) -> list[Import]:
    """The ``twisted_kafka`` modules ``path`` imports, each resolved to a module of ``modules``.

    ``from package import name`` is an import of ``package.name`` when that is a module, else of
    ``package``; relative imports are resolved against the importing module's package.
    """
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    found: list[Import] = []
    for node, in_function, type_checking in _walk(ast.parse(path.read_text(encoding="utf-8")), False, False):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else base)
        for target in targets:
            while target and target not in modules:   # "import a.b.c" of a name, not a module
                target = target.rpartition(".")[0]
            imp = Import(source, target, path, node.lineno, in_function, type_checking)
            if target and target.startswith("twisted_kafka") and target != source and imp not in found:
                found.append(imp)
    return found


def all_imports() -> list[Import]:
    modules = package_modules()
    return [imp for path in modules.values() for imp in imports_of(path, modules)]


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of ``graph`` (node -> the nodes it points at)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def import_circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components that are circles (more than one node, or a node importing itself)."""
    return [c for c in strongly_connected(graph) if len(c) > 1 or any(n in graph.get(n, ()) for n in c)]


def graph_of(imports: list[Import], *, module_level_only: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in package_modules()}
    for imp in imports:
        if module_level_only and (imp.in_function or imp.type_checking):
            continue
        graph[imp.source].add(imp.target)
    return graph


def unit_of(module: str) -> str:
    """The unit of ``LAYERS`` a module belongs to ("server", "coordinator.group", ...)."""
    parts = module.split(".")[1:]
    if not parts:
        return ""                                   # twisted_kafka/__init__.py: the version only
    two = ".".join(parts[:2])
    return two if two in NESTED_UNITS else parts[0]


def rank(unit: str) -> int:
    for position, row in enumerate(LAYERS):
        if unit in row:
            return position
    raise KeyError(f"{unit!r} is not in the package order (bench/structure.py LAYERS)")


def units() -> set[str]:
    """Every unit the package has: its folders and top-level modules (coordinator's two folders apart)."""
    return {unit_of(name) for name in package_modules()} - {"", "coordinator"}


def backward_imports(imports: list[Import]) -> list[Import]:
    """Imports that run back up the order: into a package of a later row, or a peer of the same row."""
    wrong = []
    for imp in imports:
        source, target = unit_of(imp.source), unit_of(imp.target)
        if source == target or not target or target == "coordinator":
            continue
        if not source:
            wrong.append(imp)                        # the top-level package imports nothing of its own
        elif rank(target) >= rank(source):
            wrong.append(imp)
    return wrong


def largest_modules(count: int) -> list[tuple[int, str]]:
    sizes = [(len(path.read_text(encoding="utf-8").splitlines()), str(path.relative_to(ROOT)))
             for path in package_modules().values()]
    return sorted(sizes, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=15, help="how many of the largest modules to list")
    args = parser.parse_args(argv)
    imports = all_imports()

    print(f"{len(package_modules())} modules, {len(imports)} imports between them")
    print(f"\nThe {args.top} largest modules (lines):")
    for lines, name in largest_modules(args.top):
        print(f"  {lines:6d}  {name}")

    for title, module_level_only in (("every import", False), ("module-level imports only", True)):
        circles = import_circles(graph_of(imports, module_level_only=module_level_only))
        print(f"\nImport circles, {title}: {len(circles)}")
        for circle in sorted(circles, key=lambda c: (-len(c), sorted(c))):
            print(f"  {len(circle)} modules: {', '.join(sorted(circle))}")
            for imp in imports:
                if imp.source in circle and imp.target in circle and not (
                        module_level_only and (imp.in_function or imp.type_checking)):
                    print(f"      {imp.where}  {imp.source} -> {imp.target} {imp.marks}".rstrip())

    wrong = backward_imports(imports)
    print(f"\nImports that run back up the package order: {len(wrong)}")
    for imp in wrong:
        print(f"  {imp.where}  {unit_of(imp.source)} -> {unit_of(imp.target)} ({imp.target}) {imp.marks}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
