"""Tools an env declares (OpenAI function schemas) and the check of a call's arguments against them.

A tool is ``{"type": "function", "function": {"name", "description", "parameters"}}``, the form of OpenAI's
chat API, vLLM's and transformers' ``apply_chat_template(tools=...)``. ``parameters`` is a JSON Schema of an
object, in the subset this module checks itself (no dependency beyond the standard library): the keywords
``type`` (one type name or a list), ``enum``, ``properties``, ``required``, ``additionalProperties``
(``true`` or ``false``), ``items``, and the annotations ``description``, ``title`` and ``default``. A
declaration using any other keyword is rejected by :func:`check_tools`, so no part of a declared schema goes
unchecked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

# OpenAI's rule for function names (the API rejects others).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
CHECKED_KEYWORDS = ("type", "enum", "properties", "required", "additionalProperties", "items")
ANNOTATIONS = ("description", "title", "default")
FUNCTION_KEYS = ("name", "description", "parameters", "strict")


def check_tools(tools: Any) -> tuple[dict[str, Any], ...]:
    """``tools`` as a tuple, checked; ``ValueError`` naming the tool and what is wrong otherwise."""
    if isinstance(tools, str | bytes | dict) or not isinstance(tools, Sequence):
        raise ValueError(f"tools must be a tuple of OpenAI function schemas, got {type(tools).__name__}")
    names: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or set(tool) != {"type", "function"}:
            raise ValueError(
                f'{where} must be {{"type": "function", "function": {{"name": ..., "description": ..., '
                f'"parameters": {{...}}}}}}, got {tool!r:.120}'
            )
        function = tool["function"]
        if not isinstance(function, dict) or set(function) - set(FUNCTION_KEYS):
            extra = sorted(set(function) - set(FUNCTION_KEYS)) if isinstance(function, dict) else function
            raise ValueError(f"{where}['function'] takes the keys {FUNCTION_KEYS}; got {extra!r:.120}")
        name = function.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ValueError(f"{where}: the name must be 1-64 letters, digits, _ or -, got {name!r:.80}")
        if name in names:
            raise ValueError(f"{where}: a second tool named {name!r}; tool names must be unique")
        names.add(name)
        if not isinstance(function.get("description", ""), str):
            raise ValueError(f"{where} ({name}): the description must be a string")
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise ValueError(f'{where} ({name}): parameters must be a schema of {{"type": "object"}}')
        _check_schema(parameters, f"{where} ({name}) parameters")
        try:
            json.dumps(tool, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where} ({name}) is not plain JSON (templates render it): {exc}") from None
    return tuple(tools)


def tool_names(tools: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The names of the declared ``tools``, in order."""
    return tuple(tool["function"]["name"] for tool in tools)


def tool_parameters(tools: Sequence[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The parameters schema of the tool called ``name`` (None if no tool has that name)."""
    for tool in tools:
        if tool["function"]["name"] == name:
            return tool["function"].get("parameters", {"type": "object", "properties": {}})
    return None


def argument_error(schema: dict[str, Any], value: Any, path: str = "arguments") -> str:
    """What is wrong with ``value`` under ``schema`` (a schema :func:`check_tools` accepted), "" if nothing.

    Never raises; the work is bounded by the schema's size, not by the value's.
    """
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(_has_type(value, kind) for kind in allowed):
            return f"{path} must be {' or '.join(allowed)}, got {_json_type(value)}"
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return f"{path} must be one of {json.dumps(schema['enum'])[:200]}"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                return f"{path}: the required {key[:60]!r} is missing"
        if schema.get("additionalProperties", True) is False:
            extra = sorted(key for key in value if key not in properties)
            if extra:
                return f"{path} has unknown key {extra[0][:60]!r}; the keys are {sorted(properties)}"
        for key, subschema in properties.items():
            if key in value:
                error = argument_error(subschema, value[key], f"{path}.{key}")
                if error:
                    return error
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            error = argument_error(schema["items"], item, f"{path}[{index}]")
            if error:
                return error
    return ""


def _check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict):
        raise ValueError(f"{where}: a schema is a JSON object, got {schema!r:.80}")
    unsupported = sorted(set(schema) - set(CHECKED_KEYWORDS) - set(ANNOTATIONS))
    if unsupported:
        raise ValueError(
            f"{where} uses {unsupported[0]!r}, which freshrl's argument check does not support (it checks "
            f"{CHECKED_KEYWORDS}); drop it and check that in the env's _apply instead"
        )
    types = schema.get("type")
    if types is not None:
        listed = [types] if isinstance(types, str) else types
        if not isinstance(listed, list) or not listed or any(kind not in JSON_TYPES for kind in listed):
            raise ValueError(f"{where}: type must be one of {JSON_TYPES} or a list of them, got {types!r}")
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        raise ValueError(f"{where}: enum must be a non-empty list")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise ValueError(f"{where}: properties must be an object of schemas")
    for key, subschema in properties.items():
        _check_schema(subschema, f"{where}.{key}")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(key not in properties for key in required):
        raise ValueError(f"{where}: required must list names of its properties {sorted(properties)}")
    if not isinstance(schema.get("additionalProperties", True), bool):
        raise ValueError(f"{where}: additionalProperties must be true or false (a schema is not supported)")
    if "items" in schema:
        _check_schema(schema["items"], f"{where}[]")


def _has_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    # JSON Schema: an integer is any number without a fractional part (1.0 included).
    return kind == "number" or isinstance(value, int) or value.is_integer()


def _json_type(value: Any) -> str:
    for kind in ("null", "boolean", "string", "array", "object", "integer"):
        if _has_type(value, kind):
            return kind
    return "number" if isinstance(value, int | float) and math.isfinite(value) else "a non-finite number"


def _same(value: Any, option: Any) -> bool:
    """JSON equality: ``True`` is not ``1`` (Python's ``==`` says it is)."""
    return (
        type(value) is type(option)
        and value == option
        or (_has_type(value, "number") and _has_type(option, "number") and value == option)
    )
