"""The README's results table is what experiments.results_table makes of docs/results/: a hand edit of the
table, or a results file changed without regenerating it, fails here."""

from __future__ import annotations

import json
import shutil

import pytest

from experiments import results_table


def test_the_committed_readme_table_is_the_generators_output():
    readme = results_table.README.read_text()
    assert results_table.with_table(readme) == readme
    assert results_table.main(["--check"]) == 0


def test_a_hand_edit_of_the_table_is_caught():
    readme = results_table.README.read_text()
    edited = readme.replace("35.9% (28.1-44.5%)", "39.5% (28.1-44.5%)", 1)
    assert edited != readme
    assert results_table.with_table(edited) == readme


def test_the_figures_come_from_the_results_files(tmp_path, monkeypatch):
    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)
    job = json.loads((copy / "default_job" / "summary.json").read_text())
    job["after"] = {"success": 0.5, "success_ci95_low": 0.41, "success_ci95_high": 0.59, "num_episodes": 128}
    (copy / "default_job" / "summary.json").write_text(json.dumps(job))
    monkeypatch.setattr(results_table, "RESULTS", copy)
    row = next(line for line in results_table.table().splitlines() if "`make demo`" in line)
    assert row.split(" | ")[2:5] == [
        "27.3% (20.4-35.6%)",
        "50.0% (41.0-59.0%) after 20 iterations (`make demo`, 128 tasks)",
        "+22.7 points, intervals separated",
    ]


def test_the_markers_must_be_there_once_each():
    with pytest.raises(ValueError, match="once each"):
        results_table.with_table("# a README without the table\n")
