"""The claims registry (docs/results/claims.yaml): each figure the docs state that a command can re-check.

A claim names the results file that records its value and the key(s) holding it, the command that measures
it again (``{output}`` in it is a fresh temporary folder; ``writes`` is the file the command leaves there,
laid out as the recorded one), how to compare (``exact``: deterministic values, equal, or within
``tolerance`` for floats; ``interval``: stochastic values, today's inside the recorded 95% interval, the
key's siblings ``<name>_ci95_low`` and ``<name>_ci95_high``) and the source paths its value depends on
(``depends_on``: how many commits touched them since the record's commit says whether it is stale).
``python -m experiments.reproduce`` runs them; docs/results/README.md says how to add one.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from experiments.common.results_json import REPOSITORY, value_at

REGISTRY = REPOSITORY / "docs" / "results" / "claims.yaml"
COMPARISONS = ("exact", "interval")


class ClaimsError(ValueError):
    """A registry entry that cannot be checked; the message names the claim, the key and the fix."""


@dataclass(frozen=True)
class Claim:
    """One registry entry (the YAML keys are the field names)."""

    name: str
    what: str  # the claim in words, as the docs state it
    results: str  # the results file recording it (relative to the repository root)
    keys: list[str]  # dotted keys of the recorded value(s) in ``results``, the same in ``writes``
    command: str  # re-measures it; ``{output}`` is replaced by a temporary folder
    writes: str  # the file the command writes into ``{output}``
    compare: str  # exact | interval
    depends_on: list[str]  # source paths (files or folders) the value depends on
    takes: str  # how long the command runs, roughly (printed before it starts)
    tolerance: float = 0.0  # exact: the largest absolute difference of a float still counted equal
    quick: bool = False  # runs in ``--quick`` (and in ``make test``): seconds, not minutes

    @property
    def results_path(self) -> Path:
        return REPOSITORY / self.results


def load_claims(path: str | Path = REGISTRY) -> dict[str, Claim]:
    """The claims of a registry file, by name, in file order."""
    path = Path(path)
    if not path.is_file():
        raise ClaimsError(f"no claims registry {path}; the project's is {REGISTRY}")
    entries = yaml.safe_load(path.read_text()) or {}
    fields = {item.name: item for item in dataclasses.fields(Claim)} if entries else {}
    required = {name for name, item in fields.items() if item.default is dataclasses.MISSING} - {"name"}
    claims = {}
    for name, entry in entries.items():
        where = f"{path}: claim {name!r}"
        if not isinstance(entry, dict):
            raise ClaimsError(f"{where}: expected a mapping of {sorted(required)}, got {entry!r}")
        unknown = sorted(set(entry) - set(fields))
        missing = sorted(required - set(entry))
        if unknown or missing:
            raise ClaimsError(
                f"{where}: unknown keys {unknown}, missing keys {missing}; the keys are {sorted(fields)}"
            )
        if entry["compare"] not in COMPARISONS:
            raise ClaimsError(
                f"{where}: compare must be one of {list(COMPARISONS)}, got {entry['compare']!r}"
            )
        if "{output}" not in entry["command"]:
            raise ClaimsError(f"{where}: the command must write into {{output}} (a temporary folder)")
        claims[name] = Claim(name=name, **entry)
    return claims


def observed(claim: Claim, results: Any) -> dict[str, Any]:
    """The claim's values in a results file: key -> value, and for an interval claim key -> (value, low,
    high). KeyError names a key the file does not have."""
    values = {}
    for key in claim.keys:
        value = value_at(results, key)
        if claim.compare == "interval":
            value = (value, value_at(results, f"{key}_ci95_low"), value_at(results, f"{key}_ci95_high"))
        values[key] = value
    return values


def differences(claim: Claim, recorded: dict[str, Any], today: dict[str, Any]) -> list[str]:
    """One line per key whose value today does not reproduce the recorded one (empty: reproduced)."""
    lines = []
    for key in claim.keys:
        if claim.compare == "interval":
            value, low, high = recorded[key]
            now = today[key][0]
            if not low <= now <= high:
                lines.append(f"{key}: recorded {value:.3f} (95% CI {low:.3f}-{high:.3f}), today {now:.3f}")
        elif not _equal(recorded[key], today[key], claim.tolerance):
            lines.append(f"{key}: recorded {recorded[key]!r}, today {today[key]!r}")
    return lines


def _equal(recorded: Any, today: Any, tolerance: float) -> bool:
    if isinstance(recorded, float) and isinstance(today, float):
        return math.isclose(recorded, today, rel_tol=0.0, abs_tol=tolerance)
    return recorded == today
