"""The README's results tables are what experiments.results_table makes of docs/results/: a hand edit of a
table, or a results file changed without regenerating it, fails here; and their statistics: Holm's adjustment
within each named family, words that follow the adjusted p, peak beside final, rows without provenance
labelled."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from experiments import results_table
from experiments.common.significance import PAIRED_T, Significance


def test_the_committed_readme_table_is_the_generators_output():
    readme = results_table.README.read_text()
    assert results_table.with_table(readme) == readme
    assert results_table.main(["--check"]) == 0


def default_job_row(table: str) -> list[str]:
    rows = (line for line in table.splitlines() if line.startswith("|") and "`make demo`" in line)
    return next(rows).split(" | ")


def test_a_hand_edit_of_the_table_is_caught():
    readme = results_table.README.read_text()
    after = default_job_row(readme)[3]  # e.g. "33.2% (29.3-37.4%) after 40 iterations (...)"
    edited = readme.replace(after, "9" + after, 1)
    assert edited != readme
    assert results_table.with_table(edited) == readme


COMMITTED = {"commit": "0" * 40}  # the provenance of a results file recorded at a commit


def significance(p_value: float | None, difference: float = 0.1) -> Significance:
    return Significance(
        test=PAIRED_T, unit="seed", n=3, difference=difference, p_value=p_value, detectable=None
    )


def test_a_family_adjusts_its_p_values_with_holm_and_its_words_follow_the_adjusted_p():
    family = results_table.Family("gains")
    first, second, third = (family.add(significance(p)) for p in (0.01, 0.04, 0.03))
    untested = family.add(significance(None))
    # Holm: 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to the 0.06 before it.
    assert [family.adjusted(test) for test in (first, second, third)] == pytest.approx([0.03, 0.06, 0.06])
    assert family.adjusted(untested) is None
    assert family.p_text(first) == "p = 0.01, Holm 0.03"
    assert family.p_text(third) == "p = 0.03, Holm 0.06"
    assert family.p_text(untested) == "p n/a"
    assert family.line() == "gains: m = 3 tests, Holm-adjusted"  # the test without a p is not counted
    assert results_table.gain_words(family, first) == "**yes**"
    assert results_table.gain_words(family, third) == "not separated"  # raw 0.03, adjusted 0.06
    fell = results_table.Family("falls")
    assert results_table.gain_words(fell, fell.add(significance(0.001, difference=-0.1))) == "**falls**"


def test_the_default_job_row_names_its_recorded_test_and_its_unit(tmp_path, monkeypatch):
    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)
    job = json.loads((copy / "default_job" / "summary.json").read_text())
    job["before"] = {
        "success": 0.25,
        "success_ci95_low": 0.18,
        "success_ci95_high": 0.33,
        "num_episodes": 128,
    }
    job["after"] = {"success": 0.5, "success_ci95_low": 0.41, "success_ci95_high": 0.59, "num_episodes": 128}
    job["iterations"], job["evaluation_num_tasks"], job["evaluation_samples_per_task"] = 7, 128, 1
    # A record from before the tests named themselves: the unpaired two-proportion test over episodes.
    job["change"] = {"difference": 0.25, "p_value": 0.000123}
    (copy / "default_job" / "summary.json").write_text(json.dumps(job))
    monkeypatch.setattr(results_table, "RESULTS", copy)
    row = default_job_row(results_table.table())
    assert row[2:4] == [
        "25.0% (18.0-33.0%)",
        "50.0% (41.0-59.0%) after 7 iterations (`make demo`, 128 tasks)",
    ]
    assert row[4].startswith(
        "**yes**: +25.0 points, unpaired two-proportion (no per-task outcomes) over 256 episodes, "
        "p = 0.00012, Holm "
    )
    # A record that names its test: the words and names are the record's.
    job["change"] = {
        "test": "McNemar's exact test",
        "unit": "task",
        "n": 128,
        "difference": 0.25,
        "p_value": 0.2,
    }
    (copy / "default_job" / "summary.json").write_text(json.dumps(job))
    row = default_job_row(results_table.table())
    assert row[4].startswith(
        "not separated: +25.0 points, McNemar's exact test over 128 tasks, p = 0.2, Holm "
    )


def test_the_markers_must_be_there_once_each():
    with pytest.raises(ValueError, match="once each"):
        results_table.with_table("# a README without the table\n")


def test_an_ecosystem_row_is_its_evaluate_reports_first_and_last_evaluation(tmp_path, monkeypatch):
    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)
    name, folder = next(iter(results_table.ECOSYSTEM.items()))
    report = json.loads((copy / folder / "report.json").read_text())
    (entry,) = report["envs"].values()
    report["tasks"], report["samples"] = 50, 2  # 100 episodes an evaluation
    entry["settings"]["warm_start_steps"] = 7
    entry["curve"] = [
        {"iteration": 0, "success": 0.2, "success_ci95_low": 0.13, "success_ci95_high": 0.29},
        {"iteration": 9, "success": 0.4, "success_ci95_low": 0.31, "success_ci95_high": 0.5},
    ]
    (copy / folder / "report.json").write_text(json.dumps(report))
    monkeypatch.setattr(results_table, "RESULTS", copy)
    gains = results_table.Family("gains")
    row = results_table.written(results_table.trained_row(name, folder, gains))
    # 20 of 100 against 40 of 100: pooled 0.3, z = 0.2 / sqrt(0.3 x 0.7 x 0.02) = 3.086, p = 0.002; alone in
    # its family, Holm leaves it as it is. Two samples a task: the Wilson intervals are unclustered.
    assert row[1:5] == [
        "SmolLM2 (7)",
        "20.0% (13.0-29.0%)",
        "40.0% (31.0-50.0%) after 9 iterations",
        "**yes**: +20.0 points, unpaired two-proportion (no per-task outcomes) over 200 episodes; intervals "
        "unclustered (2 samples a task), p = 0.002, Holm 0.002",
    ]
    entry["curve"][1]["success"] = 0.1
    (copy / folder / "report.json").write_text(json.dumps(report))
    row = results_table.written(results_table.trained_row(name, folder, results_table.Family("gains")))
    assert row[4].startswith("**falls**: -10.0 points")  # 20 -> 10 of 100: p = 0.048, alone in its family


def write_comparison(tmp_path, monkeypatch):
    from experiments.common.comparison_report import aggregate

    def run(arm, seed, initial, final):
        return {
            "env": "freshrl/Sokoban-v0", "arm": arm, "seed": seed, "initial": initial, "final": final,
            "peak": final, "settings": {"warm_start_steps": 60, "env_config": {"max_turns": 1}},
            "wall_s": 1.0,
            "curve": [{"iteration": 0, "success": initial}, {"iteration": 10, "success": final}],
        }  # fmt: skip

    runs = [run("advantage=episode", k, 0.05, f) for k, f in enumerate([0.04, 0.05, 0.03])]
    runs += [run("advantage=gigpo", k, 0.05, f) for k, f in enumerate([0.20, 0.25, 0.15])]
    folder = tmp_path / "compare" / "gigpo-Sokoban-smollm2"  # a real folder's name, read from tmp_path
    folder.mkdir(parents=True)
    aggregate = aggregate(runs, "advantage=episode")
    results = {
        "reference": "advantage=episode",
        "aggregate": aggregate,
        "runs": runs,
        "provenance": COMMITTED,
    }
    (folder / "results.json").write_text(json.dumps(results))
    monkeypatch.setattr(results_table, "RESULTS", tmp_path)


def test_a_comparison_row_per_arm_tests_each_seed_s_gain_and_the_arms_within_their_families(
    tmp_path, monkeypatch
):
    write_comparison(tmp_path, monkeypatch)
    gains, arms = results_table.Family("gains"), results_table.Family("arms")
    episode, gigpo = map(
        results_table.written,
        results_table.compared_rows("Sokoban", "compare/gigpo-Sokoban-smollm2", None, gains, arms),
    )
    assert episode[1:3] == ["SmolLM2 (60), 3 seeds, `advantage=episode`; env `max_turns=1`", "5.0% ± 0.0"]
    assert gigpo[3] == "20.0% ± 12.4 after 10 iterations (peak 20.0% ± 12.4)"  # t_0.975(2) x 5 / sqrt(3)
    # Gains: episode -1, 0, -2 points (t = -0.01 / (0.01 / sqrt(3)) = -1.732, p = 0.225); GiGPO 15, 20, 10
    # (t = 5.196, p = 0.035). Holm over the two: 0.035 x 2 = 0.070, then 0.225: the words follow 0.070.
    assert episode[4] == (
        "not separated: per seed -1.0, +0.0, -2.0 points; paired t-test over 3 seeds, p = 0.23, Holm 0.23"
    )
    # Against episode at the end, paired by seed: 16, 20, 12 points, t = 6.928, p = 0.020, alone in its
    # family.
    assert gigpo[4] == (
        "not separated: per seed +15.0, +20.0, +10.0 points; paired t-test over 3 seeds, p = 0.035, "
        "Holm 0.07; against advantage=episode at the end: +16.0 points, paired t-test over 3 seeds, "
        "p = 0.02, Holm 0.02: separated"
    )
    assert gigpo[5] == "[comparison](docs/results/compare/gigpo-Sokoban-smollm2/comparison.md)"
    assert (
        gains.line() == "gains: m = 2 tests, Holm-adjusted"
        and arms.line() == "arms: m = 1 tests, Holm-adjusted"
    )
    # GiGPO alone in its family: the same raw p, unadjusted, is a gain; no reference arm shown, no arm test.
    alone, arms = results_table.Family("gains"), results_table.Family("arms")
    (only,) = results_table.compared_rows(
        "Sokoban", "compare/gigpo-Sokoban-smollm2", ("advantage=gigpo",), alone, arms
    )
    assert results_table.written(only)[4] == (
        "**yes**: per seed +15.0, +20.0, +10.0 points; paired t-test over 3 seeds, p = 0.035, Holm 0.035"
    )
    assert arms.tests == []


def test_each_comparison_s_rows_sit_with_its_env_s_other_rows():
    table_rows, _ = results_table.rows()
    names = [row[0] for row in table_rows]
    runs = [name for k, name in enumerate(names) if k == 0 or names[k - 1] != name]
    assert len(runs) == len(set(runs)), f"an env's rows are split: {names}"
    for name, folder, shown in results_table.COMPARISONS:
        arms = results_table.load(f"{folder}/results.json")["aggregate"]
        assert names.count(name) > len(shown or next(iter(arms.values())))  # beside the env's own rows


def test_a_lab_entry_of_an_ecosystem_env_is_named_like_that_env_s_other_rows():
    assert results_table.env_row_name("freshrl/FrozenLake-v0") == "FrozenLake"
    assert results_table.env_row_name("babyai/GoToLocal-v0") == "BabyAI GoToLocal"
    assert results_table.env_row_name("reasoning_gym/ChainSum-v0") == "reasoning-gym ChainSum"
    assert set(results_table.ECOSYSTEM) >= {
        results_table.env_row_name(s["env"])
        for s in results_table.lab_summaries()
        if "/" in s["env"] and not s["env"].startswith("freshrl/")
    }


def test_the_per_env_table_names_its_families_and_shows_no_peak_without_the_final():
    table = results_table.table()
    assert "- Gain over the start (each row's change in held-out success): m = " in table
    assert "- Arm against arm (an arm against its comparison's first arm, at the end): m = 3 tests" in table
    assert "at the edge" not in table and "alike" not in table
    table_rows, _ = results_table.rows()
    for row in table_rows:
        for cell in row[3:5]:
            if "peak" in cell:
                assert "after" in cell or "at the end" in cell or "final" in cell, cell
    (modes,) = [row for row in table_rows if "seeds per replay mode" in row[1]]
    assert modes[3].startswith("final ") and ", peak " in modes[3]
    assert modes[4].index("at the end: ") < modes[4].index("at peak")


def test_rows_from_files_without_a_commit_are_labelled(tmp_path, monkeypatch):
    table_rows, _ = results_table.rows()
    labelled = {row[1] for row in table_rows if results_table.NO_PROVENANCE in row[5]}
    assert "tiny LM (400), 5 seeds per replay mode" in labelled  # compare-FrozenLake.json: commit null
    assert "SmolLM2 (60), 2 seeds" in labelled  # smollm2_rl and the backfill comparison: none
    assert results_table.NO_PROVENANCE not in default_job_row(results_table.table())[5]  # it has a commit
    tiny_rows = [row for row in table_rows if row[5].startswith(results_table.TINY_WARM_STARTS)]
    assert tiny_rows and all("measured before the content-based splits" in row[5] for row in tiny_rows)

    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)
    smollm2 = json.loads((copy / "smollm2_rl" / "results.json").read_text())
    smollm2["provenance"]["commit"] = "0" * 40
    (copy / "smollm2_rl" / "results.json").write_text(json.dumps(smollm2))
    monkeypatch.setattr(results_table, "RESULTS", copy)
    table_rows, _ = results_table.rows()
    (nq_search,) = [row for row in table_rows if row[:2] == ["NQSearch", "SmolLM2 (15)"]]
    assert nq_search[5] == results_table.SMOLLM2_RUNS


def test_the_replay_markers_must_be_there_too():
    readme = results_table.README.read_text()
    without = readme.replace(results_table.REPLAY_BEGIN, "")
    with pytest.raises(ValueError, match="replay-table"):
        results_table.with_table(without)


def test_the_replay_table_sets_each_comparison_beside_the_paper_s_row_in_one_family(tmp_path, monkeypatch):
    from experiments.common.comparison_report import aggregate

    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)

    def run(mode, seed, peak):
        curve = [{"iteration": 0, "success": 0.5}, {"iteration": 15, "success": peak}]
        return {"env": "freshrl/NQSearch-v0", "arm": mode, "seed": seed, "initial": 0.5, "peak": peak,
                "final": peak - 0.1, "curve": curve}  # fmt: skip

    peaks = {"on_policy": [0.6, 0.7], "per": [0.6, 0.6], "freshper": [0.8, 0.85], "freshper_poly": [0.7]}
    runs = [run(mode, seed, peak) for mode, values in peaks.items() for seed, peak in enumerate(values)]
    results = {
        "aggregate": aggregate(runs, "freshper"),
        "runs": runs,
        "planned_runs": 8,
        "missing": [{"env": "freshrl/NQSearch-v0", "arm": "freshper_poly", "seed": 1}],
    }
    (copy / "compare" / "replay-NQSearch-smollm2" / "results.json").write_text(json.dumps(results))
    monkeypatch.setattr(results_table, "RESULTS", copy)
    monkeypatch.setattr(results_table, "REPLAY_STUDY", results_table.REPLAY_STUDY[:2])
    table_rows, family = results_table.replay_rows()
    paper, peak, final, _, sokoban = table_rows
    assert paper[2:7] == ["0.508", "0.336", "0.742", "-", "+0.234; +0.406 (no spread published)"]
    assert peak[1] == (
        "freshrl: NQSearch, SmolLM2 (15), 1-2 seeds per mode, partial: 7 of 8 runs; validation success from "
        "0.500, peak"
    )
    # FreshPER 0.825 +- 12.706 x 0.0354 / sqrt(2) over its 2 seeds; the polynomial mode ran 1 seed of 2.
    assert peak[2:6] == ["0.650 ± 0.635", "0.600 ± 0.000", "0.825 ± 0.318", "0.700 (n=1)"]
    # Paired by seed: against on-policy 0.20, 0.15 (t = 7.0 on 1 degree of freedom, p = 0.090), against PER
    # 0.20, 0.25 (t = 9.0, p = 0.070); the same at the end. Holm over the four: 4 x 0.070 = 0.28 for all.
    assert peak[6] == (
        "+0.175 (paired t-test over 2 seeds, p = 0.09, Holm 0.28: not separated); "
        "+0.225 (paired t-test over 2 seeds, p = 0.07, Holm 0.28: not separated)"
    )
    assert final[1].endswith(", final") and final[4] == "0.725 ± 0.318" and final[6] == peak[6]
    assert family.line().endswith("m = 4 tests, Holm-adjusted")
    assert sokoban[2].startswith("not run: ")


def test_the_replay_table_tests_a_record_of_means_only_with_welch_s_test():
    table_rows, _ = results_table.replay_rows()
    frozen_lake = [row for row in table_rows if row[0] == "FrozenLake (LLM)" and row[1].startswith("freshrl")]
    assert [row[1].rsplit(", ", 1)[1] for row in frozen_lake] == ["peak", "final"]
    for row in frozen_lake:
        assert row[6].count("Welch's t-test over 10 seeds") == 2
        assert row[7].endswith(results_table.NO_PROVENANCE)


def test_the_tau_sweep_rows_come_from_its_summary(tmp_path, monkeypatch):
    from experiments.common import sweep_points
    from experiments.common.results_json import write_json

    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)
    monkeypatch.setattr(results_table, "RESULTS", copy)
    monkeypatch.setattr(results_table, "TAU_SWEEPS", results_table.TAU_SWEEPS[:1])
    task, ours, folder = results_table.TAU_SWEEPS[0]
    shutil.rmtree(copy / folder, ignore_errors=True)
    assert results_table.sweep_rows()[0][0][:3] == [task, ours, "not run yet"]

    def row(tau, seed, final, eps_high=0.28):
        return {"tau": tau, "eps_high": eps_high, "seed": seed, "status": "ok",
                "final_validation_success": final, "peak_validation_success": final + 0.1,
                "minutes": 20.0}  # fmt: skip

    trials = [row(4.0, 0, 0.6), row(4.0, 1, 0.8), row(math.inf, 0, 0.5)]
    trials += [row(4.0, 0, 0.6, eps_high=0.2), row(4.0, 1, 0.7, eps_high=0.2)]
    grid = sweep_points.points(trials)
    summary = {
        "points": grid,
        "best_point": sweep_points.best_point(grid),
        "trials": [{**trial, "tau": None if trial["tau"] == math.inf else trial["tau"]} for trial in trials],
        "planned_trials": 6,
        "missing": ["tau no decay, eps_high 0.28, seed 1"],
        "iterations": 6,
        "provenance": COMMITTED,
    }
    (copy / folder).mkdir(parents=True)
    write_json(copy / folder / "summary.json", summary)  # as experiments.sweep writes it: inf as null
    swept, (note,) = results_table.sweep_rows()
    low, four, no_decay = swept
    # 0.7 +- 12.706 x 0.1414 / sqrt(2); no point is marked best: the intervals overlap.
    # The trials hold no curve from their start: no AUC; no clip fractions recorded.
    assert four[1:10] == [f"{ours}, 6 iterations a trial, partial: 5 of 6 trials", "4", "0.28", "2", "n/a",
                          "0.700 ± 1.271", "0.800 ± 1.271", "n/a", "20.0"]  # fmt: skip
    assert no_decay[2:7] == ["no decay", "0.28", "1", "n/a", "0.500"]
    assert four[10] == f"[sweep](docs/results/{folder}/summary.md)"
    assert "best" not in " ".join(" ".join(r) for r in swept)
    # Seed 0 at tau 4 gave 0.6 with both eps_high values, seed 1 did not: one identical pair of two.
    assert note == (
        f"{task}: nothing separates the points: every point's final 95% interval overlaps every "
        "other's, so none is marked best. 1 of the 2 eps_high sets of one tau and seed gave identical "
        "evaluations (tau 4 seed 0): eps_high hardly acts, so the trials are not independent and the grid "
        "measures the 2 tau values over 2 seeds"
    )
    write_json(copy / folder / "summary.json", {**summary, "points": [], "best_point": None})
    assert results_table.sweep_rows()[0][0][2] == "started: no trial finished yet"


def test_the_replay_study_rows_hold_each_regime_s_family_over_its_entries(tmp_path, monkeypatch):
    from experiments.common import replay_study_report

    recorded = results_table.RESULTS / "replay_study" / "frozen_lake-rollout_limited" / "summary.json"
    summary = json.loads(recorded.read_text())
    study = tmp_path / results_table.STUDY_FOLDER

    def place(folder: str, record: dict) -> None:
        (study / folder).mkdir(parents=True)
        (study / folder / "summary.json").write_text(json.dumps(record))

    place("frozen_lake-rollout_limited", summary)
    monkeypatch.setattr(results_table, "RESULTS", tmp_path)
    (alone,) = results_table.study_rows()
    assert alone[:4] == ["rollout-limited", "`frozen_lake`", "5 seeds; 800 episodes", "24.2%"]
    assert alone[4] == "29.8 ± 3.2"  # on-policy's AUC in points, 95% t interval over the 5 seeds
    h1 = replay_study_report.family([summary])["tests"][0]
    assert alone[8].startswith(f"H1 FreshPER > on-policy: -0.7 points (Holm p {h1['by_seed']['p_holm']:.2g} ")
    assert alone[8].count("**") == 4 and alone[9].endswith("frozen_lake-rollout_limited/README.md)")

    # A second entry of the regime joins its family: every test is adjusted over both entries' tests.
    other = {**summary, "entry": "other", "missing": [{"mode": "per", "seed": 4}]}
    place("other-rollout_limited", other)
    first, second = results_table.study_rows()
    tests = replay_study_report.family([summary, other])["tests"]
    assert tests[0]["by_seed"]["p_holm"] > h1["by_seed"]["p_holm"]
    assert f"(Holm p {tests[0]['by_seed']['p_holm']:.2g} by seed" in first[8]
    assert second[1:3] == ["`other`", "5 seeds (partial: 1 run missing); 800 episodes"]
