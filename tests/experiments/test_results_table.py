"""The README's results table is what experiments.results_table makes of docs/results/: a hand edit of the
table, or a results file changed without regenerating it, fails here."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from experiments import results_table


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


def test_the_figures_come_from_the_results_files(tmp_path, monkeypatch):
    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)
    job = json.loads((copy / "default_job" / "summary.json").read_text())
    job["before"] = {"success": 0.25, "success_ci95_low": 0.18, "success_ci95_high": 0.33}
    job["after"] = {"success": 0.5, "success_ci95_low": 0.41, "success_ci95_high": 0.59}
    job["iterations"], job["evaluation_num_tasks"] = 7, 128
    job["change"] = {"p_value": 0.000123}
    (copy / "default_job" / "summary.json").write_text(json.dumps(job))
    monkeypatch.setattr(results_table, "RESULTS", copy)
    assert default_job_row(results_table.table())[2:5] == [
        "25.0% (18.0-33.0%)",
        "50.0% (41.0-59.0%) after 7 iterations (`make demo`, 128 tasks)",
        "+25.0 points, intervals separated (two-proportion p = 0.00012)",
    ]
    del job["change"]  # a record from before experiments.train recorded the test
    job["after"]["success_ci95_low"] = 0.30
    (copy / "default_job" / "summary.json").write_text(json.dumps(job))
    assert default_job_row(results_table.table())[4] == "+25.0 points, intervals overlap"


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
    (row,) = [r for r in results_table.rows() if r[0] == name]
    assert row[1:5] == [
        "SmolLM2 (7)",
        "20.0% (13.0-29.0%)",
        "40.0% (31.0-50.0%) after 9 iterations",
        "**yes**: +20.0 points, intervals separated (two-proportion p = 0.002)",
    ]
    entry["curve"][1]["success"] = 0.1
    (copy / folder / "report.json").write_text(json.dumps(report))
    (row,) = [r for r in results_table.rows() if r[0] == name]
    assert row[4].startswith("**no**: -10.0 points")


def test_a_comparison_row_per_arm_tests_each_seed_s_gain_and_the_arms(tmp_path, monkeypatch):
    from experiments import compare

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
    aggregate = compare.aggregate(runs, "advantage=episode")
    results = {"reference": "advantage=episode", "aggregate": aggregate, "runs": runs}
    (folder / "results.json").write_text(json.dumps(results))
    monkeypatch.setattr(results_table, "RESULTS", tmp_path)
    episode, gigpo = results_table.compared_rows("Sokoban", "compare/gigpo-Sokoban-smollm2")
    assert episode[1:3] == ["SmolLM2 (60), 3 seeds, `advantage=episode`; env `max_turns=1`", "5.0% ± 0.0"]
    assert episode[4].startswith("**no**: per seed -1.0, +0.0, -2.0 points")
    # GiGPO: gains 15, 20, 10 points; paired t = 15 / (5 / sqrt(3)) = 5.196 on 2 degrees of freedom.
    assert gigpo[3].startswith("20.0% ± 12.4 after 10 iterations")  # t_0.975(2) x 5 / sqrt(3) = 12.42
    assert gigpo[4].startswith("**yes**: per seed +15.0, +20.0, +10.0 points (paired p = 0.035)")
    assert "against advantage=episode: Welch p = " in gigpo[4]
    assert gigpo[5] == "[comparison](docs/results/compare/gigpo-Sokoban-smollm2/comparison.md)"


def test_each_comparison_s_rows_sit_with_its_env_s_other_rows():
    names = [row[0] for row in results_table.rows()]
    runs = [name for k, name in enumerate(names) if k == 0 or names[k - 1] != name]
    assert len(runs) == len(set(runs)), f"an env's rows are split: {names}"
    for name, folder in results_table.COMPARISONS:
        arms = results_table.load(f"{folder}/results.json")["aggregate"]
        assert names.count(name) > len(next(iter(arms.values())))  # the arms come beside the env's own rows


def test_the_replay_markers_must_be_there_too():
    readme = results_table.README.read_text()
    without = readme.replace(results_table.REPLAY_BEGIN, "")
    with pytest.raises(ValueError, match="replay-table"):
        results_table.with_table(without)


def test_the_replay_table_sets_each_comparison_beside_the_paper_s_row(tmp_path, monkeypatch):
    from experiments import compare

    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)

    def run(mode, seed, peak):
        curve = [{"iteration": 0, "success": 0.5}, {"iteration": 15, "success": peak}]
        return {"env": "freshrl/NQSearch-v0", "arm": mode, "seed": seed, "initial": 0.5, "peak": peak,
                "final": peak - 0.1, "curve": curve}  # fmt: skip

    peaks = {"on_policy": [0.6, 0.7], "per": [0.6, 0.6], "freshper": [0.8, 0.9], "freshper_poly": [0.7]}
    runs = [run(mode, seed, peak) for mode, values in peaks.items() for seed, peak in enumerate(values)]
    results = {
        "aggregate": compare.aggregate(runs, "freshper"),
        "planned_runs": 8,
        "missing": [{"env": "freshrl/NQSearch-v0", "arm": "freshper_poly", "seed": 1}],
    }
    (copy / "compare" / "replay-NQSearch-smollm2" / "results.json").write_text(json.dumps(results))
    monkeypatch.setattr(results_table, "RESULTS", copy)
    rows = [row for row in results_table.replay_rows() if row[0] == "NQ Search (LLM)"]
    paper, peak, final = rows
    assert paper[2:7] == ["0.508", "0.336", "0.742", "-", "+0.234; +0.406 (no spread published)"]
    assert peak[1] == (
        "freshrl: NQSearch, SmolLM2 (15), 1-2 seeds per mode, partial: 7 of 8 runs; validation success from "
        "0.500, peak"
    )
    # FreshPER 0.85 +- 12.706 x 0.0707 / sqrt(2) over its 2 seeds; the polynomial mode ran 1 seed of 2.
    assert peak[2:6] == ["0.650 ± 0.635", "0.600 ± 0.000", "0.850 ± 0.635", "0.700 (n=1)"]
    # Welch against on-policy: t = 0.2 / 0.0707 = 2.83 on 2 degrees of freedom; PER has no spread.
    assert peak[6] == "+0.200 (Welch p = 0.11); +0.250 (Welch p = 0.13)"
    assert final[1].endswith(", final") and final[4] == "0.750 ± 0.635"
    sokoban = [row for row in results_table.replay_rows() if row[0] == "Sokoban Simple (LLM)"]
    assert sokoban[1][2].startswith("not run: ")


def test_the_tau_sweep_rows_come_from_its_summary(tmp_path, monkeypatch):
    from experiments.common import sweep_points
    from experiments.common.results_json import write_json

    copy = tmp_path / "results"
    shutil.copytree(results_table.RESULTS, copy)
    monkeypatch.setattr(results_table, "RESULTS", copy)
    task, ours, folder = results_table.TAU_SWEEPS[0]
    shutil.rmtree(copy / folder, ignore_errors=True)
    assert results_table.sweep_rows()[0][:3] == [task, ours, "not run yet"]

    def row(tau, seed, final):
        return {"tau": tau, "eps_high": 0.28, "seed": seed, "status": "ok", "final_validation_success": final,
                "peak_validation_success": final + 0.1, "minutes": 20.0}  # fmt: skip

    grid = sweep_points.points([row(4.0, 0, 0.6), row(4.0, 1, 0.8), row(math.inf, 0, 0.5)])
    summary = {
        "points": grid,
        "best_point": sweep_points.best_point(grid),
        "planned_trials": 4,
        "missing": ["tau no decay, eps_high 0.28, seed 1"],
        "iterations": 6,
    }
    (copy / folder).mkdir(parents=True)
    write_json(copy / folder / "summary.json", summary)  # as experiments.sweep writes it: inf as null
    four, no_decay = results_table.sweep_rows()
    # 0.7 +- 12.706 x 0.1414 / sqrt(2); the no-decay point has one seed so far.
    assert four[1:8] == [f"{ours}, 6 iterations a trial, partial: 3 of 4 trials", "**4 (best)**", "0.28", "2",
                         "0.700 ± 1.271", "0.800 ± 1.271", "20.0"]  # fmt: skip
    assert no_decay[2:6] == ["no decay", "0.28", "1", "0.500"]
    assert four[8] == f"[sweep](docs/results/{folder}/summary.md)"
    write_json(copy / folder / "summary.json", {**summary, "points": [], "best_point": None})
    assert results_table.sweep_rows()[0][2] == "started: no trial finished yet"
