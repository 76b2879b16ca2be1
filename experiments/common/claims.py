"""The claims registry (docs/results/claims.yaml): each figure the docs state that a command can re-check.

A claim names the results file that records its value and the key(s) holding it, the command that measures
it again (``{output}`` in it is a fresh temporary folder; ``writes`` is the file the command leaves there),
how to compare (``exact``: deterministic values, equal, or within ``tolerance`` for floats; ``interval``:
stochastic values, today's inside the recorded 95% interval, the key's siblings ``<name>_ci95_low`` and
``<name>_ci95_high``; ``over_seeds``: a mean over seeds, today's inside the recorded mean +- its sibling
``ci95``, the half-width of its 95% t interval, or equal to it where none is recorded) and how long the
command takes (``takes``, its cost). The keys are the same in both files, or a mapping from the recorded
key to the written one where the record gathers several runs in its own layout (the transcribed files). Its
record is stale when a commit since the record's touched the files its command runs
(experiments/common/import_graph.py) or the inputs it lists by hand (``depends_on``: settings and data
files). ``python -m experiments.reproduce`` runs them; docs/results/README.md says how to add one.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from experiments.common.import_graph import ImportGraph
from experiments.common.record_staleness import State, state
from experiments.common.results_json import REPOSITORY

REGISTRY = REPOSITORY / "docs" / "results" / "claims.yaml"
COMPARISONS = ("exact", "interval", "over_seeds")
# Where a record says how many episodes each task had: the evaluation's own metrics, a report's top level,
# a summary's settings.
SAMPLES = ("samples_per_task", "evaluation_samples_per_task", "samples")


class ClaimsError(ValueError):
    """A registry entry that cannot be checked; the message names the claim, the key and the fix."""


@dataclass(frozen=True)
class Claim:
    """One registry entry (the YAML keys are the field names)."""

    name: str
    what: str  # the claim in words, as the docs state it
    results: str  # the results file recording it (relative to the repository root)
    # Dotted keys of the recorded value(s) in ``results``, the same in ``writes``; or recorded -> written.
    keys: list[str] | dict[str, str]
    command: str  # re-measures it; ``{output}`` is replaced by a temporary folder
    writes: str  # the file the command writes into ``{output}``
    compare: str  # exact | interval | over_seeds
    takes: str  # how long the command runs, roughly: its cost (printed before it starts and by --list)
    depends_on: list[str] = dataclasses.field(default_factory=list)  # inputs no import reaches: data files
    tolerance: float = 0.0  # exact: the largest absolute difference of a float still counted equal
    quick: bool = False  # runs in ``--quick`` (and in ``make test``): seconds, not minutes
    # Recorded keys whose value depends on the CPU kind (a warm start's success: docs/results/history.md):
    # re-measured and reported beside the verdict, never counted as a difference.
    cpu_dependent: list[str] = dataclasses.field(default_factory=list)

    @property
    def results_path(self) -> Path:
        return REPOSITORY / self.results

    @property
    def recorded_keys(self) -> list[str]:
        return list(self.keys)

    def written_key(self, key: str) -> str:
        """Where the command's file holds the value recorded at ``key``."""
        return self.keys[key] if isinstance(self.keys, dict) else key

    def files(self, graph: ImportGraph) -> list[str]:
        """The files the value comes from: those the command runs, its imports, and ``depends_on``."""
        return sorted({*(path.as_posix() for path in graph.command_files(self.command)), *self.depends_on})


def load_claims(path: str | Path = REGISTRY) -> dict[str, Claim]:
    """The claims of a registry file, by name, in file order."""
    path = Path(path)
    if not path.is_file():
        raise ClaimsError(f"no claims registry {path}; the project's is {REGISTRY}")
    entries = yaml.safe_load(path.read_text()) or {}
    fields = {item.name: item for item in dataclasses.fields(Claim)} if entries else {}
    required = {
        name
        for name, item in fields.items()
        if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
    } - {"name"}
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
        if not isinstance(entry["keys"], list | dict) or not entry["keys"]:
            raise ClaimsError(f"{where}: keys must be a list of dotted keys or a mapping recorded -> written")
        if "{output}" not in entry["command"]:
            raise ClaimsError(f"{where}: the command must write into {{output}} (a temporary folder)")
        stray = sorted(set(entry.get("cpu_dependent", [])) - set(entry["keys"]))
        if stray:
            raise ClaimsError(f"{where}: cpu_dependent names keys the claim does not record: {stray}")
        claims[name] = Claim(name=name, **entry)
    return claims


def observed(claim: Claim, results: Any, written: bool = False) -> dict[str, Any]:
    """The claim's values in its record (``written``: in the file its command wrote), by recorded key: the
    value, and for an interval claim (value, low, high), for an over-seeds claim (mean, half-width).
    KeyError names a key the file does not have."""
    values = {}
    for recorded in claim.recorded_keys:
        key = claim.written_key(recorded) if written else recorded
        value = value_at(results, key)
        if claim.compare == "interval":
            value = (value, value_at(results, f"{key}_ci95_low"), value_at(results, f"{key}_ci95_high"))
        elif claim.compare == "over_seeds":  # the interval beside the mean; None where no spread is recorded
            beside = path_to(results, key)[-2]
            value = (value, beside.get("ci95") if isinstance(beside, dict) else None)
        values[recorded] = value
    return values


def differences(claim: Claim, recorded: dict[str, Any], today: dict[str, Any]) -> list[str]:
    """One line per key whose value today does not reproduce the recorded one (empty: reproduced); the
    claim's ``cpu_dependent`` keys are left to :func:`cpu_dependent_lines`."""
    lines = []
    for key in claim.recorded_keys:
        if key in claim.cpu_dependent:
            continue
        if claim.compare == "interval":
            value, low, high = recorded[key]
            now = today[key][0]
            if not low <= now <= high:
                lines.append(f"{key}: recorded {value:.3f} (95% CI {low:.3f}-{high:.3f}), today {now:.3f}")
        elif claim.compare == "over_seeds":
            mean, half = recorded[key]
            now = today[key][0]
            if not abs(now - mean) <= (half or 0.0):  # no interval (one seed): only the same mean reproduces
                lines.append(f"{key}: recorded {mean:.3f} ± {half or 0.0:.3f} over seeds, today {now:.3f}")
        elif not _equal(recorded[key], today[key], claim.tolerance):
            lines.append(f"{key}: recorded {recorded[key]!r}, today {today[key]!r}")
    return lines


def cpu_dependent_lines(claim: Claim, recorded: dict[str, Any], today: dict[str, Any]) -> list[str]:
    """The claim's CPU-dependent figures, recorded and today, for a reader (not a verdict)."""

    def shown(value: Any) -> str:
        value = value[0] if isinstance(value, tuple) else value
        return f"{value:.3f}" if isinstance(value, float) else repr(value)

    return [
        f"{key}: recorded {shown(recorded[key])}, today {shown(today[key])} "
        "(depends on the CPU kind; not checked)"
        for key in claim.cpu_dependent
    ]


def _equal(recorded: Any, today: Any, tolerance: float) -> bool:
    if isinstance(recorded, float) and isinstance(today, float):
        return math.isclose(recorded, today, rel_tol=0.0, abs_tol=tolerance)
    return recorded == today


def claim_state(claim: Claim, results: dict[str, Any] | None, graph: ImportGraph) -> State:
    """The state of a claim's record (None: its file is missing) against the files its value comes from
    (experiments/common/record_staleness.py), with what else a reader should know: a tree with uncommitted
    changes, intervals that ignore the tasks' clustering. ``graph``: one per run, shared by the claims."""
    found = state(results, claim.files(graph))
    notes = []
    if results is not None and (results.get("provenance") or {}).get("dirty"):
        notes.append("recorded from a tree with uncommitted changes")
    try:
        samples = None if results is None else unclustered(claim, results)
    except KeyError:  # a key the record lacks: the verdict says so
        samples = None
    if samples:
        notes.append(f"intervals unclustered ({samples} episodes per task, no per-task outcomes)")
    return State("; ".join([found.label, *notes]), found.stale)


def unclustered(claim: Claim, results: Any) -> int | None:
    """For an interval claim whose evaluation ran k > 1 episodes per task but kept no per-task outcomes
    (``task_successes``, recorded by evaluations since they had them): k. Its interval treats the k
    episodes of a task as independent, so it is too narrow when tasks differ; None otherwise. KeyError
    names a key the file does not have."""
    if claim.compare != "interval":
        return None
    for key in claim.recorded_keys:
        scopes = [scope for scope in reversed(path_to(results, key)[:-1]) if isinstance(scope, dict)]
        if "task_successes" in scopes[0]:
            continue
        around = [item for scope in scopes for item in (scope, *_nested(scope))]
        counts = [scope[name] for scope in around for name in SAMPLES if isinstance(scope.get(name), int)]
        if counts and counts[0] > 1:
            return counts[0]
    return None


def _nested(scope: dict[str, Any]) -> list[dict[str, Any]]:
    """A scope's evaluation and settings sections, where transcribed records and summaries keep k."""
    return [scope[name] for name in ("evaluation", "settings") if isinstance(scope.get(name), dict)]


def value_at(results: Any, key: str) -> Any:
    """The value at a dotted ``key`` of a results file (a list is indexed by number); a name may hold dots
    itself (``runs.Sokoban, RL temperature 1.2.after``). KeyError names the part that is missing."""
    return path_to(results, key)[-1]


def path_to(results: Any, key: str) -> list[Any]:
    """The values from ``results`` down to ``key``: the file, each level the key passes, the value. At each
    level the longest name there wins, so names with dots need no quoting."""
    path, parts = [results], key.split(".")
    while parts:
        value = path[-1]
        if isinstance(value, list) and parts[0].isdigit() and int(parts[0]) < len(value):
            path.append(value[int(parts[0])])
            parts = parts[1:]
            continue
        names = [".".join(parts[:end]) for end in range(len(parts), 0, -1)]
        name = next((name for name in names if isinstance(value, dict) and name in value), None)
        if name is None:
            raise KeyError(f"{key!r}: no {parts[0]!r} there")
        path.append(value[name])
        parts = parts[len(name.split(".")) :]
    return path
