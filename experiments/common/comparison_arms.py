"""The arms of a comparison (``experiments.compare``): the replay modes and their variants (``--modes``), or
the values of any DAPOConfig or run key (``--arms KEY=V1,V2,...``), each an :class:`Arm` with its name in the
report and in its runs' file names."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from algorithms.dapo.config import current_key
from algorithms.replay import REPLAY_MODES
from experiments.common.results_json import dumps
from experiments.common.run_config import SettingsError, parse_set, run_keys

MODE_LABELS = {
    "on_policy": "on-policy",
    "per": "standard PER",
    "freshper": "FreshPER",
    "freshper_poly": "FreshPER (polynomial decay)",
}
# Arms beyond the replay modes: a replay mode with DAPOConfig keys on top. FreshPER with replay as backfill
# (a short batch filled from the buffer instead of training short).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "freshper+backfill": ("freshper", {"replay_backfill": True}),
}
MODE_LABELS["freshper+backfill"] = "FreshPER + replay backfill"
COMPARE_MODES = (*REPLAY_MODES, *VARIANTS)
REFERENCE_MODE = "freshper"  # the replay mode every other one is tested against
# Keys a comparison sets itself, so they cannot be arms: the option that sets them instead.
NOT_ARMS = {"env": "--envs", "seed": "--seeds"}
# A value's characters kept as they are in a run's file name; any other makes the name a slug plus a hash.
_FILE_SAFE = re.compile(r"[^A-Za-z0-9._+-]")
_MAX_VALUE_IN_NAME = 40


@dataclass(frozen=True)
class Arm:
    """One arm of a comparison: what its runs set on top of the command line.

    ``label`` names it in the saved runs, ``results.json`` and the console (a replay mode, or ``KEY=VALUE``
    as typed); ``name`` heads its column in the report; ``file_stem`` is the middle of its runs' file names;
    ``keys`` are the DAPOConfig or run keys it sets, as ``--set`` takes them."""

    label: str
    name: str
    file_stem: str
    keys: dict[str, Any]


def mode_arm(mode: str) -> Arm:
    """The arm of a replay mode or a variant (its replay mode plus its keys); its file names are the ones
    comparisons have always written, so committed comparisons resume."""
    replay, keys = VARIANTS.get(mode, (mode, {}))
    return Arm(mode, MODE_LABELS[mode], mode, {"replay_mode": replay, **keys})


def parse_arms(texts: str | list[str]) -> list[Arm]:
    """``KEY=V1,V2[,...]`` -> one arm per value; several such texts (``--arms`` repeated) set several keys
    per arm, their values paired by position (``["lora_rank=0,16", "lr=2e-5,2e-4"]``: full training at
    2e-5 against LoRA at 2e-4). Each key is checked and each value read as ``--set`` does
    (``experiments.common.run_config.parse_set``: YAML, so 16 is an int, true a bool, gigpo a string); the
    values are split at the commas outside brackets and quotes, so ``adam_betas=[0.9,0.99],[0.9,0.999]`` is
    two arms. A :class:`SettingsError` for fewer than 2 values, unequal counts, a key given twice, two equal
    arms, an empty value or a bad key."""
    columns = [_key_values(text) for text in ([texts] if isinstance(texts, str) else texts)]
    keys = [key for _, key, _, _ in columns]
    for index, key in enumerate(keys):
        if key in keys[:index]:
            raise SettingsError(f"--arms {key}=... is given twice; give each key once")
    counts = {key: len(items) for _, key, items, _ in columns}
    if len(set(counts.values())) > 1:
        raise SettingsError(
            f"each --arms gives one value per arm, paired by position; got {counts}: give every key as many"
        )
    arms = []
    for position in range(len(columns[0][2])):
        arm = [(typed, key, items[position], parsed[position]) for typed, key, items, parsed in columns]
        label = ", ".join(f"{typed}={item}" for typed, _, item, _ in arm)
        stem = "+".join(_file_stem(key, item) for _, key, item, _ in arm)
        arms.append(Arm(label, label, stem, {key: value for _, key, _, value in arm}))
    canonical = [dumps(arm.keys, indent=None) for arm in arms]
    for index, form in enumerate(canonical):
        if form in canonical[:index]:
            first = arms[canonical.index(form)].label
            raise SettingsError(
                f"--arms: {first!r} and {arms[index].label!r} are the same arm; give each value once"
            )
    return arms


def _key_values(text: str) -> tuple[str, str, list[str], list[Any]]:
    """One ``--arms KEY=V1,V2[,...]``: its key as typed and as DAPOConfig names it now (a former name warns
    once), its values as typed and as read."""
    typed, sep, values = text.partition("=")
    typed = typed.strip()
    if not sep or not typed:
        raise SettingsError(f"--arms takes KEY=V1,V2,... (e.g. --arms lora_rank=0,16), got {text!r}")
    if typed in NOT_ARMS:
        raise SettingsError(f"--arms {typed}=...: the comparison sets {typed} itself; use {NOT_ARMS[typed]}")
    key = typed if typed in run_keys() else current_key(typed, "--arms")
    items = _top_level_items(values)
    if "" in items:
        raise SettingsError(f"--arms {text}: an empty value; write null for None")
    parsed = [parse_set([f"{key}={item}"])[key] for item in items]
    if len(items) < 2:
        raise SettingsError(f"--arms {text}: give at least 2 values to compare (--arms {key}=V1,V2)")
    return typed, key, items, parsed


def _top_level_items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes, each item stripped."""
    items, depth, quote, start = [], 0, None, 0
    for index, char in enumerate(text):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    return [item.strip() for item in [*items, text[start:]]]


def _file_stem(key: str, value: str) -> str:
    """``KEY-VALUE`` for a run's file name: the value as typed where it is short and file-safe, else its
    safe characters and a hash of it, so two values never share a name."""
    safe = _FILE_SAFE.sub("_", value)
    if safe != value or len(safe) > _MAX_VALUE_IN_NAME:
        safe = f"{safe[:_MAX_VALUE_IN_NAME]}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"
    return f"{key}-{safe}"
