"""The project files a command runs: its entry module and every module of this repository that module imports,
transitively, found by reading the code (``ast``), not by running it.

An import counts wherever it is written (module level or inside a function: a lazy import still runs when the
command needs it): ``import a.b``, ``from a import b`` (``a`` and, when it is a module, ``a.b``), relative
imports, ``importlib.import_module("a.b")`` with a literal name, and ``"a.b:Name"`` strings, the entry points
of the gymnasium registrations (envs/__init__.py) that import their module when the env is made. Importing
``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` too, so they count; imports under ``if
TYPE_CHECKING:`` never run, so they do not. A module named only by a string
computed at run time is not seen; such inputs, and the data files a command reads, are listed by hand
(``depends_on`` in docs/results/claims.yaml). Used by experiments/common/record_staleness.py.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path

from experiments.common.results_json import REPOSITORY

# "envs.sokoban:SokobanEnv": a module and an attribute, the form of entry points.
ENTRY_POINT = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):[A-Za-z_]\w*")


def imported_names(source: str, module: str, is_package: bool = False) -> set[str]:
    """The absolute dotted names ``source`` (the code of ``module``; ``is_package``: its ``__init__.py``)
    imports or may import: for ``from a import b`` both ``a`` and ``a.b`` (``b`` may be a module or a name
    in ``a``; the caller keeps what resolves to a file)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names = set()
    for node in _run_time_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            parent = ".".join([*base, *([node.module] if node.module else [])])
            if parent:
                names.add(parent)
            names.update(f"{parent}.{alias.name}" if parent else alias.name for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = ENTRY_POINT.fullmatch(node.value)
            if match:
                names.add(match.group(1))
    return names


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports for annotations, never run)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))


class ImportGraph:
    """The project's import graph under ``root``, read lazily: each file is parsed once per graph, so one
    graph serves every claim of a run."""

    def __init__(self, root: Path = REPOSITORY) -> None:
        self.root = root
        self._imports: dict[Path, frozenset[Path]] = {}

    def module_files(self, name: str) -> list[Path]:
        """The files running ``import name`` executes under ``root`` (the packages' ``__init__.py`` files
        first, then the module's own), relative to ``root``; empty when ``name`` is not a module here."""
        parts = name.split(".")
        own = [Path(*parts).with_suffix(".py"), Path(*parts, "__init__.py")]
        found = next((path for path in own if (self.root / path).is_file()), None)
        if found is None:
            return []
        packages = [Path(*parts[:end], "__init__.py") for end in range(1, len(parts))]
        return [path for path in packages if (self.root / path).is_file()] + [found]

    def imports(self, path: Path) -> frozenset[Path]:
        """The project files the file ``path`` (relative to ``root``) imports directly."""
        if path not in self._imports:
            is_package = path.name == "__init__.py"
            module = ".".join((path.parent if is_package else path.with_suffix("")).parts)
            names = imported_names((self.root / path).read_text(encoding="utf-8"), module, is_package)
            self._imports[path] = frozenset(file for name in names for file in self.module_files(name))
        return self._imports[path]

    def closure(self, files: Iterable[Path]) -> set[Path]:
        """``files`` and every project file they import, transitively (relative to ``root``)."""
        seen: set[Path] = set()
        pending = [path for path in files if path.suffix == ".py"]
        while pending:
            path = pending.pop()
            if path not in seen:
                seen.add(path)
                pending.extend(self.imports(path) - seen)
        return seen | set(files)

    def command_files(self, command: str) -> set[Path]:
        """The files a command line runs or names: the module of ``python -m module`` (or the script of
        ``python path.py``) with its transitive imports, and every argument that is a file here (a settings
        file passed with ``--settings``)."""
        words = [word.split("=", 1)[-1] for word in shlex.split(command)]
        start = []
        if "-m" in words[:-1]:
            start = self.module_files(words[words.index("-m") + 1])
        named = [
            Path(word)
            for word in words
            if "{" not in word and not Path(word).is_absolute() and (self.root / word).is_file()
        ]
        return self.closure([*start, *named])
