"""The layers import downward only (benchmarks -> experiments -> algorithms -> models -> envs; docs/design.md,
section 1), and no entry point of experiments/ imports another.

A static check reads every module's imports with ``ast``, at module level and inside functions alike (also
``importlib.import_module("...")`` with a literal name), so a lazy import cannot hide an upward arrow. A
subprocess check runs the grid envs and the examples and sees which frameworks actually get loaded."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HEAVY = frozenset({"torch", "ray", "vllm", "transformers"})
ABOVE_ENVS = frozenset({"models", "algorithms", "experiments", "benchmarks"})
# Layer folder -> the top-level packages its modules must not import.
FORBIDDEN: dict[str, frozenset[str]] = {
    "envs": HEAVY | ABOVE_ENVS,
    "examples": HEAVY | ABOVE_ENVS,  # user-style envs: the envs/ rule
    "models": frozenset({"algorithms", "experiments", "benchmarks"}),
    "algorithms": frozenset({"experiments", "benchmarks"}),
    "experiments": frozenset({"benchmarks"}),
}


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``source``, the code of ``module`` (dotted, for
    resolving relative imports): ``import``, ``from ... import``, and ``importlib.import_module`` /
    ``__import__`` called with a literal name, wherever they appear."""
    found = []
    package = module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            if node.module:
                found.append((node.lineno, ".".join([*base, node.module])))
            else:  # "from . import x": x is a module of the package
                found += [(node.lineno, ".".join([*base, alias.name])) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return sorted(found, key=lambda item: item[0])


def layer_violations(root: Path = ROOT) -> list[str]:
    """'file:line imports module' for every import that points up (or at a heavy framework from envs/)."""
    violations = []
    for layer, forbidden in FORBIDDEN.items():
        for path in sorted((root / layer).rglob("*.py")):
            relative = path.relative_to(root)
            module = ".".join(relative.with_suffix("").parts)
            for line, name in imported_modules(path.read_text(encoding="utf-8"), module):
                if name.split(".")[0] in forbidden:
                    violations.append(f"{relative.as_posix()}:{line} imports {name}")
    return violations


def entry_point_imports(root: Path = ROOT) -> list[str]:
    """'file:line imports module' for every entry point (a module at the top of experiments/) importing
    another: what they share lives in experiments/common/."""
    entry_points = {path.stem for path in (root / "experiments").glob("*.py") if path.stem != "__init__"}
    violations = []
    for stem in sorted(entry_points):
        tree = ast.parse((root / "experiments" / f"{stem}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "experiments":
                names = [f"experiments.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                if parts[0] == "experiments" and len(parts) > 1 and parts[1] in entry_points - {stem}:
                    violations.append(f"experiments/{stem}.py:{node.lineno} imports {name}")
    return violations


def test_imports_point_down_only():
    violations = layer_violations()
    assert not violations, (
        "layers import downward only (experiments -> algorithms -> models -> envs; envs/ and examples/ "
        "without torch, ray, vllm or transformers): move the code to the layer that may import it, or "
        "the shared piece down:\n" + "\n".join(violations)
    )


def test_no_entry_point_imports_another():
    violations = entry_point_imports()
    assert not violations, "move what entry points share to experiments/common/:\n" + "\n".join(violations)


def test_the_static_check_sees_lazy_and_relative_imports():
    source = "\n".join(
        [
            "import numpy",
            "def f():",
            "    from algorithms.dapo import DAPO",
            "    import importlib; importlib.import_module('experiments.train')",
            "from .names import resolve_model_path",
            "from .. import envs",
        ]
    )
    names = [name for _, name in imported_modules(source, "models.sub.engine")]
    assert names == [
        "numpy",
        "algorithms.dapo",
        "importlib",
        "experiments.train",
        "models.sub.names",
        "models.envs",
    ]


def test_grid_envs_import_no_heavy_frameworks():
    code = (
        "import json, sys, gymnasium as gym, envs, envs.group, envs.sokoban, envs.frozen_lake, envs.contract;"
        "import examples.guess_number, examples.color_vision;"
        "[gym.make(i).reset(seed=0) for i in ('freshrl/Sokoban-v0', 'freshrl/FrozenLakeVision-v0')];"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120, cwd=ROOT
    )
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert not loaded & HEAVY
