"""Tests read the project's objects through their public seams (``DAPO.counters``,
``DAPOTorchLearner.policy``, ...), not through private attributes, so that renaming an implementation detail
does not break them.

The rule, applied with ``ast`` to every module under tests/:

- The project's private names are the single-underscore names (not dunders) that envs/, algorithms/, models/
  and experiments/ define on objects: assigned as ``self._x`` (instance state) or defined in a class body
  (``def _x``, ``_x = ...``: methods and class attributes). Module-level private functions and constants are
  not among them: a test that imports ``module._helper`` unit-tests a function, it reads no object's state.
- A private read is an attribute access ``X._x`` that loads (a plain read, a call, or the read half of
  ``X._x += ...``) one of those names, unless ``X`` is ``self``, ``cls`` or ``super()`` (a test double's own
  state, or a subclass using its base's hooks) or a module the test imports (a module-level helper again).
  Plain assignments (``stub._x = ...``), which wire a stand-in's state, are not reads.
- The match is by name: a private attribute of another library's object (RLlib's ``learner_group._learner``)
  counts only where the project defines the same name, and a name in a string
  (``monkeypatch.setattr(DAPO, "_timer", ...)``) is no attribute access.

The count must stay under ``LIMIT``; what is left is listed in the failure message as file:line entries."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("envs", "algorithms", "models", "experiments")
# What is left: DAPO's steps unit-tested with a stand-in self, and env internals that the envs have no public
# view of.
LIMIT = 15


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def project_private_names(root: Path = ROOT) -> frozenset[str]:
    """The private names the project's code defines on objects: instance state, methods, class attributes."""
    names: set[str] = set()
    for folder in PROJECT:
        for path in (root / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    if isinstance(node.value, ast.Name) and node.value.id == "self":
                        names.add(node.attr)
                elif isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                            names.add(item.name)
                        elif isinstance(item, ast.Assign):
                            names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                            names.add(item.target.id)
    return frozenset(name for name in names if is_private(name))


def imported_modules(tree: ast.Module, root: Path) -> set[str]:
    """The local names a test module binds to modules: ``import a.b as m``, and ``from a import m`` where
    ``a/m`` is one of the project's modules (the other ``from`` imports bind functions and classes)."""
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            package = root.joinpath(*node.module.split("."))
            for alias in node.names:
                if (package / f"{alias.name}.py").exists() or (package / alias.name / "__init__.py").exists():
                    modules.add(alias.asname or alias.name)
    return modules


def is_own(receiver: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own attributes."""
    if isinstance(receiver, ast.Name):
        return receiver.id in ("self", "cls")
    return (
        isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and receiver.func.id == "super"
    )


def private_reads(root: Path = ROOT) -> list[str]:
    """'file:line receiver._name' for every private read in tests/ (the rule in this module's docstring)."""
    names = project_private_names(root)
    found: list[str] = []
    for path in sorted((root / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = imported_modules(tree, root)
        # X._x += ... stores through an attribute node, yet reads it first.
        augmented = {id(node.target) for node in ast.walk(tree) if isinstance(node, ast.AugAssign)}
        reads = []
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr in names):
                continue
            if not (isinstance(node.ctx, ast.Load) or id(node) in augmented):
                continue
            receiver = node.value
            if is_own(receiver) or (isinstance(receiver, ast.Name) and receiver.id in modules):
                continue
            reads.append((node.lineno, ast.unparse(node)))
        found += [f"{path.relative_to(root)}:{line} {read}" for line, read in sorted(reads)]
    return found


def test_tests_read_project_objects_through_public_seams():
    reads = private_reads()
    listed = "\n".join(reads)
    assert len(reads) < LIMIT, f"{len(reads)} private reads in tests/, at most {LIMIT - 1} allowed:\n{listed}"


def test_the_rule_counts_object_state_and_methods_only(tmp_path):
    """The rule on a small tree: a read of the project's private state counts; its own, a module helper's,
    a plain assignment's and a third-party attribute's do not."""
    (tmp_path / "algorithms").mkdir()
    (tmp_path / "algorithms" / "thing.py").write_text(
        "def _helper():\n    pass\n\n"
        "class Thing:\n    _LIMIT = 3\n\n    def __init__(self):\n        self._count = 0\n\n"
        "    def _step(self):\n        pass\n",
        encoding="utf-8",
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_thing.py").write_text(
        "import algorithms.thing as thing\n\n"
        "class Double:\n    def __init__(self):\n        self._count = 1\n\n"
        "    def read(self):\n        return self._count\n\n"
        "def test(t, learner_group):\n"
        "    t._count += 1\n"  # counted: reads before it writes
        "    t._step()\n"  # counted
        "    t._count = 2\n"  # wiring, not a read
        "    thing._helper()\n"  # a module-level helper
        "    learner_group._learner\n"  # not a project name
        "    return t._LIMIT\n",  # counted
        encoding="utf-8",
    )
    assert project_private_names(tmp_path) == {"_count", "_step", "_LIMIT"}
    where = Path("tests", "test_thing.py")
    assert private_reads(tmp_path) == [f"{where}:11 t._count", f"{where}:12 t._step", f"{where}:16 t._LIMIT"]
