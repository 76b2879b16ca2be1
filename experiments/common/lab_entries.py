"""The learning lab's entries and records, where ``experiments.lab`` and ``experiments.replay_study`` find
them: an entry is a settings file in :data:`SETTINGS` (its name is the file's stem), its record a folder of
:data:`RESULTS` (docs/learning_lab.md)."""

from __future__ import annotations

from pathlib import Path

from experiments.common.results_json import REPOSITORY
from experiments.common.run_config import SETTINGS_DIR

SETTINGS = SETTINGS_DIR / "lab"
RESULTS = REPOSITORY / "docs" / "results" / "lab"


def entries() -> dict[str, Path]:
    """Every lab entry: name -> its settings file."""
    return {path.stem: path for path in sorted(SETTINGS.glob("*.yaml"))}


def entry_file(name: str, prog: str) -> Path:
    """The settings file of entry ``name``; SystemExit (headed ``prog``) naming the entries when there is
    none."""
    known = entries()
    if name not in known:
        raise SystemExit(f"{prog}: no lab entry {name!r}; the entries are {sorted(known)} ({SETTINGS})")
    return known[name]
