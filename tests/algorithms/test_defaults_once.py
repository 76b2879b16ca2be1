"""Each default once: DAPOConfig holds every default of the project's settings (docs/configuration.md), and
nothing under algorithms/ restates one.

A restated default is a second place to change a value: when the two drift apart, a run and a test of the
inner piece disagree on what "the default" is. DAPOConfig's keys are its own, not RLlib's: the explicit
keywords of ``training()`` and ``evaluation()`` and the attributes ``replay()`` sets. A key is looked for
under its own name, under the ``replay()`` keyword that sets it (``alpha`` for ``replay_alpha``), and under
the keyword a call passes it through (``gigpo_credit(gamma=config.gigpo_gamma)``: ``gamma`` of
``gigpo_credit``). Where that name has a default equal to DAPOConfig's, in a signature, a dataclass field, a
literal keyword argument, a module-level constant of the key's name or a module-level dict keyed by it, the
test fails. A None default restates nothing: it is the absence of a value.
"""

from __future__ import annotations

import ast
import inspect
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from algorithms.dapo import ALGORITHMS, DAPOConfig
from algorithms.dapo.config import REPLAY_ATTRIBUTES

ALGORITHMS_DIR = Path(__file__).resolve().parents[2] / "algorithms"

# Module-level dicts that restate DAPOConfig defaults on purpose, by (file, name) -> why.
EXEMPT_DICTS: dict[tuple[str, str], str] = {
    ("replay/factory.py", "REFERENCE_SETTINGS"): (
        "the FreshPER reference repository's settings, behind the buffer's comparisons with it: they must "
        "not follow DAPOConfig's, so a value equal to one today is a coincidence"
    ),
    ("dapo/scales.py", "TINY_SCALE"): (
        "the CPU scales set the same keys, so switching scale leaves nothing of the other behind "
        "(docs/configuration.md, The presets): some at DAPOConfig's value"
    ),
    ("dapo/scales.py", "SMOLLM2_SCALE"): "as TINY_SCALE: the keys the tiny scale sets",
}

Names = dict[str, set[str]]  # a name as the code spells it -> the DAPOConfig keys it may carry


def config_defaults() -> dict[str, Any]:
    """DAPOConfig's own keys and their defaults (RLlib's keys, ``lr`` and ``seed`` say, left out)."""
    config = DAPOConfig()
    own = [
        name
        for method in (DAPOConfig.training, DAPOConfig.evaluation)
        for name, parameter in inspect.signature(method).parameters.items()
        if parameter.kind is parameter.KEYWORD_ONLY
    ]
    keys = {name: getattr(config, name) for name in own}
    keys.update({key: getattr(config, key) for key in replay_keywords().values()})
    return keys


def replay_keywords() -> dict[str, str]:
    """``replay()``'s keyword -> the attribute it sets; every keyword of ``replay()`` is in the table."""
    keywords = [name for name in inspect.signature(DAPOConfig.replay).parameters if name != "self"]
    assert keywords == list(REPLAY_ATTRIBUTES)
    return REPLAY_ATTRIBUTES


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(ALGORITHMS_DIR.rglob("*.py")):
        yield path.relative_to(ALGORITHMS_DIR).as_posix(), ast.parse(path.read_text(), str(path))


def passed_through(keys: dict[str, Any]) -> dict[str, Names]:
    """callee -> its keyword -> the keys calls pass to it as ``callee(keyword=<...>.key)``."""
    aliases: dict[str, Names] = defaultdict(lambda: defaultdict(set))
    for _, module in modules():
        for node in ast.walk(module):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg and isinstance(value, ast.Attribute) and value.attr in keys:
                    aliases[callee][keyword.arg].add(value.attr)
    return aliases


def literal(node: ast.AST | None) -> Any:
    """The node's value where it is a literal, else None (which restates nothing)."""
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError):
        return None


def same(value: Any, default: Any) -> bool:
    """Equal and of one kind: True is not 1, 500 is 500.0."""
    if value is None or isinstance(value, bool) != isinstance(default, bool):
        return False
    numbers = isinstance(value, int | float) and isinstance(default, int | float)
    return (type(value) is type(default) or numbers) and value == default


def restatements(names: Names, name: str | None, value: Any, keys: dict[str, Any]) -> list[str]:
    """The keys ``name`` may carry whose default ``value`` is."""
    return [key for key in sorted(names.get(name, set()) if name else ()) if same(value, keys[key])]


def signature_defaults(module: ast.Module) -> Iterator[tuple[str, int, str, ast.AST]]:
    """(callee, line, parameter, default) of every function and dataclass field; a method is named by its
    class where it is ``__init__`` (the class is what callers call)."""
    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value:
                    yield node.name, item.lineno, item.target.id, item.value
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    yield from parameters(node.name, item)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name != "__init__":
            yield from parameters(node.name, node)


def parameters(callee: str, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator:
    args = function.args
    positional = args.posonlyargs + args.args
    with_defaults = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    with_defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    for arg, default in with_defaults:
        yield callee, function.lineno, arg.arg, default


def find_restatements() -> list[str]:
    keys = config_defaults()
    global_names: Names = {key: {key} for key in keys}
    for keyword, key in replay_keywords().items():
        global_names.setdefault(keyword, set()).add(key)
    aliases = passed_through(keys)
    found = []
    for path, module in modules():
        for callee, line, name, default in signature_defaults(module):
            names = {**global_names, name: global_names.get(name, set()) | aliases[callee][name]}
            for key in restatements(names, name, literal(default), keys):
                found.append(f"{path}:{line} {callee}({name}={ast.unparse(default)}) restates {key}")
        for node in ast.walk(module):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    for key in restatements(global_names, keyword.arg, literal(keyword.value), keys):
                        found.append(f"{path}:{node.lineno} {ast.unparse(node)} restates {key}")
        for statement in module.body:
            target = getattr(statement, "target", None) or (getattr(statement, "targets", None) or [None])[0]
            if not isinstance(target, ast.Name) or getattr(statement, "value", None) is None:
                continue
            for key in restatements(global_names, target.id.lower(), literal(statement.value), keys):
                found.append(f"{path}:{statement.lineno} {target.id} restates {key}")
            if (path, target.id) in EXEMPT_DICTS:
                continue
            for node in ast.walk(statement.value):
                if isinstance(node, ast.Dict):
                    for entry, value in zip(node.keys, node.values, strict=True):
                        name = literal(entry) if isinstance(literal(entry), str) else None
                        for key in restatements(global_names, name, literal(value), keys):
                            found.append(f"{path}:{entry.lineno} {target.id}[{name!r}] restates {key}")
    return found


def test_nothing_under_algorithms_restates_a_dapoconfig_default():
    found = find_restatements()
    assert not found, "defaults belong to DAPOConfig alone; take the value from it:\n" + "\n".join(found)


def test_every_exemption_names_a_module_level_dict():
    assigned = {
        (path, target.id)
        for path, module in modules()
        for statement in module.body
        if isinstance(statement, ast.Assign | ast.AnnAssign) and isinstance(statement.value, ast.Dict)
        for target in getattr(statement, "targets", [getattr(statement, "target", None)])
        if isinstance(target, ast.Name)
    }
    assert set(EXEMPT_DICTS) <= assigned


@pytest.mark.parametrize("rung", list(ALGORITHMS))
def test_a_rung_of_the_ladder_holds_only_what_it_changes(rung):
    keys = config_defaults()
    assert {key: value for key, value in ALGORITHMS[rung].items() if same(value, keys[key])} == {}
