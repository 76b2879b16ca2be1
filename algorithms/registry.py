"""Named extensions: one :class:`Registry` per extension point, filled by its ``register`` decorator, as
verl's ``core_algos.py`` does (``POLICY_LOSS_REGISTRY``, ``register_policy_loss``). docs/design.md, "Adding
an extension", lists the five and walks through adding one.

A name is a registered one (``"gigpo"``) or a user's own, ``"module:name"``, as user envs are named
``module:ns/Name-v0`` (docs/adding_an_env.md): :meth:`Registry.get` imports ``module``, which registers the
entry with the decorator or defines it as the attribute ``name``. Because the import happens wherever the
name is looked up, a user's entry works in every process that reads the config (the driver, remote learners
and EnvRunners, Ray Tune trials) without being registered there first.

This module imports nothing of the project, so that every module may import it.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Entry = TypeVar("Entry", bound=Callable[..., Any])


class Registry(Generic[Entry]):
    """The entries of one extension point by name, in the order they were registered.

    kind: what an entry is, for messages ("advantage estimator"). key: the name the config (or the code that
    looks entries up) gives it under ("advantage_estimator"). home: where users import the registry from, as
    ``"module:VARIABLE"``, for the error message that says how to add one.
    """

    def __init__(self, kind: str, *, key: str, home: str) -> None:
        self.kind = kind
        self.key = key
        self.home = home
        self._entries: dict[str, Entry] = {}
        self._modules: dict[str, str] = {}  # name -> the module that registered it

    def register(self, name: str) -> Callable[[Entry], Entry]:
        """Decorator: register the decorated function or class as ``name`` and return it unchanged."""
        if not isinstance(name, str) or not name or ":" in name:
            raise ValueError(f"a {self.kind}'s name must be a non-empty string without ':', got {name!r}")

        def decorate(entry: Entry) -> Entry:
            module = getattr(entry, "__module__", "")
            taken = self._entries.get(name)
            # The same definition again (its module imported twice, or reloaded) replaces itself.
            same = taken is not None and (self._modules[name], _qualname(taken)) == (module, _qualname(entry))
            if taken is not None and not same:
                by = self._modules[name]
                raise ValueError(f"{self.kind} {name!r} is already registered (by {by}); choose another name")
            self._entries[name] = entry
            self._modules[name] = module
            return entry

        return decorate

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order (a ``module:name`` is not among them until used)."""
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered; a ``module:name`` not yet looked up is not (see :meth:`get`)."""
        return name in self._entries

    def get(self, name: str) -> Entry:
        """The entry ``name``: a registered one, or for ``"module:name"`` the entry ``module`` registers as
        ``name`` (importing it first), else its attribute ``name``. A ValueError says what went wrong and how
        to add one."""
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        if not isinstance(name, str) or ":" not in name:
            raise ValueError(self._unknown(name))
        module_name, _, attribute = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # the user's module may fail in any way: say so, with its own error
            raise ValueError(
                f"{self.key}={name!r}: cannot import module {module_name!r} ({type(error).__name__}: "
                f"{error}). It must be importable wherever the config is read: run from the directory that "
                "holds it, or put that directory on PYTHONPATH"
            ) from error
        if self._modules.get(attribute) == module_name:
            return self._entries[attribute]
        entry = getattr(module, attribute, None)
        if not callable(entry):
            found = "is not a function or class" if hasattr(module, attribute) else "is not defined there"
            raise ValueError(
                f"{self.key}={name!r}: module {module_name!r} registers no {self.kind} {attribute!r}, and "
                f"{attribute!r} {found}. {self._how_to_add()}"
            )
        return entry

    def _unknown(self, name: Any) -> str:
        close = difflib.get_close_matches(name, self.names(), n=3) if isinstance(name, str) else []
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        return (
            f"{self.key} must be one of {self.names()} or a 'module:name' of your own, got {name!r}{hint}. "
            f"{self._how_to_add()}"
        )

    def _how_to_add(self) -> str:
        module, _, variable = self.home.partition(":")
        return (
            f"To add your own {self.kind}: in a module of yours, decorate it with "
            f'@{variable}.register("name") (from {module} import {variable}) and set '
            f'{self.key}="your_module:name" (docs/design.md, Adding an extension)'
        )

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"


def _qualname(entry: Any) -> str:
    return getattr(entry, "__qualname__", repr(entry))
