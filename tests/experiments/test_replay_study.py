"""``python -m experiments.replay_study``: the episode AUC, the pre-registered tests by seed and by task, Holm
over a regime's family, powered nulls, and the study's runs trained, resumed and reported through
``experiments.compare``'s code (training faked as in test_lab.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from experiments import replay_study
from experiments.common import comparison_runs, lab_entries, replay_auc, replay_study_report
from experiments.common.significance import holm
from models.tiny import tiny_lm_path

TASKS = [10_000_000 + i for i in range(6)]
MODES = replay_study_report.MODES


def evaluation(successes: list[int]) -> dict:
    """An evaluation of the six tasks, one sample each."""
    return {
        "success": sum(successes) / len(successes),
        "num_episodes": len(successes),
        "samples_per_task": 1,
        "task_seeds": TASKS,
        "task_successes": successes,
    }


def synthetic_run(
    mode: str, seed: int, outcomes: list[list[int]], sampled: list[int], every: int = 1, **extra
) -> dict:
    """A saved run: evaluations every ``every`` iterations with these per-task outcomes, and one training
    row per iteration with ``sampled`` groups (and, for a replay mode, replay batches whose KL above the
    fresh batch's is 0.01 per iteration of age)."""
    curve = []
    for index, successes in enumerate(outcomes):
        metrics = evaluation(successes)
        curve.append({"iteration": every * index, "success": metrics["success"], "metrics": metrics})
    rows = []
    for iteration, groups in enumerate(sampled):
        row = {"rollout/groups_sampled": float(groups)}
        if mode != "on_policy":
            age = 1.0 + iteration % 3
            row |= {
                "replay/is_weight_mean": 0.5,
                "replay/batch_mean_age": age,
                "learners/train/approx_kl_replay": 0.01 * age,
                "learners/train/approx_kl_fresh": 0.0,
            }
        rows.append(row)
    trained = [point["success"] for point in curve[1:]]
    return {
        "env": "freshrl/FrozenLake-v0",
        "arm": mode,
        "seed": seed,
        "curve": curve,
        "initial": curve[0]["success"],
        "peak": max(trained),
        "final": trained[-1],
        "training": rows,
        "wall_s": 60.0,
        "peak_rss_gib": 1.0,
        "commit": "abc",
        **extra,
    }


# ------------------------------------------------------------------------------------------ AUC
def test_the_auc_is_the_mean_of_the_piecewise_linear_curve_over_the_budget():
    episodes, values = [0, 10, 30], [0.2, 0.4, 0.8]
    # Trapezoids: 10 x 0.3 + 20 x 0.6 = 15 over 30 episodes.
    assert replay_auc.auc(episodes, values, 30) == pytest.approx(0.5)
    # Cut at 20 episodes, where the curve is at 0.6: 3 + 10 x (0.4 + 0.6) / 2 = 8 over 20.
    assert replay_auc.auc(episodes, values, 20) == pytest.approx(0.4)
    # Inside the first segment: 5 x (0.2 + 0.3) / 2 = 1.25 over 5.
    assert replay_auc.auc(episodes, values, 5) == pytest.approx(0.25)
    assert replay_auc.auc_weights(episodes, 20).sum() == pytest.approx(1)  # a flat curve's AUC is its value


def test_a_budget_beyond_the_curve_is_refused_not_extrapolated():
    with pytest.raises(ValueError, match="not extrapolated"):
        replay_auc.auc([0, 10, 30], [0.2, 0.4, 0.8], 31)
    with pytest.raises(ValueError, match="starts at 0"):
        replay_auc.auc([5, 10], [0.2, 0.4], 10)


def test_episodes_count_every_sampled_group_up_to_each_evaluation():
    run = synthetic_run("per", 0, [[0] * 6, [1] * 6, [1] * 6], sampled=[4, 8, 4, 4], every=2)
    # Group size 8: iterations 1-2 sampled 12 groups (96 episodes), iterations 3-4 another 8 (64).
    assert replay_auc.episode_curve(run, 8) == ([0, 96, 160], [0.0, 1.0, 1.0])
    shorter = synthetic_run("per", 1, [[0] * 6, [1] * 6], sampled=[4, 4], every=2)
    assert replay_auc.budget([run, shorter], 8) == 64
    assert replay_auc.run_auc(run, 8, 64) == pytest.approx(64 / 96 / 2)  # half-way up the first segment
    del run["training"][2]["rollout/groups_sampled"]
    with pytest.raises(ValueError, match="iteration 3 .* rollout/groups_sampled"):
        replay_auc.episode_curve(run, 8)


def test_each_tasks_auc_integrates_its_outcomes_as_the_run_is_integrated():
    outcomes = [[0, 0, 1, 0, 0, 0], [1, 0, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]]
    run = synthetic_run("per", 0, outcomes, sampled=[4, 4])  # episodes 0, 32, 64: weights 1/4, 1/2, 1/4
    by_task = replay_auc.task_auc(run, 8, 64)
    assert by_task == pytest.approx(dict(zip(TASKS, [0.75, 0.25, 0.75, 0, 0, 0], strict=True)))
    assert np.mean(list(by_task.values())) == pytest.approx(replay_auc.run_auc(run, 8, 64))


# ------------------------------------------------------------------------------------------ tests
def study_runs(extra_freshper_task: bool = True) -> list[dict]:
    """Three seeds x four modes on the same six tasks; FreshPER solves one task more than the others from
    the first evaluation after training on (seed 2 of on-policy one task less)."""
    runs = []
    for mode in MODES:
        for seed in range(3):
            solved = 2 + (mode == "freshper" and extra_freshper_task) - (mode == "on_policy" and seed == 2)
            start = [1] + [0] * 5
            after = [1] * solved + [0] * (6 - solved)
            runs.append(synthetic_run(mode, seed, [start, after, after], sampled=[4, 4 + seed]))
    return runs


def test_hypotheses_are_tested_by_seed_and_by_task_on_auc():
    summary = replay_study_report.summarize("tiny", "rollout_limited", study_runs(), group_size=8)
    assert summary["seeds"] == [0, 1, 2] and summary["budget"] == 64  # seed 0's 8 groups x 8
    # Seed 0 ends at B; the other seeds' curves are cut inside their last segment.
    on_policy = summary["modes"]["on_policy"]["auc_by_seed"]
    freshper = summary["modes"]["freshper"]["auc_by_seed"]
    weights = [replay_auc.auc_weights(replay_auc.episodes_at_evaluations(run, 8), 64) for run in study_runs()]
    assert on_policy[0] == pytest.approx(weights[0] @ [1 / 6, 2 / 6, 2 / 6])
    assert freshper[2] == pytest.approx(weights[8] @ [1 / 6, 3 / 6, 3 / 6])
    tests = {test["hypothesis"]: test for test in summary["tests"]}
    assert list(tests) == ["H1", "H2", "exploratory"]  # H3 only under fast drift
    h1 = tests["H1"]
    assert h1["by_seed"]["p_value"] == pytest.approx(stats.ttest_rel(freshper, on_policy).pvalue)
    # By task: task 2 is solved by FreshPER alone (all seeds), task 1 by on-policy on seeds 0 and 1 only.
    # Task 0 is solved throughout (AUC 1); another task solved after training has the AUC 1 - w_0.
    solved = {"on_policy": [2, 2, 1], "freshper": [3, 3, 3]}
    task_on_policy, task_freshper = (
        [
            np.mean([(1 - w[0]) * (t < n) for w, n in zip(cell, solved[mode], strict=True)])
            for t in range(1, 6)
        ]
        for mode, cell in (("on_policy", weights[:3]), ("freshper", weights[6:9]))
    )
    assert h1["by_task"]["n"] == 6
    expected = stats.ttest_rel([1, *task_freshper], [1, *task_on_policy]).pvalue
    assert h1["by_task"]["p_value"] == pytest.approx(expected)
    assert tests["exploratory"]["by_seed"]["p_holm"] is None  # not in the family
    # The replay health comes from the runs' replay metrics and their drift fit.
    assert summary["modes"]["freshper"]["replay"]["replay/is_weight_mean"] == pytest.approx(0.5)
    assert summary["modes"]["per"]["drift"]["kl_per_age"] == pytest.approx(0.01)
    assert summary["modes"]["on_policy"]["drift"] is None
    fast = replay_study_report.summarize("tiny", "fast_drift", study_runs(), group_size=8)
    assert [test["hypothesis"] for test in fast["tests"]] == ["H1", "H2", "H3", "exploratory"]
    assert fast["tests"][2]["claim"] == "on-policy > standard PER"


def fake_test(hypothesis: str, p_seed: float, difference: float = 0.05) -> dict:
    """A confirmatory test whose by-task p is tiny, so the by-seed p decides its claim."""
    return {
        "hypothesis": hypothesis,
        "higher": "freshper",
        "lower": "on_policy",
        "confirmatory": True,
        "difference": difference,
        "by_seed": {"p_value": p_seed, "difference": difference},
        "by_task": {"p_value": 1e-6, "difference": difference},
        "powered": False,
    }


def test_the_family_is_holm_adjusted_over_every_entry_of_a_regime():
    a = {"entry": "a", "regime": "fast_drift", "tests": [fake_test("H1", 0.01), fake_test("H2", 0.04)]}
    b = {"entry": "b", "regime": "fast_drift", "tests": [fake_test("H1", 0.03), fake_test("H2", 0.5)]}
    table = replay_study_report.family([a, b])
    adjusted = [test["by_seed"]["p_holm"] for test in table["tests"]]
    assert adjusted == pytest.approx([0.04, 0.09, 0.09, 0.5])  # 0.01 x 4; 0.03 x 3 (0.04 x 2 < it); 0.5
    assert adjusted == pytest.approx(holm([0.01, 0.04, 0.03, 0.5]))
    outcomes = [(test["entry"], test["hypothesis"], test["outcome"]) for test in table["tests"]]
    assert outcomes[0] == ("a", "H1", "supported")
    assert outcomes[1][2] == "underpowered (separated by task only: no claim)"
    assert "p_holm" not in a["tests"][0]["by_seed"]  # the entries' own tests are left as they were
    with pytest.raises(ValueError, match="one regime"):
        replay_study_report.family([a, {**b, "regime": "rollout_limited"}])


def test_a_null_is_powered_only_where_both_units_would_detect_the_proportional_effect():
    share = replay_study_report.PROPORTIONAL_SHARE  # the paper's NQ Search row: +46% of on-policy
    assert share == pytest.approx(0.742 / 0.508 - 1) and round(share, 2) == 0.46
    h1 = replay_study_report.HYPOTHESES[0]
    on_policy = [0.30, 0.31, 0.32, 0.33, 0.34]
    tasks = {"on_policy": {t: 0.3 + 0.01 * t for t in range(20)}}

    def test_with(differences: list[float], task_differences: list[float]) -> dict:
        aucs = {"on_policy": on_policy, "freshper": np.add(on_policy, differences).tolist()}
        task_aucs = {
            **tasks,
            "freshper": {t: tasks["on_policy"][t] + d for t, d in enumerate(task_differences)},
        }
        test = replay_study_report.compare_modes(h1, aucs, task_aucs, effect=0.46 * 0.10)  # gain 10 points
        replay_study_report.apply_holm([test])
        return test

    tight = [0.002, -0.002, 0.001, -0.001, 0.0]
    small_tasks = [0.002 * (-1) ** t for t in range(20)]
    powered = test_with(tight, small_tasks)
    sd = np.std(tight, ddof=1)
    detectable_by_seed = (stats.t.ppf(0.975, 4) + stats.t.ppf(0.8, 4)) * sd / math.sqrt(5)
    assert powered["by_seed"]["detectable"] == pytest.approx(detectable_by_seed)
    assert powered["detectable"] == pytest.approx(max(detectable_by_seed, powered["by_task"]["detectable"]))
    assert powered["detectable"] < 0.046 and powered["outcome"] == "powered null"
    wide = test_with([0.1, -0.1, 0.12, -0.12, 0.0], small_tasks)  # the seeds spread: 5 cannot see 4.6 points
    assert wide["by_seed"]["detectable"] > 0.046 and wide["outcome"] == "underpowered"
    assert test_with([0.05, 0.06, 0.05, 0.06, 0.055], [0.055] * 19 + [0.056])["outcome"] == "supported"
    assert test_with([-0.05, -0.06, -0.05, -0.06, -0.055], [-0.055] * 20)["outcome"] == "opposite direction"


# ------------------------------------------------------------------------------------------ command line
def test_the_default_iterations_are_where_the_lab_curve_reaches_90_percent_of_its_gain():
    chosen, reason = replay_study.iterations_from_curve([0, 3, 6], [0.1, 0.3, 0.32], interval=5)
    assert chosen == 5 and "first reaches 90% of its gain (0.298) at iteration 3" in reason
    assert replay_study.iterations_from_curve([0, 150], [0.0, 1.0], interval=50)[0] == 100  # at most 100
    with pytest.raises(ValueError, match="does not gain"):
        replay_study.iterations_from_curve([0, 10], [0.3, 0.3], interval=10)


@pytest.fixture
def study_dirs(tmp_path, monkeypatch):
    """A lab of one entry (the untrained tiny LM, so nothing is built), its lab record, and the study's
    records in tmp_path."""
    settings = tmp_path / "settings"
    settings.mkdir()
    (settings / "tiny.yaml").write_text(
        f"env: freshrl/FrozenLake-v0\nmodel: {tiny_lm_path()}\niterations: 40\n"
        "overrides: {replay_mode: on_policy, evaluation_num_tasks: 6, evaluation_interval: 10}\n"
    )
    record = tmp_path / "lab" / "tiny"
    record.mkdir(parents=True)
    band = {"iteration": [0, 10, 20, 30, 40], "mean": [0.2, 0.3, 0.39, 0.38, 0.4]}
    (record / "summary.json").write_text(json.dumps({"band": band}))
    monkeypatch.setattr(lab_entries, "SETTINGS", settings)
    monkeypatch.setattr(lab_entries, "RESULTS", tmp_path / "lab")
    monkeypatch.setattr(replay_study, "STUDY_RESULTS", tmp_path / "study")
    monkeypatch.setattr(comparison_runs, "start_ray", lambda **kwargs: None)
    return tmp_path


def test_run_trains_the_missing_runs_resumes_and_reports(study_dirs, monkeypatch, capsys):
    trained = []

    def train(run, config, settings, arm):
        if len(trained) == 2 and not trained[-1][2]:  # the first session stops after two runs
            trained.append((arm, config.seed, True))
            raise KeyboardInterrupt
        trained.append((arm, config.seed, False))
        step = {"freshper": 2}.get(arm, 1)
        points = range(run.iterations // 10 + 1)
        outcomes = [[1] * min(6, 1 + step * k) + [0] * (6 - min(6, 1 + step * k)) for k in points]
        rows = [4 + (config.seed + i) % 2 for i in range(run.iterations)]
        machine = {"cpu_model": "Test CPU", "cpu_generation": None, "cpu_flags": ["avx2"]}
        saved = synthetic_run(arm, config.seed, outcomes, rows, every=10, machine=machine)
        return {**saved, "settings": settings}

    monkeypatch.setattr(comparison_runs, "train_and_evaluate", train)
    with pytest.raises(KeyboardInterrupt):
        replay_study.main(["run", "tiny", "--regime", "rollout_limited", "--seeds", "2"])
    record = study_dirs / "study" / "tiny-rollout_limited"
    partial = json.loads((record / "summary.json").read_text())
    assert partial["seeds"] == [] and partial["incomplete_seeds"] == [0] and len(partial["missing"]) == 6
    assert "No seed has finished in every mode yet" in (record / "README.md").read_text()
    out = capsys.readouterr().out
    # The lab curve (0.2 -> 0.4) first reaches 0.38 at iteration 20, on the interval of 10.
    assert "tiny rollout_limited: 20 iterations (the lab's on-policy mean curve" in out

    summary = replay_study.main(["run", "tiny", "--regime", "rollout_limited", "--seeds", "2"])
    assert [(arm, seed) for arm, seed, stopped in trained if not stopped] == [
        ("on_policy", 0), ("per", 0), ("freshper", 0), ("freshper_poly", 0),
        ("on_policy", 1), ("per", 1), ("freshper", 1), ("freshper_poly", 1),
    ]  # fmt: skip
    assert "20 iterations (the study's saved runs)" in capsys.readouterr().out
    saved = json.loads((record / "runs" / "FrozenLake-v0__freshper__seed1.json").read_text())["settings"]
    # The regime halves the tiny scale's 4 prompts; every mode runs the iterations chosen.
    assert saved["overrides"]["prompts_per_iteration"] == 2 and saved["iterations"] == 20
    assert summary["seeds"] == [0, 1] and summary["missing"] == []
    assert summary["regime_keys"] == {"prompts_per_iteration": 2, "replay_capacity": 128}
    assert summary["modes"]["freshper"]["auc"]["mean"] > summary["modes"]["on_policy"]["auc"]["mean"]
    readme = (record / "README.md").read_text()
    assert "**Budget B = " in readme and "| H1 | FreshPER > on-policy |" in readme
    assert "The runs ran on Test CPU (avx2)." in readme  # the runs' machine, not only the report writer's
    assert (record / "curves.png").read_bytes().startswith(b"\x89PNG")
    provenance = json.loads((record / "summary.json").read_text())["provenance"]
    command = "python -m experiments.replay_study run tiny --regime rollout_limited --seeds 2 --iterations 20"
    assert provenance["command"] == command

    count = len(trained)
    again = replay_study.main(["report", "tiny", "--regime", "rollout_limited"])
    assert len(trained) == count and again["seeds"] == [0, 1]  # nothing retrained, every seed reported
    table = replay_study.main(["family", "--regime", "rollout_limited"])
    assert table["entries"] == ["tiny"] and [test["hypothesis"] for test in table["tests"]] == ["H1", "H2"]
    assert (
        "| tiny | H1 | FreshPER > on-policy |"
        in (study_dirs / "study" / "family-rollout_limited.md").read_text()
    )


def test_regimes_set_their_keys_relative_to_the_entry(study_dirs):
    assert replay_study.regime_keys("lab", "tiny") == {}
    assert replay_study.regime_keys("fast_drift", "tiny") == {
        "lr": pytest.approx(4e-4)
    }  # tiny scale's 1e-4 x 4
    with pytest.raises(SystemExit, match="no regime 'slow'"):
        replay_study.regime_keys("slow", "tiny")
    with pytest.raises(SystemExit, match="no lab entry 'nope'"):
        replay_study.main(["run", "nope", "--regime", "lab"])
