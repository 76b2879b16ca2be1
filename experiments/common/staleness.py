"""Whether a recorded result is older than the code it depends on: commits that touched its dependency paths
since the commit its provenance records (``git rev-list --count``)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from experiments.common.results_json import REPOSITORY, git_output


def recorded_commit(results: dict[str, Any]) -> str | None:
    """The commit a results file records: its provenance's, or the top-level ``commit`` of reports written
    before provenance existed (``"10456f5 (with uncommitted changes)"`` -> ``"10456f5"``)."""
    commit = (results.get("provenance") or {}).get("commit", results.get("commit"))
    return commit.split()[0] if isinstance(commit, str) and commit.strip() else None


def commits_since(commit: str | None, paths: list[str], root: Path = REPOSITORY) -> int | None:
    """How many commits after ``commit`` (up to HEAD) touched any of ``paths``; None when that cannot be
    known (no commit recorded, no git, not a checkout, a commit this clone does not have)."""
    if commit is None:
        return None
    try:
        count = git_output(root, "rev-list", "--count", f"{commit}..HEAD", "--", *paths)
    except (OSError, subprocess.SubprocessError):
        return None
    return int(count)
