"""The learning lab, trained for real: one seed more than an entry's record, whose curve must fall inside the
99.5% band of the recorded seeds (docs/learning_lab.md, "The quick entry in `make test`"): the quick entry in
`make test`, the FrozenLake entry (3 minutes) in the slow tier."""

from __future__ import annotations

import json

import pytest

from experiments import lab
from experiments.common import lab_entries

COVERAGE = 0.995  # a false-failure rate under 1% (lab_report.CHECK_COVERAGES says why not 0.99)


def test_the_quick_entry_learns_inside_its_recorded_band(tmp_path, ray_session):
    record = json.loads((lab_entries.RESULTS / "frozen_lake_quick" / "summary.json").read_text())
    assert len(record["seeds"]) >= 20, "the band is set from at least 20 seeds"
    # Measured: no recorded seed leaves the band of the others at this coverage.
    assert record["band_leave_one_out"][str(COVERAGE)] == 0
    assert record["changes_leave_one_out"][str(COVERAGE)] == 0  # the check on another CPU kind
    check_a_new_seed("frozen_lake_quick", record, tmp_path)


@pytest.mark.slow
def test_the_frozen_lake_entry_learns_inside_its_recorded_band(tmp_path, ray_session):
    record = json.loads((lab_entries.RESULTS / "frozen_lake" / "summary.json").read_text())
    check_a_new_seed("frozen_lake", record, tmp_path)


def check_a_new_seed(entry: str, record: dict, tmp_path) -> None:
    # No capsys: the run's console filter (quiet_logs.install) wraps the streams it finds, for the process.
    inside = lab.check_entry(entry, None, tmp_path, ["check", entry], COVERAGE)
    check = json.loads((tmp_path / "check.json").read_text())
    assert check["seed"] == max(record["seeds"]) + 1
    assert len(check["curve"]) == len(record["band"]["iteration"])
    assert inside, f"seed {check['seed']}: {check['curve']} against {check['band']}"
