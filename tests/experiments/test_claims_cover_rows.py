"""Every figure README's generated tables state has a claim (docs/results/claims.yaml) that re-checks it.

The rows come from experiments/results_table.py itself: its tables are generated with the results files
loaded through a recorder that notes each success rate and mean over seeds a row reads, so a row added
there without a claim fails here, with no list of rows kept by hand."""

from __future__ import annotations

from typing import Any

import pytest

from experiments import results_table
from experiments.common.claims import Claim, load_claims

FIGURES = ("success", "mean")  # the names under which results files keep success rates and means over seeds


class _Dict(dict):
    """A results file's mapping that notes the figures read from it, with their dotted keys."""

    def __init__(self, value: dict[str, Any], path: str, read: set[str]) -> None:
        super().__init__(value)
        self.path, self.read = path, read

    def __getitem__(self, key: str) -> Any:
        return _tracked(super().__getitem__(key), _join(self.path, key), self.read)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def values(self) -> list[Any]:  # type: ignore[override]
        return [self[key] for key in self]

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]
        return [(key, self[key]) for key in self]


class _List(list):
    def __init__(self, value: list[Any], path: str, read: set[str]) -> None:
        super().__init__(value)
        self.path, self.read = path, read

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return super().__getitem__(index)
        value = super().__getitem__(index)
        position = index % len(self)  # curve[-1] is the point the claims name by its number
        return _tracked(value, _join(self.path, str(position)), self.read)

    def __iter__(self) -> Any:
        return (self[position] for position in range(len(self)))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _tracked(value: Any, path: str, read: set[str]) -> Any:
    if isinstance(value, dict):
        return _Dict(value, path, read)
    if isinstance(value, list):
        return _List(value, path, read)
    if path.rpartition(".")[2] in FIGURES and isinstance(value, int | float):
        read.add(path)
    return value


def figures_read(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """Results file (relative to the repository) -> the dotted keys of the figures README's tables read."""
    read: dict[str, set[str]] = {}
    load = results_table.load

    def recording(name: str) -> Any:
        return _tracked(load(name), "", read.setdefault(f"docs/results/{name}", set()))

    monkeypatch.setattr(results_table, "load", recording)
    results_table.table()
    results_table.replay_table()
    return read


def unclaimed(read: dict[str, set[str]], claims: dict[str, Claim]) -> list[str]:
    """'file: key' for each figure no claim re-checks: a claim of that file must name the figure's key or a
    key inside the record holding it (a mean of seeds is re-checked through one of its seeds)."""
    missing = []
    for results, keys in sorted(read.items()):
        named = [key for claim in claims.values() if claim.results == results for key in claim.recorded_keys]
        for key in sorted(keys):
            record = key.rpartition(".")[0]
            if not any(name == key or name.startswith(f"{record}.") for name in named):
                missing.append(f"{results}: {key}")
    return missing


def test_every_results_file_a_table_row_reads_is_named_by_a_claim(monkeypatch):
    read = figures_read(monkeypatch)
    assert "docs/results/default_job/summary.json" in read and "docs/results/smollm2_rl/results.json" in read
    claimed = {claim.results for claim in load_claims().values()}
    assert sorted(set(read) - claimed) == []


def test_every_figure_a_table_row_states_is_re_checked_by_a_claim(monkeypatch):
    read = figures_read(monkeypatch)
    assert "after.success" in read["docs/results/default_job/summary.json"]
    assert "runs.Sokoban, RL temperature 1.2.after.success" in read["docs/results/smollm2_rl/results.json"]
    missing = unclaimed(read, load_claims())
    assert not missing, "add a claim to docs/results/claims.yaml for:\n" + "\n".join(missing)


def test_a_row_whose_claim_is_gone_is_reported(monkeypatch):
    claims = load_claims()
    without = {name: claim for name, claim in claims.items() if name != "smollm2-rl-sokoban-temperature"}
    assert unclaimed(figures_read(monkeypatch), without) == [
        "docs/results/smollm2_rl/results.json: runs.Sokoban, RL temperature 1.2.after.success",
        "docs/results/smollm2_rl/results.json: runs.Sokoban, RL temperature 1.2.start.success",
    ]
