"""``python -m experiments.sweep --scheduler asha|pbt`` and ``--min-entropy``: Tune's trial schedulers and the
early stop on entropy collapse (``experiments.common.entropy_stopper``), and how the summary records them."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from ray import tune
from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

from experiments import sweep
from experiments.common.entropy_stopper import EntropyCollapseStopper, result_value
from experiments.common.pbt_checkpoints import KeepCheckpointsToRestore
from experiments.common.sweep_checkpoints import DropFinishedCheckpoints, trial_checkpoints

# Configs only: the named model (an existing directory, as --model requires) is never loaded here.
NO_MODEL_LOAD = ["--model", str(Path(__file__).resolve().parent)]


def entropy_result(entropy: float | None) -> dict:
    """An RLlib result as the stopper gets it: nested, the entropy under ``learners`` where it was logged."""
    return {
        "training_iteration": 1,
        **({"learners": {"train/entropy": entropy}} if entropy is not None else {}),
    }


def run(stopper: EntropyCollapseStopper, trial_id: str, entropies: list[float | None]) -> list[bool]:
    return [stopper(trial_id, entropy_result(entropy)) for entropy in entropies]


def test_a_trial_below_the_entropy_floor_for_patience_iterations_is_stopped_with_the_reason():
    stopper = EntropyCollapseStopper(min_entropy=0.05, patience=3)
    assert run(stopper, "t", [0.2, 0.04, 0.03]) == [False, False, False]
    result = entropy_result(0.01)
    assert stopper("t", result)
    assert result["stopped_early"] == "entropy below 0.05 for 3 iterations"
    assert not stopper.stop_all()


def test_a_recovery_resets_the_count():
    stopper = EntropyCollapseStopper(min_entropy=0.05, patience=2)
    assert run(stopper, "t", [0.01, 0.3, 0.01, 0.05, 0.01, 0.01]) == [False] * 5 + [True]


def test_a_missing_or_nan_entropy_never_stops_and_breaks_no_streak():
    stopper = EntropyCollapseStopper(min_entropy=0.05, patience=2)
    # The first iterations, and those that trained nothing, have no entropy (or NaN): they do not count.
    assert run(stopper, "t", [None, None, None, math.nan]) == [False] * 4
    assert run(stopper, "t", [0.01, None, math.nan]) == [False] * 3
    assert run(stopper, "t", [0.01]) == [True]


def test_each_trial_has_its_own_count():
    stopper = EntropyCollapseStopper(min_entropy=0.05, patience=2)
    assert run(stopper, "a", [0.01]) == [False]
    assert run(stopper, "b", [0.01, 0.5]) == [False, False]
    assert run(stopper, "a", [0.01]) == [True]
    assert run(stopper, "b", [0.01]) == [False]


def test_the_entropy_is_read_nested_flat_or_in_between():
    key = "learners/train/entropy"
    assert result_value({"learners": {"train/entropy": 0.1}}, key) == 0.1  # RLlib's result
    assert result_value({"learners/train/entropy": 0.2}, key) == 0.2  # Tune's flattened one
    assert result_value({"learners": {"train": {"entropy": 0.3}}}, key) == 0.3
    assert result_value({"learners": {"train/loss": 1.0}}, key) is None
    assert result_value({"learners": {"train/entropy": "n/a"}}, key) is None
    assert result_value({"learners": 1.0}, key) is None
    with pytest.raises(ValueError):
        EntropyCollapseStopper(min_entropy=0.0, patience=3)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--grace-period", "1"], "--grace-period is a setting of --scheduler asha: add --scheduler asha"),
        (["--perturbation-interval", "1"], "add --scheduler pbt"),
        (["--scheduler", "asha", "--grace-period", "0"], "--grace-period must be between 1 and --iterations"),
        (
            ["--scheduler", "asha", "--grace-period", "4"],
            "--grace-period must be between 1 and --iterations (3)",
        ),
        (["--min-entropy", "0"], "--min-entropy must be > 0 (leave it out"),
        (["--min-entropy", "-0.1"], "--min-entropy must be > 0"),
        (["--entropy-patience", "2"], "give --min-entropy too"),
        (["--min-entropy", "0.1", "--entropy-patience", "0"], "--entropy-patience must be >= 1"),
        (["--scheduler", "pbt", "--search-alg", "optuna"], "give --search-alg grid or random, not optuna"),
        (["--scheduler", "pbt", "--eps-high", "0.28"], "give at least two"),
        (
            ["--scheduler", "pbt", "--search-alg", "random", "--num-samples", "1"],
            "population of at least 2 trials: raise --num-samples",
        ),
        (["--scheduler", "pbt", "--perturbation-interval", "3"], "give --perturbation-interval or more"),
        (["--scheduler", "pbt", "--eval-every", "3"], "--eval-every (the default interval) 3"),
        (
            ["--scheduler", "pbt", "--eval-every", "0"],
            "give --eval-every (the default --perturbation-interval)",
        ),
    ],
)
def test_bad_scheduler_options_are_parser_errors_naming_the_fix(argv, message, capsys):
    # Without --settings: 3 iterations, evaluated every iteration.
    with pytest.raises(SystemExit):
        sweep.parse_args([*NO_MODEL_LOAD, *argv])
    assert message in capsys.readouterr().err


def test_fifo_is_the_default_and_changes_nothing():
    args = sweep.parse_args(NO_MODEL_LOAD)
    assert args.scheduler == "fifo" and sweep.make_scheduler(args) is None
    assert sweep.stopping_rule(args) == {"training_iteration": 3}
    policy = sweep.checkpoint_config(args)
    assert (policy.checkpoint_frequency, policy.num_to_keep) == (1, 1)
    assert sweep.early_stopping_lines(args) == []
    assert sweep.scheduler_settings(args) == {}


def test_asha_and_pbt_are_built_on_the_validation_metric():
    args = sweep.parse_args([*NO_MODEL_LOAD, "--scheduler", "asha", "--iterations", "8"])
    asha = sweep.make_scheduler(args)
    assert isinstance(asha, ASHAScheduler) and args.grace_period == 2  # a quarter of the iterations
    assert sweep.scheduler_settings(args) == {
        "metric": "evaluation/success", "mode": "max", "time_attr": "training_iteration", "max_t": 8,
        "grace_period": 2,
    }  # fmt: skip
    assert asha.metric == "evaluation/success"

    args = sweep.parse_args([*NO_MODEL_LOAD, "--scheduler", "pbt", "--tau", "10", "20", "--iterations", "4"])
    pbt = sweep.make_scheduler(args)
    assert isinstance(pbt, PopulationBasedTraining) and pbt.metric == "evaluation/success"
    settings = sweep.scheduler_settings(args)
    # The default interval is the evaluation's (every iteration without --settings); tau is not mutated.
    assert settings["perturbation_interval"] == args.perturbation_interval == 1
    assert settings["hyperparam_mutations"] == {"eps_high": [0.2, 0.28]} and settings["synch"]
    # PBT works with the grid: it sets the population's starting points.
    config, searcher, _ = sweep.search_space(args)
    assert searcher is None and config.replay_tau == {"grid_search": [10.0, 20.0]}
    policy = sweep.checkpoint_config(args)
    assert (policy.checkpoint_frequency, policy.num_to_keep) == (1, sweep.PBT_CHECKPOINTS_KEPT)
    assert "Scheduler PBT on evaluation/success" in "\n".join(sweep.early_stopping_lines(args))


def test_min_entropy_adds_the_stopper_to_the_iteration_limit():
    args = sweep.parse_args([*NO_MODEL_LOAD, "--min-entropy", "0.05"])
    rule = sweep.stopping_rule(args)
    assert isinstance(rule, tune.stopper.CombinedStopper) and args.entropy_patience == 3
    low = {"training_iteration": 1, "learners": {"train/entropy": 0.01}}
    assert [rule("t", {**low, "training_iteration": i}) for i in (1, 2)] == [False, False]
    result = {**low, "training_iteration": 3}
    assert rule("t", result) and "stopped_early" not in result  # the last iteration: finished, not stopped
    assert "below 0.05 in 3 consecutive iterations" in "\n".join(sweep.early_stopping_lines(args))


def test_stopped_trials_are_done_with_their_reason_in_tunes_record(tmp_path, ray_session):
    # Tune itself, with a stand-in trainable reporting what DAPO's results hold: the entropy stopper's reason
    # reaches the trial's last result (Tune hands the stopper's dict on), ASHA's stop is read from "done", and
    # the summary counts both as done, not missing.
    args = sweep.parse_args(
        [*NO_MODEL_LOAD, "--scheduler", "asha", "--grace-period", "1", "--iterations", "4", "--min-entropy",
         "0.1", "--entropy-patience", "2", "--tau", "50", "--eps-high", "0.2", "0.28", "0.35", "--name", "x"]
    )  # fmt: skip
    # Per eps_high: success, and entropy per iteration (None: not logged, an iteration that trained nothing).
    cases = {
        0.2: (1.0, [None, 0.5, 0.5, 0.5]),  # runs all 4 iterations
        0.28: (1.0, [None, 0.05, 0.05, 0.05]),  # collapses: stopped after iteration 3
        0.35: (0.0, [None, 0.5, 0.5, 0.5]),  # below the first trial at ASHA's rung 1: stopped there
    }

    def trainable(config):
        success, entropies = cases[config["eps_high"]]
        for iteration, entropy in enumerate(entropies, start=1):
            learners = {} if entropy is None else {"learners": {"train/entropy": entropy}}
            tune.report({"evaluation": {"success": success, "iteration": iteration}, **learners})

    space = {
        "replay_tau": 50.0,
        "seed": 0,
        "replay_mode": "freshper",
        "eps_high": tune.grid_search(list(cases)),
    }
    results = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(scheduler=sweep.make_scheduler(args), max_concurrent_trials=1),
        run_config=tune.RunConfig(
            name="x", storage_path=str(tmp_path), stop=sweep.stopping_rule(args), verbose=0
        ),
    ).fit()
    # Read back from disk, as --report-only does.
    results = tune.Tuner.restore(str(tmp_path / "x"), trainable=trainable).get_results()
    rows = {row["eps_high"]: row for row in sweep.trial_rows(results, 4, "asha")}
    assert [(rows[e]["status"], rows[e]["iterations"]) for e in cases] == [
        ("ok", 4), ("stopped", 3), ("stopped", 1)
    ]  # fmt: skip
    assert rows[0.2]["stopped_early"] is None
    assert rows[0.28]["stopped_early"] == "entropy below 0.1 for 2 iterations"
    assert rows[0.35]["stopped_early"].startswith("ASHA: evaluation/success below its rung's cutoff")
    assert sweep.missing_trials(args, list(rows.values())) == (3, [])
    text = sweep.summary_markdown(args, list(rows.values()), sweep.best_row(list(rows.values())))
    assert text.startswith("# Sweep `x`: freshrl/FrozenLake-v0, replay freshper, search grid, scheduler asha")
    assert "Stopped early (done, not missing;" in text
    assert "after iteration 3 (entropy below 0.1 for 2 iterations)" in text
    # An interrupted trial is not "stopped": its last result is not "done".
    assert sweep.stop_reason({"training_iteration": 2, "done": False}, 4, "asha") is None


@pytest.mark.slow
def test_sweep_cli_with_asha_runs_and_records_its_scheduler(tmp_path, tiny_workload, ray_session):
    # Two real DAPO trials under ASHA (its one rung after iteration 1 of 3): the second stops there if its
    # success is below the first's. --min-entropy far below any entropy puts the entropy stopper in Tune's
    # stop rule, pickled into the experiment, without stopping anything. Slow: each trial starts its own
    # process with an engine (20-40 s here).
    argv = ["--iterations", "3", "--tau", "50", "--eps-high", "0.2", "0.28", "--scheduler", "asha"]
    argv += ["--grace-period", "1", "--min-entropy", "1e-6"]
    summary = sweep.main([*argv, *tiny_workload, "--storage-path", str(tmp_path), "--name", "a"])
    folder = tmp_path / "a"
    assert summary["scheduler"] == {
        "name": "asha", "metric": "evaluation/success", "mode": "max", "time_attr": "training_iteration",
        "max_t": 3, "grace_period": 1,
    }  # fmt: skip
    assert summary["early_stopping"] == {"key": "learners/train/entropy", "min_entropy": 1e-6, "patience": 3}
    trials = summary["trials"]
    assert len(trials) == 2 and summary["missing"] == []
    for row in trials:
        assert (row["status"], row["iterations"], row["stopped_early"]) in [
            ("ok", 3, None),
            ("stopped", 1, "ASHA: evaluation/success below its rung's cutoff after iteration 1"),
        ]
    text = (folder / "summary.md").read_text()
    assert "search grid, scheduler asha" in text and "Scheduler ASHA on evaluation/success" in text
    assert json.loads((folder / "summary.json").read_text())["scheduler"]["name"] == "asha"
    assert not list(folder.rglob("checkpoint_*"))  # stopped trials' checkpoints are deleted as well


@pytest.mark.slow
def test_sweep_cli_with_pbt_exploits_and_restores(tmp_path, tiny_workload, ray_session):
    # Two real DAPO trials under PBT, synchronous, perturbing after iteration 1 of 2: with two trials one is
    # the lower quarter and restores the other's checkpoint (its FreshPER buffer included) with eps_high
    # perturbed. Slow: every pause restarts a trial's process.
    argv = ["--iterations", "2", "--tau", "50", "--eps-high", "0.2", "0.28", "--scheduler", "pbt"]
    summary = sweep.main([*argv, *tiny_workload, "--storage-path", str(tmp_path), "--name", "p"])
    assert summary["scheduler"]["name"] == "pbt" and summary["scheduler"]["perturbation_interval"] == 1
    trials = summary["trials"]
    assert [(row["status"], row["iterations"]) for row in trials] == [("ok", 2), ("ok", 2)]
    assert summary["missing"] == [] and summary["planned_trials"] == 2
    # PBT's log of its exploits: [trial, donor, their iterations, the donor's config, the trial's new one].
    exploits = [json.loads(line) for line in (tmp_path / "p" / "pbt_global.txt").read_text().splitlines()]
    assert len(exploits) == 1
    clone = next(row for row in trials if exploits[0][0] in Path(row["path"]).name)
    results = [json.loads(line) for line in (Path(clone["path"]) / "result.json").read_text().splitlines()]
    # Its second iteration ran restored, with the new settings (the donor's tau, eps_high explored).
    assert results[1]["iterations_since_restore"] == 1
    assert results[1]["config"]["eps_high"] == exploits[0][5]["eps_high"] == clone["eps_high"]


def test_under_pbt_every_trial_of_the_population_holds_its_checkpoints(monkeypatch):
    counted = {}

    def check_free_space(prog, folder, checkpoint, copies, fix):
        counted.update(copies=copies, fix=fix)
        return 0

    monkeypatch.setattr(sweep.disk_space, "check_free_space", check_free_space)
    same_disk = int(sweep.disk_space.same_disk(tempfile.gettempdir(), Path.cwd()))
    argv = [*NO_MODEL_LOAD, "--tau", "4", "8", "--iterations", "4"]
    args = sweep.parse_args([*argv, "--scheduler", "pbt"])
    sweep.check_disk(args, Path.cwd(), args.config)
    # 4 trials (2 taus x 2 eps_high), paused in turn: each keeps 3, plus the next one and its temporary copy.
    assert counted["copies"] == 4 * (sweep.PBT_CHECKPOINTS_KEPT + 1 + same_disk)
    assert "fewer trials" in counted["fix"]
    args = sweep.parse_args([*argv, "--scheduler", "asha"])
    sweep.check_disk(args, Path.cwd(), args.config)
    assert counted["copies"] == 1 * (1 + 1 + same_disk)  # one trial at a time, as fifo


def pbt_trial(root: Path, trial_id: str, status: str, restores_from: Path | None = None) -> SimpleNamespace:
    """A Tune trial as the callbacks see it: its folder with a checkpoint, and the checkpoint it restores
    from when it next starts (its own latest, or a donor's after a PBT exploit)."""
    path = root / trial_id
    (path / "checkpoint_000001").mkdir(parents=True)
    checkpoint = restores_from or path / "checkpoint_000001"
    return SimpleNamespace(
        trial_id=trial_id,
        status=status,
        path=str(path),
        checkpoint=SimpleNamespace(path=str(checkpoint)),
        metric_analysis={},
        last_result={"training_iteration": 4},
    )


def test_a_finished_trials_checkpoint_stays_while_a_pbt_clone_has_yet_to_restore_it(tmp_path):
    donor = pbt_trial(tmp_path, "d", "RUNNING")
    clone = pbt_trial(tmp_path, "c", "PAUSED", restores_from=Path(donor.path) / "checkpoint_000001")
    other = pbt_trial(tmp_path, "o", "TERMINATED")
    callback = KeepCheckpointsToRestore(DropFinishedCheckpoints(iterations=4))
    trials = [donor, clone, other]
    callback.on_trial_complete(iteration=0, trials=trials, trial=donor)
    donor.status = "TERMINATED"
    assert all(trial_checkpoints(each.path) for each in trials)  # nothing deleted yet
    clone.checkpoint = SimpleNamespace(path=str(Path(clone.path) / "checkpoint_000001"))  # restored, saved
    callback.on_trial_complete(iteration=0, trials=trials, trial=clone)
    assert not any(trial_checkpoints(each.path) for each in trials)  # the held-back deletions happen now
