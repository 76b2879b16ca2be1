"""Which code and which CPUs made a set of saved runs: a comparison, a lab entry or a replay study resumed
over several sessions gathers runs made at different commits and on different CPU kinds, and a report's own
provenance (the commit and machine that wrote it) says neither. On one CPU kind the runs are deterministic;
across kinds the start moves (docs/learning_lab.md), so a reader needs both to know what reproduces what."""

from __future__ import annotations

from collections import Counter
from typing import Any

from experiments.common.results_json import cpu_name


def made_by(runs: list[dict[str, Any]]) -> str:
    """:func:`commits_sentence` then :func:`machines_sentence`, each with a leading space, or empty."""
    return commits_sentence(runs) + machines_sentence(runs)


def commits_sentence(runs: list[dict[str, Any]]) -> str:
    """Which code made the runs, when they come from more than one commit, or any from uncommitted changes;
    empty otherwise. Runs saved before runs recorded their commit count as unknown."""
    made_by_label: Counter[str] = Counter()
    for run in runs:
        commit, dirty = run.get("commit"), run.get("dirty")
        label = "unknown" if commit is None else commit[:7] + (" with uncommitted changes" if dirty else "")
        made_by_label[label] += 1
    commits = {run.get("commit") for run in runs}
    dirty = sum(bool(run.get("dirty")) for run in runs)
    if len(commits) > 1:
        counts = ", ".join(f"{count} at {label}" for label, count in made_by_label.items())
        return f" The runs were made by more than one commit: {counts}."
    if not dirty:
        return ""
    commit = (next(iter(commits)) or "unknown")[:7]
    which = "all of them" if dirty == len(runs) else f"{dirty} of the {len(runs)}"
    return (
        f" The runs were made at one commit, {commit}, {which} with uncommitted changes, which the commit "
        "alone does not reproduce."
    )


def machines_sentence(runs: list[dict[str, Any]]) -> str:
    """The CPUs the runs ran on (model, family and model numbers, the flags that change the arithmetic), with
    how many on each when more than one; empty when no run recorded its machine."""
    kinds = Counter(cpu_label(run["machine"]) if run.get("machine") else None for run in runs)
    if set(kinds) == {None}:
        return ""
    unrecorded = kinds.pop(None, 0)
    if len(kinds) == 1 and not unrecorded:
        return f" The runs ran on {next(iter(kinds))}."
    counts = "; ".join(f"{count} on {label}" for label, count in kinds.items())
    if unrecorded:
        counts += f"; {unrecorded} saved before runs recorded their CPU"
    return f" The runs' CPUs: {counts}."


def cpu_label(machine: dict[str, Any]) -> str:
    """E.g. ``AMD EPYC, family 26 model 2 (avx2, fma, avx512f, avx512_bf16)``: what tells CPU kinds apart."""
    flags = ", ".join(machine.get("cpu_flags") or ()) or "no flags recorded"
    return f"{cpu_name(machine) or 'an unnamed CPU'} ({flags})"
