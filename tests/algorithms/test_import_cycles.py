"""No import circle under algorithms/: the static import graph of its modules, read with ``ast``, is acyclic.

An edge A -> B is an import of module B (or of a name from B) in module A's body, wherever it sits there: at
the top, in a class body, under ``if TYPE_CHECKING:`` or in a ``try``. An import inside a function or method
is lazy (it runs when called, after both modules are loaded) and makes no edge: RLlib's hooks in DAPOConfig
(the algorithm class, the learner class, the EnvRunner class) are such. ``from package import name`` points at
the submodule ``package.name`` where there is one, else at the package's ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module_names(root: Path = ROOT, package: str = "algorithms") -> dict[str, Path]:
    """Dotted name -> file of every module of ``package`` (a package's name is its ``__init__.py``'s)."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def eager_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when the module is imported: every one outside function and lambda bodies."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(modules: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports eagerly; ``modules`` maps dotted names to source."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, source in modules.items():
        # Relative imports resolve against the package: a package's own name, else the enclosing one.
        is_package = any(other.startswith(f"{name}.") for other in modules)
        package = name if is_package else name.rpartition(".")[0]
        for node in eager_imports(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                origin = ".".join([*base, *([node.module] if node.module else [])])
                # "from origin import x": the submodule origin.x if there is one, else origin itself.
                targets = [
                    f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names
                ]
            graph[name] |= {target for target in targets if target in modules and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a, as a list of its modules) in each strongly connected component that has one
    (Tarjan's algorithm, iteratively so that deep graphs do not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return [cycle_in(graph, set(component)) for component in components]


def cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the first (sorted) module of a strongly connected component."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def test_algorithms_has_no_import_cycle():
    modules = {name: path.read_text(encoding="utf-8") for name, path in module_names().items()}
    found = cycles(import_graph(modules))
    assert not found, (
        "import cycles under algorithms/ (a module-level import, TYPE_CHECKING ones included, in each "
        "direction); type against a Protocol or a frozen view instead of importing back, or import inside "
        "the function that needs it:\n" + "\n".join(" -> ".join(cycle) for cycle in found)
    )


def test_the_check_counts_type_checking_imports_and_skips_lazy_ones():
    modules = {
        "pkg": "",
        "pkg.config": "from pkg.loss import LOSS\ndef hook():\n    from pkg.algo import Algo\n",
        "pkg.loss": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.config import Config\n",
        "pkg.algo": "from pkg import config\n",
        "pkg.extensions": "from . import loss\nclass A:\n    from pkg.registry import Registry\n",
        "pkg.registry": "",
    }
    graph = import_graph(modules)
    assert graph == {
        "pkg": set(),
        "pkg.config": {"pkg.loss"},
        "pkg.loss": {"pkg.config"},
        "pkg.algo": {"pkg.config"},
        "pkg.extensions": {"pkg.loss", "pkg.registry"},
        "pkg.registry": set(),
    }
    assert cycles(graph) == [["pkg.config", "pkg.loss", "pkg.config"]]
