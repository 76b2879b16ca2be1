"""Ray Tune over DAPO: ``python -m experiments.sweep``, plain ``tune.Tuner(DAPO, param_space=config)``."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from ray import tune

from algorithms.dapo import DAPO
from experiments import sweep
from experiments.common import sweep_points

# Configs only: the named model (an existing directory, as --model requires) is never loaded here, and no
# warm start is trained.
NO_MODEL_LOAD = ["--model", str(Path(__file__).resolve().parent)]


def test_sweep_cli_writes_tune_results_tensorboard_and_summary(tmp_path, tiny_workload, ray_session):
    # The CLI is plain ``tune.Tuner(DAPO, param_space=config)`` with grid_search over DAPOConfig fields, the
    # way a user writes it: this is that path's test too. One trial: each Tune trial starts a worker process
    # that imports torch and vLLM and starts an engine (about a minute here); the grid itself is checked by
    # test_search_space_grid_and_random.
    # --eval-every 5 > --iterations: RLlib never evaluates, so both evaluations are CarryEvaluation's.
    argv = ["--iterations", "2", "--eval-every", "5", "--tau", "50", "--eps-high", "0.28"]
    summary = sweep.main([*argv, *tiny_workload, "--storage-path", str(tmp_path), "--name", "s"])

    folder = tmp_path / "s"
    trials = summary["trials"]
    assert len(trials) == 1
    for row in trials:
        assert row["status"] == "ok" and row["iterations"] == 2
        assert (row["tau"], row["eps_high"], row["replay"]) == (50.0, 0.28, "freshper")
        assert 0.0 <= row["final_validation_success"] <= 1.0
        trial_dir = Path(row["path"])
        assert trial_dir.parent == folder
        assert list(trial_dir.glob("events.out.tfevents.*")), "no TensorBoard log"
        progress = (trial_dir / "progress.csv").read_text().splitlines()
        assert "evaluation/success" in progress[0] and len(progress) == 3  # header + 2 iterations
        results = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
        # Evaluated before training (the first result carries it) and after the last iteration, though
        # off RLlib's interval.
        assert [r["evaluation"]["iteration"] for r in results] == [0, 2]
        assert results[0]["evaluation_start"] == results[0]["evaluation"]
        assert "evaluation_start" not in results[1]
        assert row["last_evaluated_iteration"] == 2
        assert all(r["evaluation"]["num_episodes"] == 4 for r in results)
        assert row["episode_curve"]["iterations"] == [0, 2]
        assert row["episode_curve"]["success"][-1] == row["final_validation_success"]
        # One generation batch of 2 groups of 2 episodes an iteration.
        assert row["episode_curve"]["episodes"] == [0.0, 8.0]
        assert all("success_ci95_low" in r["evaluation"] for r in results)
        assert row["checkpoint"] is None
    # A finished trial's checkpoint is deleted as it finishes (without --keep-checkpoints): none is left.
    assert not list(folder.rglob("checkpoint_*"))
    assert summary["checkpoints"] == {"ok": [], "unfinished": [], "error": []}
    assert "No finished trial's checkpoint was kept" in (folder / "summary.md").read_text()
    assert summary["best"]["trial"] == trials[0]["trial"]
    assert 0.0 <= summary["points"][0]["auc"]["mean"] <= 1.0
    saved = json.loads((folder / "summary.json").read_text())
    assert saved["best"]["trial"] == summary["best"]["trial"]
    dtypes = saved["provenance"]["dtypes"]
    assert dtypes["model_dtype"] == dtypes["engine_dtype"] == "float32"  # the tiny scale's
    assert saved["provenance"]["command"].startswith("python -m experiments.sweep --iterations 2 ")
    text = (folder / "summary.md").read_text()
    assert f"| {trials[0]['trial']} **(best)** | 50 | 0.28 |" in text

    # --resume restores the Tune experiment: the finished trial is kept as it was, not run again (its
    # checkpoint is gone: nothing reads it).
    resumed = sweep.main([*argv, *tiny_workload, "--storage-path", str(tmp_path), "--name", "s", "--resume"])
    assert [(r["trial"], r["iterations"], r["status"]) for r in resumed["trials"]] == [
        (trials[0]["trial"], 2, "ok")
    ]
    assert resumed["trials"][0]["peak_validation_success"] == trials[0]["peak_validation_success"]
    with pytest.raises(SystemExit, match="no Tune experiment to resume"):
        sweep.main([*argv, *tiny_workload, "--storage-path", str(tmp_path), "--name", "none", "--resume"])
    assert not (tmp_path / "none").exists()  # refused before anything was written

    # --report-only writes the summary from Tune's folder, training nothing; the command it records is the
    # sweep's own.
    reported = sweep.main(
        [*argv, *tiny_workload, "--storage-path", str(tmp_path), "--name", "s", "--report-only"]
    )
    assert reported["trials"][0]["peak_validation_success"] == trials[0]["peak_validation_success"]
    assert reported["planned_trials"] == 1 and reported["missing"] == []
    assert reported["provenance"]["report_only"] is True
    assert "--report-only" not in reported["provenance"]["command"]
    assert trials[0]["minutes"] > 0 and "minutes per trial" in (folder / "summary.md").read_text()
    with pytest.raises(SystemExit, match="no Tune experiment at"):
        sweep.main(
            [*argv, *tiny_workload, "--storage-path", str(tmp_path), "--name", "none", "--report-only"]
        )


def test_sweep_config_keeps_the_run_settings():
    args = sweep.parse_args(
        [*NO_MODEL_LOAD, "--group-size", "3", "--prompts", "5", "--max-response-tokens", "12", "--seed", "7"]
    )
    keys = {"replay_mode": "per", "evaluation_num_tasks": 9, "evaluation_interval": 2}
    args.run = dataclasses.replace(args.run, overrides={**args.run.overrides, **keys})
    config, _, _ = sweep.search_space(args)
    assert config.algo_class is DAPO and config.callbacks_class.func is sweep.CarryEvaluation
    assert config.callbacks_class().final_iteration == args.run.iterations
    assert (config.group_size, config.prompts_per_iteration, config.max_response_tokens) == (3, 5, 12)
    assert config.resolved_overlong_cache_len() == 4  # a third of the response limit
    assert (config.replay_mode, config.seed, config.lr) == ("per", 7, 1e-4)
    assert (config.evaluation_num_tasks, config.evaluation_interval) == (9, 2)
    # Without --settings: 3 iterations, evaluated every iteration on 16 tasks.
    args = sweep.parse_args(NO_MODEL_LOAD)
    config = args.config
    assert (args.run.iterations, config.evaluation_interval, config.evaluation_num_tasks) == (3, 1, 16)


class FakeAlgorithm:
    """What CarryEvaluation reads of an algorithm: its iteration and evaluate_policy()."""

    def __init__(self):
        self.iteration = 0
        self.evaluated = 0

    def evaluate_policy(self):
        self.evaluated += 1
        return {"success": 0.25, "num_episodes": 4}


def test_every_result_carries_the_latest_evaluation():
    callback, algo = sweep.CarryEvaluation(), FakeAlgorithm()
    results = []
    for iteration, evaluation in [(1, None), (2, {"success": 0.5}), (3, None), (4, {"success": 0.75})]:
        algo.iteration = iteration
        result = {"training_iteration": iteration, **({"evaluation": evaluation} if evaluation else {})}
        callback.on_train_result(algorithm=algo, result=result)
        results.append(result["evaluation"])
    assert algo.evaluated == 1  # the first result, which RLlib did not evaluate
    assert [(r["success"], r["iteration"]) for r in results] == [(0.25, 1), (0.5, 2), (0.5, 2), (0.75, 4)]


def test_the_last_iteration_is_evaluated_off_the_interval():
    # RLlib evaluated after iteration 2 only; the trial stops after 3, whose result must be the trained
    # policy's, not iteration 2's carried forward.
    callback, algo = sweep.CarryEvaluation(final_iteration=3), FakeAlgorithm()
    results = []
    for iteration, evaluation in [(1, None), (2, {"success": 0.5}), (3, None)]:
        algo.iteration = iteration
        result = {"training_iteration": iteration, **({"evaluation": evaluation} if evaluation else {})}
        callback.on_train_result(algorithm=algo, result=result)
        results.append(result["evaluation"])
    assert algo.evaluated == 2
    assert [(r["success"], r["iteration"]) for r in results] == [(0.25, 1), (0.5, 2), (0.25, 3)]


def test_search_space_grid_and_random():
    grid, searcher, samples = sweep.search_space(
        sweep.parse_args([*NO_MODEL_LOAD, "--tau", "10", "20", "--eps-high", "0.3"])
    )
    assert searcher is None and samples == 1
    assert grid.replay_tau == {"grid_search": [10.0, 20.0]} and grid.eps_high == {"grid_search": [0.3]}

    args = sweep.parse_args(
        [*NO_MODEL_LOAD, "--search-alg", "random", "--num-samples", "3", "--tau", "10", "20"]
    )
    space, searcher, samples = sweep.search_space(args)
    assert isinstance(searcher, tune.search.BasicVariantGenerator) and samples == 3
    assert isinstance(space.replay_tau, tune.search.sample.Categorical)
    assert space.replay_tau.categories == [10.0, 20.0]


def test_tau_is_not_swept_without_age_decay():
    config, _, _ = sweep.search_space(
        sweep.parse_args([*NO_MODEL_LOAD, "--replay", "per", "--tau", "10", "20"])
    )
    assert config.replay_tau == {"grid_search": [10.0]}


@pytest.mark.skipif(importlib.util.find_spec("optuna") is not None, reason="optuna is installed")
def test_missing_searcher_package_is_named():
    with pytest.raises(SystemExit, match="optuna"):
        sweep.make_searcher("optuna", seed=0)
    with pytest.raises(SystemExit, match="unknown --search-alg"):
        sweep.make_searcher("no-such-searcher", seed=0)


def test_best_row_and_summary_table():
    def row(trial, tau, peak, status="ok"):
        return {
            "trial": trial,
            "tau": tau,
            "eps_high": 0.28,
            "peak_validation_success": peak,
            "final_validation_success": peak,
            "final_reward_mean": math.nan,
            "iterations": 3,
            "status": status,
            "checkpoint": None,
        }

    rows = [row("a", 50, 0.25), row("b", 500, 0.5), row("c", 5, 0.75, status="error"), row("d", 1, 0.5)]
    best = sweep.best_row(rows)
    assert best["trial"] == "b"  # errors never win; ties go to the first trial
    args = sweep.parse_args(["--name", "x"])
    text = sweep.summary_markdown(args, rows, best)
    assert "| b **(best)** | 500 | 0.28 | n/a | 0.500 | 0.500 | n/a | 3 | 0 | n/a | ok |" in text
    assert "2 trials tie" in text


def test_trials_that_trained_nothing_are_flagged_and_nan_is_written_as_na():
    import pandas as pd

    frame = pd.DataFrame({"rollout/groups_kept": [0, 0, 2], "rollout/groups_from_surplus": [0, 1, 0]})
    assert sweep.iterations_without_training(frame) == 1
    assert sweep.iterations_without_training(None) == 0
    row = {
        "trial": "t",
        "tau": 50,
        "eps_high": 0.28,
        "peak_validation_success": math.nan,
        "final_validation_success": math.nan,
        "final_reward_mean": math.nan,
        "iterations": 3,
        "iterations_without_training": 3,
        "mostly_untrained": True,
        "status": "ok",
        "checkpoint": None,
    }
    text = sweep.summary_markdown(sweep.parse_args(["--name", "x"]), [row], sweep.best_row([row]))
    assert "| t | 50 | 0.28 | n/a | n/a | n/a | n/a | 3 | 3 | n/a | ok |" in text and "nan" not in text
    assert "most iterations trained nothing" in text


def test_seeds_cross_the_grid_and_no_decay_is_a_tau():
    args = sweep.parse_args(
        [*NO_MODEL_LOAD, "--tau", "4", "inf", "--eps-high", "0.28", "--seeds", "2", "--seed", "3"]
    )
    config, _, _ = sweep.search_space(args)
    assert config.replay_tau == {"grid_search": [4.0, math.inf]} and config.seed == {"grid_search": [3, 4]}
    with pytest.raises(SystemExit):
        sweep.parse_args([*NO_MODEL_LOAD, "--search-alg", "random", "--seeds", "2"])


def test_grid_points_average_their_seeds_and_the_plot_shows_them(tmp_path):
    def row(tau, seed, final):
        return {
            "trial": f"{tau}-{seed}", "tau": tau, "eps_high": 0.28, "seed": seed, "status": "ok",
            "peak_validation_success": final + 0.1, "final_validation_success": final,
            "final_reward_mean": 0.0, "iterations": 3, "checkpoint": None,
        }  # fmt: skip

    rows = [row(4.0, 0, 0.2), row(4.0, 1, 0.4), row(math.inf, 0, 0.5), row(math.inf, 1, 0.5)]
    rows.append({**row(50.0, 0, math.nan), "status": "error"})  # never evaluated: left out
    grid = sweep_points.points(rows)
    assert [(p["tau"], p["seeds"]) for p in grid] == [(4.0, [0, 1]), (math.inf, [0, 1])]
    # Two seeds: mean 0.3, std 0.1414, 95% t half-width t_0.975(1) x 0.1414 / sqrt(2) = 12.706 x 0.1.
    assert grid[0]["final"]["mean"] == pytest.approx(0.3)
    assert grid[0]["final"]["ci95"] == pytest.approx(1.2706, abs=1e-3)
    assert grid[0]["peak"]["mean"] == pytest.approx(0.4)
    best = sweep_points.best_point(grid)
    assert best["tau"] == math.inf
    text = "\n".join(sweep_points.markdown_lines(grid, best))
    # No trial has a curve from its start (their records predate it): no AUC, ranked by final success.
    assert (
        "| no decay **(best)** | 0.28 | 2 | n/a | 0.500 ± 0.000 | 0.600 ± 0.000 | n/a / n/a | n/a |" in text
    )
    assert "| 4 | 0.28 | 2 | n/a | 0.300 ± 1.271 |" in text
    path = sweep_points.plot(grid, tmp_path / "p.png", "title")
    assert path.read_bytes().startswith(b"\x89PNG")
    summary = sweep.summary_markdown(sweep.parse_args(["--name", "x"]), rows, sweep.best_row(rows))
    assert "## Grid points" in summary and f"]({sweep.PLOT_NAME})" in summary


def test_a_trial_short_of_its_iterations_is_unfinished_and_its_wall_time_is_kept():
    def result(iterations, error=None):
        return SimpleNamespace(
            metrics={"training_iteration": iterations, "time_total_s": 90.0, "evaluation": {"success": 0.5}},
            metrics_dataframe=None,
            config={"replay_tau": 4.0, "seed": 0, "eps_high": 0.28, "replay_mode": "freshper"},
            error=error,
            path="/sweep/trial",
            checkpoint=None,
        )

    rows = sweep.trial_rows([result(15), result(7), result(7, error=RuntimeError())], iterations=15)
    assert [row["status"] for row in rows] == ["ok", "unfinished", "error"]
    assert rows[0]["minutes"] == pytest.approx(1.5)


def test_a_final_success_measured_before_the_last_iteration_is_not_reported_as_final():
    def result(evaluated_after):
        return SimpleNamespace(
            metrics={
                "training_iteration": 15, "time_total_s": 90.0, "trial_id": f"t{evaluated_after}",
                "evaluation": {"success": 0.6, "iteration": evaluated_after},
            },
            metrics_dataframe=None,
            config={"replay_tau": 4.0, "seed": evaluated_after, "eps_high": 0.28, "replay_mode": "freshper"},
            error=None,
            path="/sweep/trial",
            checkpoint=None,
        )  # fmt: skip

    rows = sweep.trial_rows([result(15), result(1)], iterations=15)
    assert rows[0]["final_validation_success"] == 0.6
    assert math.isnan(rows[1]["final_validation_success"]) and rows[1]["last_evaluated_iteration"] == 1
    assert [point["seeds"] for point in sweep_points.points(rows)] == [[15]]
    args = sweep.parse_args([*NO_MODEL_LOAD, "--name", "x", "--tau", "4", "--eps-high", "0.28"])
    text = sweep.summary_markdown(args, rows, sweep.best_row(rows))
    assert "trial(s) t1 (after iteration 1) were last evaluated before their last iteration" in text


def test_a_stopped_sweep_is_reported_partial_and_counts_only_finished_trials():
    args = sweep.parse_args(
        [*NO_MODEL_LOAD, "--name", "x", "--tau", "4", "inf", "--eps-high", "0.28", "--seeds", "2"]
    )

    def row(tau, seed, status):
        return {
            "trial": f"{tau}-{seed}", "tau": tau, "eps_high": 0.28, "seed": seed, "status": status,
            "peak_validation_success": 0.5, "final_validation_success": 0.4, "final_reward_mean": 0.0,
            "iterations": 15, "minutes": 12.0, "checkpoint": None,
        }  # fmt: skip

    rows = [row(4.0, 0, "ok"), row(4.0, 1, "unfinished"), row(math.inf, 0, "error")]
    planned, missing = sweep.missing_trials(args, rows)
    assert planned == 4
    assert missing == [
        "tau 4, eps_high 0.28, seed 1",
        "tau no decay, eps_high 0.28, seed 0",
        "tau no decay, eps_high 0.28, seed 1",
    ]
    text = sweep.summary_markdown(args, rows, sweep.best_row(rows))
    assert "**Partial: 1 of 4 trials finished.** Missing: tau 4, eps_high 0.28, seed 1; " in text
    grid = sweep_points.points(rows)
    assert [(point["tau"], point["seeds"], point["minutes_per_trial"]) for point in grid] == [
        (4.0, [0], 12.0)
    ]
    assert sweep.missing_trials(
        args, [*rows[:1], row(4.0, 1, "ok"), row(math.inf, 0, "ok"), row(math.inf, 1, "ok")]
    ) == (4, [])
    with pytest.raises(SystemExit):
        sweep.parse_args([*NO_MODEL_LOAD, "--report-only"])
    with pytest.raises(SystemExit):
        sweep.parse_args([*NO_MODEL_LOAD, "--name", "x", "--report-only", "--resume"])


class StartAlgorithm(FakeAlgorithm):
    """An algorithm whose evaluations differ: 0.1 the first, 0.2 the second, ..."""

    def evaluate_policy(self):
        self.evaluated += 1
        return {"success": self.evaluated / 10}


def test_the_start_is_evaluated_before_training_and_carried_by_the_first_result():
    callback, algo = sweep.CarryEvaluation(final_iteration=3, evaluate_start=True), StartAlgorithm()
    callback.on_algorithm_init(algorithm=algo)
    results = []
    for iteration, evaluation in [(1, None), (2, {"success": 0.5}), (3, None)]:
        algo.iteration = iteration
        result = {"training_iteration": iteration, **({"evaluation": evaluation} if evaluation else {})}
        callback.on_train_result(algorithm=algo, result=result)
        results.append(result)
    assert results[0]["evaluation_start"] == {"success": 0.1, "iteration": 0}
    assert all("evaluation_start" not in result for result in results[1:])
    # The start stands for iteration 1's evaluation (none is made there); the last iteration is evaluated.
    assert [(r["evaluation"]["success"], r["evaluation"]["iteration"]) for r in results] == [
        (0.1, 0),
        (0.5, 2),
        (0.2, 3),
    ]
    assert algo.evaluated == 2

    # A restored trial (Tune loads the checkpoint after building the algorithm) drops the start it measured
    # and evaluates its first result, as without evaluate_start.
    callback, algo = sweep.CarryEvaluation(final_iteration=9, evaluate_start=True), StartAlgorithm()
    callback.on_algorithm_init(algorithm=algo)
    algo.iteration = 6
    result = {"training_iteration": 6}
    callback.on_train_result(algorithm=algo, result=result)
    assert "evaluation_start" not in result and result["evaluation"] == {"success": 0.2, "iteration": 6}
    # Without evaluate_start (PBT's trials), nothing is measured before training.
    callback, algo = sweep.CarryEvaluation(final_iteration=3), StartAlgorithm()
    callback.on_algorithm_init(algorithm=algo)
    assert algo.evaluated == 0
    config, _, _ = sweep.search_space(sweep.parse_args([*NO_MODEL_LOAD, "--scheduler", "pbt"]))
    assert config.callbacks_class.keywords["evaluate_start"] is False
    config, _, _ = sweep.search_space(sweep.parse_args(NO_MODEL_LOAD))
    assert config.callbacks_class.keywords["evaluate_start"] is True


def _trial(tau, seed, records, final):
    """A Tune result as trial_rows reads it, with ``records`` as its progress.csv rows."""
    import pandas as pd

    return SimpleNamespace(
        metrics={
            "training_iteration": len(records), "time_total_s": 60.0, "trial_id": f"{tau}-{seed}",
            "evaluation": {"success": final, "iteration": len(records)},
        },
        metrics_dataframe=pd.DataFrame(records),
        config={
            "replay_tau": tau, "seed": seed, "eps_high": 0.28, "replay_mode": "freshper", "group_size": 4,
        },
        error=None,
        path="/sweep/trial",
        checkpoint=None,
    )  # fmt: skip


def _record(iteration, groups, evaluated_after, success, **more):
    return {
        "training_iteration": iteration, "rollout/groups_sampled": groups,
        "evaluation/iteration": evaluated_after, "evaluation/success": success, **more,
    }  # fmt: skip


def test_the_points_rank_by_the_area_under_success_against_training_episodes(tmp_path):
    # Groups of 4: trial a samples 2, 3, 2, 2 groups (8, 20, 28, 36 episodes after iterations 1-4) and is
    # evaluated before training (0.2), after iteration 2 (0.5) and 4 (0.6); its replay batches age 1, 2, 3
    # with KL 0.1, 0.2, 0.3 above the fresh batch's (c = 0.1); Clip-Higher cuts 2% and 4% of tokens.
    drift = [{"replay/batch_mean_age": age, "learners/train/mismatch_kl_replay": 0.1 * age + 0.01,
              "learners/train/mismatch_kl_fresh": 0.01} for age in (1, 2, 3)]  # fmt: skip
    a = [
        _record(1, 2, 0, 0.2, **{"evaluation_start/success": 0.2, "learners/train/clipfrac_high": 0.02}),
        _record(2, 3, 2, 0.5, **drift[0], **{"learners/train/clipfrac_high": 0.04}),
        _record(3, 2, 2, 0.5, **drift[1]),
        _record(4, 2, 4, 0.6, **drift[2]),
    ]
    # Trial b ends higher (0.7) after fewer episodes (16, 32), lower on the way; no replay KL logged.
    b = [
        _record(1, 2, 0, 0.2, **{"evaluation_start/success": 0.2}),
        _record(2, 2, 2, 0.3),
        _record(3, 2, 2, 0.3),
        _record(4, 2, 4, 0.7),
    ]
    rows = sweep.trial_rows([_trial(4.0, 0, a, 0.6), _trial(math.inf, 0, b, 0.7)], iterations=4)
    assert rows[0]["episode_curve"] == {
        "iterations": [0, 2, 4], "episodes": [0.0, 20.0, 36.0], "success": [0.2, 0.5, 0.6]
    }  # fmt: skip
    assert rows[0]["clip_fractions"] == {"clipfrac_high": pytest.approx(0.03), "clipfrac_low": None}
    assert rows[0]["drift"]["kl_per_age"] == pytest.approx(0.1) and rows[1]["drift"] is None
    grid = sweep_points.points(rows)
    # Budget B = 32 episodes (b's last). a: (0.2 + 0.5) / 2 x 20 + (0.5 + 0.575) / 2 x 12 = 13.45 (0.575 its
    # success interpolated at 32), / 32; b: (0.2 + 0.3) / 2 x 16 + (0.3 + 0.7) / 2 x 16 = 12, / 32.
    assert [point["budget_episodes"] for point in grid] == [32.0, 32.0]
    assert grid[0]["auc"]["mean"] == pytest.approx(13.45 / 32)
    assert grid[1]["auc"]["mean"] == pytest.approx(12 / 32)
    best = sweep_points.best_point(grid)
    assert best["tau"] == 4.0  # by AUC, though b's final success is higher
    text = "\n".join(sweep_points.markdown_lines(grid, best))
    assert "| 4 **(best)** | 0.28 | 1 | 0.420 ± n/a (1 seed) | 0.600 ± n/a (1 seed) |" in text
    assert "| 3.00% / n/a | 0.1 |" in text
    assert "first 32 episodes" in text
    drift_model = "The drift model's tau = 1/c = 10 iterations (c averaged over the points); the best point's"
    assert f"{drift_model} tau: 0.4 times that." in text
    assert sweep_points.plot(grid, tmp_path / "p.png", "t").read_bytes().startswith(b"\x89PNG")

    # A trial without a measured start (run before the sweep measured it, or by PBT): no point has an AUC.
    no_start = [{k: v for k, v in record.items() if k != "evaluation_start/success"} for record in b]
    rows = sweep.trial_rows([_trial(4.0, 0, a, 0.6), _trial(math.inf, 0, no_start, 0.7)], iterations=4)
    assert rows[1]["episode_curve"] is None
    grid = sweep_points.points(rows)
    assert all(point["auc"] is None for point in grid) and sweep_points.best_point(grid)["tau"] == math.inf


def test_a_trial_that_died_before_its_first_result_is_an_error_with_its_settings(tmp_path):
    # Tune's record of such a trial has no config; the params.json it wrote as the trial started has.
    (tmp_path / "params.json").write_text(json.dumps({"replay_tau": 4.0, "seed": 1, "eps_high": 0.2}))
    died = SimpleNamespace(
        metrics=None, metrics_dataframe=None, config=None, error=RuntimeError("died"), path=str(tmp_path),
        checkpoint=None,
    )  # fmt: skip
    unknown = SimpleNamespace(**{**vars(died), "path": str(tmp_path / "none")})
    rows = sweep.trial_rows([died, unknown], iterations=3)
    assert [(row["tau"], row["seed"], row["eps_high"], row["status"]) for row in rows[:1]] == [
        (4.0, 1, 0.2, "error")
    ]
    assert math.isnan(rows[1]["tau"]) and rows[1]["seed"] is None and rows[1]["status"] == "error"
    assert sweep_points.points(rows) == []
