"""The repository explains itself: its files cite the papers, peers' code or the project's own docs/ pages,
never a document a clone does not have or a tracker's item number, and every repository path they name
exists (a moved file leaves no stale path behind). Reads text files only: no heavy imports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The patterns are assembled from pieces so that this file does not match them itself.
_SHARED, _ISSUE = "sha" + "red", "[Ii]" + "ssues?"
FORBIDDEN = {
    "a document outside the repository": re.compile(r"(?:\.\./)?" + _SHARED + r"/(?:notes|papers|design)\b"),
    "the outside design page": re.compile("ARCHI" + r"TECTURE\.md"),
    "an outside note": re.compile(r"(?<![\w/.-])(?:plat" + r"form|anc" + r"hors|STY" + r"LE)\.md\b"),
    "an issue number": re.compile(r"\b" + _ISSUE + r" ?#?[0-9]+"),
}

LAYER_DIRS = ("envs", "models", "algorithms", "experiments", "benchmarks", "docs", "examples", "tests")
# A repository path: one of the top-level folders, then a file name with one of these extensions. Taken
# where it starts a path (not inside one such as site-packages/models/x.py), or after "../" in docs links.
REPO_PATH = re.compile(
    r"(?:(?<=\.\./)|(?<![\w/.-]))((?:" + "|".join(LAYER_DIRS) + r")/[A-Za-z0-9_/.-]+\.(?:py|md|yaml|sh))"
    r"(?![A-Za-z0-9_/-])"
)
# Paths that name files a command writes, not files of the tree.
GENERATED_PREFIXES = ("docs/results/gpu_check/",)


def tracked_files() -> list[Path]:
    """The tracked files (``git ls-files``) in a checkout; elsewhere (an sdist, a copy) every file of the
    tree outside hidden folders and caches."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout
        names = [name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        names = []
    if names:
        return [ROOT / name for name in names if (ROOT / name).is_file()]
    skip = {"__pycache__", "node_modules", "build", "dist"}
    return [
        path
        for path in ROOT.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") or part in skip for part in path.relative_to(ROOT).parts[:-1])
    ]


def text_files() -> dict[str, str]:
    """{repository-relative path: text} of the tracked files that are UTF-8 text."""
    texts = {}
    for path in tracked_files():
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[path.relative_to(ROOT).as_posix()] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def outside_references(texts: dict[str, str]) -> list[str]:
    """'file:line: what (match)' for every forbidden reference."""
    found = []
    for name, text in sorted(texts.items()):
        for number, line in enumerate(text.splitlines(), start=1):
            for what, pattern in FORBIDDEN.items():
                for match in pattern.finditer(line):
                    found.append(f"{name}:{number}: {what} ({match.group(0)!r})")
    return found


def missing_paths(texts: dict[str, str], exists) -> list[str]:
    """'file:line: path' for every repository path named in ``texts`` that ``exists`` says is absent."""
    found = []
    for name, text in sorted(texts.items()):
        for number, line in enumerate(text.splitlines(), start=1):
            for match in REPO_PATH.finditer(line):
                path = match.group(1)
                if not path.startswith(GENERATED_PREFIXES) and not exists(path):
                    found.append(f"{name}:{number}: {path}")
    return found


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    found = text_files()
    assert "pyproject.toml" in found and __file__.endswith("test_self_contained.py")
    return found


def test_no_reference_outside_the_repository(texts):
    offenders = outside_references(texts)
    assert not offenders, (
        "cite docs/design.md (or another docs/ page), the paper (arXiv id + equation), a peer's code, or "
        "write the one-line reason instead of:\n" + "\n".join(offenders)
    )


def test_every_named_repository_path_exists(texts):
    offenders = missing_paths(texts, lambda path: (ROOT / path).exists())
    assert not offenders, (
        "these files name repository paths that do not exist (moved or renamed?); fix the path, or add a "
        "generated one to GENERATED_PREFIXES:\n" + "\n".join(offenders)
    )


def test_the_checks_catch_what_they_are_for():
    gone = ["mod" + "els/gone.py", "do" + "cs/gone.md"]  # in pieces, or this file would name them
    text = {
        "a.py": "\n".join(
            [
                "# see ../" + _SHARED + "/papers/dapo.md and plat" + "form.md",
                "# ARCHI" + "TECTURE.md section 3",
                "# (is" + "sue 11 item 6), Is" + "sue #12",
                f"# {gone[0]} and [doc](../{gone[1]}), not site-packages/models/x.py",
                "# docs/design.md and docs/results/gpu_check/run.sh",
            ]
        )
    }
    assert len(outside_references(text)) == 5
    missing = missing_paths(text, lambda path: (ROOT / path).exists())
    assert missing == [f"a.py:4: {path}" for path in gone]
