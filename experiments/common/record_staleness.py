"""Whether a recorded result is older than the code it comes from: the commits since the commit its provenance
records that touched the files its command runs (experiments/common/import_graph.py: the entry module and
the project modules it imports, transitively) or the inputs its claim lists (``depends_on``), and nothing
else: a commit elsewhere in the same folder leaves the record current.

A record's state is one of ``current``, ``stale (N commits touched ...)``, ``recorded before provenance``
(the file records no commit: transcribed from prose, or written before provenance existed), ``missing`` (no
results file), or ``unknown`` (no git, or a commit this clone does not have).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.common.results_json import REPOSITORY, git_output

SHOWN = 3  # files named in a stale state; the rest are counted


@dataclass(frozen=True)
class State:
    """A record's state against its code: the line ``--list`` prints, and whether re-recording is due."""

    label: str
    stale: bool = False


def recorded_commit(results: dict[str, Any]) -> str | None:
    """The commit a results file records: its provenance's, or the top-level ``commit`` of reports written
    before provenance existed (``"10456f5 (with uncommitted changes)"`` -> ``"10456f5"``)."""
    commit = (results.get("provenance") or {}).get("commit", results.get("commit"))
    return commit.split()[0] if isinstance(commit, str) and commit.strip() else None


def touching_commits(commit: str, paths: list[str], root: Path = REPOSITORY) -> dict[str, list[str]] | None:
    """The commits after ``commit`` (up to HEAD) that touched any of ``paths`` (files), each with the ones
    it touched, newest first; None when git cannot tell (no git, no checkout, a commit this clone lacks)."""
    if not paths:
        return {}
    try:
        log = git_output(root, "log", "--format=%x00%H", "--name-only", f"{commit}..HEAD", "--", *paths)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_log(log)


def parse_log(log: str) -> dict[str, list[str]]:
    """``git log --format=%x00%H --name-only`` output -> {commit: the files it touched}."""
    commits = {}
    for entry in log.split("\0")[1:]:
        sha, *files = entry.split()
        commits[sha] = files
    return commits


def state(results: dict[str, Any] | None, paths: list[str], root: Path = REPOSITORY) -> State:
    """The state of a record (None: its file is missing) whose value comes from ``paths``."""
    if results is None:
        return State("missing")
    commit = recorded_commit(results)
    if commit is None:
        return State("recorded before provenance")
    commits = touching_commits(commit, paths, root)
    if commits is None:
        return State(f"unknown (no git, or {commit} is not in this clone)")
    if not commits:
        return State("current")
    count = f"{len(commits)} commit{'s' if len(commits) > 1 else ''}"
    return State(f"stale ({count} touched {named(commits)})", stale=True)


def named(commits: dict[str, list[str]]) -> str:
    """The files the commits touched, the most touched first: ``a.py, b.py, c.py and 4 more``."""
    counts: dict[str, int] = {}
    for files in commits.values():
        for path in files:
            counts[path] = counts.get(path, 0) + 1
    ordered = sorted(counts, key=lambda path: (-counts[path], path))
    more = f" and {len(ordered) - SHOWN} more" if len(ordered) > SHOWN else ""
    return ", ".join(ordered[:SHOWN]) + more
