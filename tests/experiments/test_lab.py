"""``python -m experiments.lab``: the gain by seed and by task, the band a new seed should fall in, resuming,
and the check of a re-run against the band."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from experiments import lab
from experiments.common import comparison_runs, lab_entries, lab_report
from experiments.common.run_config import build_config, load_settings
from experiments.common.significance import prediction_band
from models.tiny import tiny_lm_path

TASKS = [10_000_000 + i for i in range(6)]


def evaluation(successes: list[int]) -> dict:
    """An evaluation of the six tasks, one sample each."""
    rate = sum(successes) / len(successes)
    return {
        "success": rate,
        "num_episodes": len(successes),
        "samples_per_task": 1,
        "task_seeds": TASKS,
        "task_successes": successes,
    }


def synthetic_run(seed: int, outcomes: list[list[int]]) -> dict:
    """A saved run whose evaluations (iterations 0, 10, 20, ...) had these per-task outcomes."""
    curve = []
    for index, successes in enumerate(outcomes):
        metrics = evaluation(successes)
        curve.append(
            {"iteration": 10 * index, "success": metrics["success"], "episodes": 6, "metrics": metrics}
        )
    trained = [point["success"] for point in curve[1:]]
    return {
        "env": "freshrl/FrozenLake-v0",
        "arm": "on_policy",
        "seed": seed,
        "curve": curve,
        "initial": curve[0]["success"],
        "peak": max(trained),
        "final": trained[-1],
        "training": [],
        "wall_s": 60.0 * (seed + 1),
        "peak_rss_gib": 1.0,
        "commit": "abc",
    }


def test_the_band_is_the_t_prediction_interval_with_bonferroni_over_points():
    curves = [[0.1, 0.3], [0.2, 0.5], [0.3, 0.4]]
    band = prediction_band(curves)
    quantile = stats.t.ppf(1 - 0.05 / 4, 2)  # 2 points, 3 seeds
    for point, values in enumerate(zip(*curves, strict=True)):
        half = quantile * np.std(values, ddof=1) * math.sqrt(1 + 1 / 3)
        assert band["mean"][point] == pytest.approx(np.mean(values))
        assert band["low"][point] == pytest.approx(np.mean(values) - half)
        assert band["high"][point] == pytest.approx(np.mean(values) + half)
    assert prediction_band([[0.1, 0.2]])["low"] is None  # one seed: nothing to predict a spread from


def test_the_gain_is_tested_by_seed_and_by_task_averaged_over_seeds():
    runs = [
        synthetic_run(0, [[1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]]),
        synthetic_run(1, [[0, 1, 0, 0, 0, 0], [1, 1, 0, 1, 0, 0]]),
        synthetic_run(2, [[0, 0, 0, 0, 0, 0], [1, 1, 0, 1, 0, 0]]),
    ]
    summary = lab_report.summarize("frozen_lake", runs)
    before, after = [1 / 6, 1 / 6, 0.0], [3 / 6, 3 / 6, 3 / 6]
    assert summary["gain"] == pytest.approx(np.mean(after) - np.mean(before))
    by_seed = summary["gain_by_seed"]
    assert by_seed["unit"] == "seed" and by_seed["n"] == 3
    d = np.subtract(after, before)
    assert by_seed["p_value"] == pytest.approx(stats.ttest_rel(after, before).pvalue)
    half = stats.t.ppf(0.975, 2) * np.std(d, ddof=1) / math.sqrt(3)
    assert by_seed["difference_ci95_low"] == pytest.approx(d.mean() - half)
    # By task: each task's rate averaged over the three seeds, then paired over the six tasks.
    task_before = [1 / 3, 1 / 3, 0, 0, 0, 0]
    task_after = [1, 1, 1 / 3, 2 / 3, 0, 0]
    by_task = summary["gain_by_task"]
    assert by_task["n"] == 6 and by_task["unit"].startswith("task")
    assert by_task["p_value"] == pytest.approx(stats.ttest_rel(task_after, task_before).pvalue)
    assert summary["in_zone"] is False  # starts at 11%
    assert summary["gains_with_power"] is True  # +39 points, both intervals above zero
    assert summary["curves"] == {"0": [1 / 6, 3 / 6], "1": [1 / 6, 3 / 6], "2": [0.0, 3 / 6]}
    assert summary["wall_minutes"] == {"mean": 2.0, "min": 1.0, "max": 3.0, "n": 3, "of": 3}


def test_a_gain_whose_task_interval_reaches_zero_is_not_claimed():
    # Every seed gains on the same single task: the seeds agree, but one task of six is no evidence.
    runs = [synthetic_run(seed, [[0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]]) for seed in range(3)]
    summary = lab_report.summarize("frozen_lake", runs)
    assert summary["gain_by_seed"]["p_value"] == 0.0  # no spread over seeds
    assert summary["gain_by_task"]["difference_ci95_low"] < 0
    assert summary["gains_with_power"] is False


def test_runs_evaluated_at_other_iterations_or_tasks_are_not_mixed():
    other_points = synthetic_run(1, [[0] * 6, [1] * 6, [1] * 6])
    with pytest.raises(ValueError, match="different settings"):
        lab_report.summarize("x", [synthetic_run(0, [[0] * 6, [1] * 6]), other_points])
    other_tasks = synthetic_run(1, [[0] * 6, [1] * 6])
    other_tasks["curve"][0]["metrics"]["task_seeds"] = [seed + 1 for seed in TASKS]
    with pytest.raises(ValueError, match="different validation tasks"):
        lab_report.task_gain([synthetic_run(0, [[0] * 6, [1] * 6]), other_tasks])


def test_a_curve_outside_the_band_is_named_by_its_iterations():
    runs = [synthetic_run(seed, [[0, 0, 0, 0, 0, seed % 2], [1, 1, 1, 0, 0, seed % 2]]) for seed in range(4)]
    summary = lab_report.summarize("x", runs)
    assert lab_report.outside_band(summary["band"], summary["band"]["mean"]) == []
    assert lab_report.outside_band(summary["band"], [0.9, 0.5]) == [0]
    band = {"iteration": [0, 10], "low": [0.1, 0.2], "high": [0.3, 0.4]}
    assert lab_report.outside_band(band, [0.1, 0.41]) == [10]
    assert lab_report.outside_band(band, [0.3, 0.2]) == []
    wider = lab_report.band_of([0, 10], list(summary["curves"].values()), 0.99)
    assert wider["low"][1] < summary["band"]["low"][1]  # (the high ends are both clipped at 1)


def test_leave_one_out_counts_the_seeds_outside_the_band_of_the_others():
    curves = [[0.0, 0.3], [0.0, 0.31], [0.0, 0.29], [0.0, 0.30], [0.0, 0.9]]
    assert lab_report.leave_one_out([0, 10], curves, 0.95) == 1  # the last seed, far from the others
    assert lab_report.leave_one_out([0, 10], curves[:2], 0.95) is None


def test_every_lab_entry_is_an_on_policy_run_evaluated_inside_training():
    assert lab.entries(), "the lab has no entry"
    for name, path in lab.entries().items():
        config = build_config(load_settings(path))
        assert config.replay_mode == "on_policy", name
        assert config.evaluation_interval, name
        # An entry measures its zone on >= 256 tasks; a quick entry is a check of the test suite.
        assert config.evaluation_num_tasks >= (128 if name.endswith("_quick") else 256), name


@pytest.fixture
def lab_dirs(tmp_path, monkeypatch):
    """A lab of one entry (the untrained tiny LM, so nothing is built) whose records go to tmp_path."""
    settings = tmp_path / "settings"
    settings.mkdir()
    (settings / "tiny.yaml").write_text(
        f"env: freshrl/FrozenLake-v0\nmodel: {tiny_lm_path()}\niterations: 10\n"
        "overrides: {replay_mode: on_policy, evaluation_num_tasks: 6, evaluation_interval: 10}\n"
    )
    monkeypatch.setattr(lab_entries, "SETTINGS", settings)
    monkeypatch.setattr(lab_entries, "RESULTS", tmp_path / "lab")
    monkeypatch.setattr(lab, "settings_shown", lambda name: f"settings/{name}.yaml")
    monkeypatch.setattr(comparison_runs, "start_ray", lambda **kwargs: None)
    monkeypatch.setattr(lab, "start_ray", lambda **kwargs: None)
    return tmp_path


def test_run_trains_missing_seeds_resumes_and_check_tests_a_new_seed(lab_dirs, monkeypatch, capsys):
    outcomes = {
        0: [[1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]],
        1: [[0, 1, 0, 0, 0, 0], [1, 1, 0, 1, 0, 0]],
        2: [[0, 0, 0, 0, 0, 0], [1, 1, 0, 1, 0, 0]],
        3: [[0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]],  # the check's new seed: far above the band
    }
    trained = []

    def train(run, config, settings, arm):
        trained.append(config.seed)
        return {**synthetic_run(config.seed, outcomes[config.seed]), "settings": settings}

    monkeypatch.setattr(comparison_runs, "train_and_evaluate", train)
    monkeypatch.setattr(lab, "train_and_evaluate", train)
    lab.main(["run", "tiny", "--seeds", "2"])
    assert trained == [0, 1]
    summary = lab.main(["run", "tiny", "--seeds", "3"])["tiny"]
    assert trained == [0, 1, 2]  # seeds 0 and 1 were read back
    assert summary["seeds"] == [0, 1, 2]
    assert lab.main(["report", "tiny"])["tiny"]["seeds"] == [0, 1, 2]  # every recorded seed, none dropped
    record = lab_dirs / "lab" / "tiny"
    saved = json.loads((record / "summary.json").read_text())
    assert saved["provenance"]["command"] == "python -m experiments.lab run tiny --seeds 3"
    assert "Gain +38.9 points" in (record / "README.md").read_text()
    floor = saved["blind_floor"]  # played on the tasks the evaluations played
    assert floor["tasks"] == len(TASKS) and 0 <= floor["success"] <= 1
    assert f"**Blind floor {100 * floor['success']:.1f}%" in (record / "README.md").read_text()
    assert (record / "curves.png").read_bytes().startswith(b"\x89PNG")
    assert "tiny: 3 seeds, before 0.111 -> after 0.500" in capsys.readouterr().out
    by_length = saved["by_solution_length"]  # the same tasks, binned by the oracle's moves
    assert sum(row["tasks"] for row in by_length) == len(TASKS)
    weighted = sum(row["tasks"] * row["end"] for row in by_length) / len(TASKS)
    assert weighted == pytest.approx(saved["after"]["mean"])  # every task in one bin, rates over seeds
    assert "## Success by solution length" in (record / "README.md").read_text()

    check = lab_dirs / "check"
    assert lab.main(["check", "tiny", "--output", str(check)]) is False
    assert trained[-1] == 3  # the first seed the record lacks
    out = capsys.readouterr().out
    assert "OUTSIDE: the curve leaves the 95% band of the recorded seeds at [10]" in out
    assert json.loads((check / "check.json").read_text())["outside_band_at"] == [10]

    assert lab.main(["check", "tiny", "--seed", "1", "--output", str(lab_dirs / "again")]) is True
    assert "the recorded seed 1 is reproduced exactly" in capsys.readouterr().out

    # On another CPU kind the start may move: each curve's change from its own start is compared.
    other = {**lab.machine(), "cpu_model": "Another CPU", "cpu_flags": ["avx2"]}
    monkeypatch.setattr(lab, "machine", lambda: other)
    outcomes[4] = [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1]]  # starts 2 tasks higher, gains like seed 0
    assert lab.main(["check", "tiny", "--seed", "4", "--output", str(lab_dirs / "other")]) is True
    out = capsys.readouterr().out
    assert "the start moves between CPU kinds" in out and "inside: the curve's change from its start" in out
    assert json.loads((lab_dirs / "other" / "check.json").read_text())["compared"] == "change from the start"


def test_unknown_entries_and_missing_records_name_the_fix(lab_dirs):
    with pytest.raises(SystemExit, match=r"no lab entry 'nope'; the entries are \['tiny'\]"):
        lab.main(["run", "nope"])
    with pytest.raises(SystemExit, match="has no record"):
        lab.main(["check", "tiny"])
    with pytest.raises(SystemExit, match="no finished run"):
        lab.main(["report", "tiny"])


def test_the_start_and_end_are_placed_against_the_blind_floors_interval():
    summary = {
        "before": {"mean": 0.10},
        "after": {"mean": 0.30},
        "blind_floor": {"success": 0.2, "ci95": 0.05},
    }
    assert (lab_report.floor_side(summary, "before"), lab_report.floor_side(summary, "after")) == (
        "below",
        "above",
    )
    assert lab_report.floor_side({**summary, "before": {"mean": 0.24}}, "before") == "at"
    assert lab_report.floor_side({**summary, "blind_floor": None}, "before") is None


def test_an_entry_trains_5_seeds_at_the_tiny_scale_and_3_at_smollm2s_by_default(lab_dirs):
    settings = lab_dirs / "settings"
    (settings / "larger.yaml").write_text(
        (settings / "tiny.yaml").read_text().replace("iterations: 10", "iterations: 10\nscale: smollm2")
    )
    assert lab.default_seeds("tiny") == 5 and lab.default_seeds("larger") == 3
