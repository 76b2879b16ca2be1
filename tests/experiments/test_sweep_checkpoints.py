"""A sweep deletes a trial's checkpoint when the trial finishes, keeps the best one's with
``--keep-checkpoints``, and says in its summary which it kept (``experiments.common.sweep_checkpoints``)."""

from __future__ import annotations

import errno
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments import sweep
from experiments.common.sweep_checkpoints import (
    DropFinishedCheckpoints,
    StopWhenDiskFull,
    best_row,
    trial_checkpoints,
)

ITERATIONS = 3


def fake_trial(root: Path, trial_id: str, peak: float, iterations: int = ITERATIONS, status: str = "RUNNING"):
    """A Tune trial as the callback sees it, with a checkpoint folder on disk (two mid-save)."""
    path = root / f"DAPO_{trial_id}"
    for name in ("checkpoint_000001", "checkpoint_000002"):
        (path / name).mkdir(parents=True)
        (path / name / "state.pkl").write_bytes(b"x")
    return SimpleNamespace(
        trial_id=trial_id,
        status=status,
        path=str(path),
        metric_analysis={"evaluation/success": {"max": peak, "last": peak}},
        last_result={"training_iteration": iterations},
    )


def complete(callback, trials, trial) -> None:
    callback.on_trial_complete(iteration=0, trials=trials, trial=trial)
    trial.status = "TERMINATED"  # as Tune sets it right after the callback


def has_checkpoint(trial) -> bool:
    return bool(trial_checkpoints(trial.path))


def test_a_finished_trials_checkpoint_is_deleted_and_the_others_keep_theirs(tmp_path):
    finished = fake_trial(tmp_path, "a_00000", 0.5)
    running = fake_trial(tmp_path, "a_00001", 0.9)
    errored = fake_trial(tmp_path, "a_00002", 0.9, iterations=1, status="ERROR")
    trials = [finished, running, errored]
    complete(DropFinishedCheckpoints(ITERATIONS), trials, finished)
    assert [has_checkpoint(trial) for trial in trials] == [False, True, True]
    assert Path(finished.path).is_dir()  # the trial's folder and results stay


def test_keep_checkpoints_keeps_exactly_the_best_finished_trials(tmp_path):
    trials = [
        fake_trial(tmp_path, "b_00000", 0.5),
        fake_trial(tmp_path, "b_00001", 0.75),
        fake_trial(tmp_path, "b_00002", 0.25),
        fake_trial(tmp_path, "b_00003", 0.75),  # ties with b_00001, which came first
        fake_trial(tmp_path, "b_00004", 1.0, iterations=2),  # stopped short: never the best
    ]
    callback = DropFinishedCheckpoints(ITERATIONS, keep_best=True)
    kept = []  # after each completion: the finished trials that still have a checkpoint
    for done, trial in enumerate(trials, start=1):
        complete(callback, trials, trial)
        kept.append([each.trial_id for each in trials[:done] if has_checkpoint(each)])
        assert all(has_checkpoint(each) for each in trials[done:])  # the running ones keep theirs
    assert kept == [["b_00000"], ["b_00001"], ["b_00001"], ["b_00001"], ["b_00001"]]


def test_the_best_trial_is_the_same_whatever_order_tune_lists_them_in():
    def row(trial, peak, status="ok"):
        return {"trial": trial, "peak_validation_success": peak, "status": status}

    rows = [row("t3", 0.5), row("t1", 0.5), row("t2", math.nan), row("t0", 0.9, "error")]
    assert best_row(rows)["trial"] == "t1" and best_row(rows[::-1])["trial"] == "t1"
    assert best_row([row("t2", math.nan)]) is None


def result(tmp_path: Path, trial: str, peak: float, checkpoint: bool, iterations: int = ITERATIONS):
    import pandas as pd

    path = tmp_path / trial / "checkpoint_000003"
    if checkpoint:
        path.mkdir(parents=True)
    return SimpleNamespace(
        metrics={"training_iteration": iterations, "trial_id": trial, "evaluation": {"success": peak}},
        metrics_dataframe=pd.DataFrame({"evaluation/success": [0.0, peak]}),
        config={"tau": 4.0, "seed": 0, "eps_high": 0.28, "replay_mode": "freshper"},
        error=None,
        path=str(tmp_path / trial),
        checkpoint=SimpleNamespace(path=str(path)),  # Tune's record, deleted or not
    )


def test_the_summary_says_which_checkpoint_was_kept(tmp_path):
    args = sweep.parse_args(["--model", str(tmp_path), "--name", "x", "--iterations", str(ITERATIONS)])
    rows = sweep.trial_rows(
        [result(tmp_path, "t0", 0.5, False), result(tmp_path, "t1", 0.75, True)], ITERATIONS
    )
    assert [row["checkpoint"] for row in rows] == [None, str(tmp_path / "t1" / "checkpoint_000003")]
    best = sweep.best_row(rows)
    text = sweep.summary_markdown(args, rows, best)
    assert f"Checkpoint kept: the best trial's, {tmp_path / 't1' / 'checkpoint_000003'}." in text
    assert sweep.kept_checkpoints(rows) == {"ok": [best["checkpoint"]], "unfinished": [], "error": []}

    rows = sweep.trial_rows(
        [result(tmp_path, "t2", 0.5, False), result(tmp_path, "t3", 0.5, True, iterations=1)], ITERATIONS
    )
    text = sweep.summary_markdown(args, rows, sweep.best_row(rows))
    assert "No finished trial's checkpoint was kept" in text
    assert f"Unfinished trials keep theirs for --resume: {tmp_path / 't3' / 'checkpoint_000003'}." in text


def test_a_trial_that_filled_the_disk_ends_the_sweep(tmp_path):
    error_file = tmp_path / "error.txt"
    trial = SimpleNamespace(trial_id="c_00001", error_file=str(error_file))
    error_file.write_text("Failure # 1\nray::DAPO.save() ...\nOSError: [Errno 28] No space left on device\n")
    with pytest.raises(OSError) as ended:
        StopWhenDiskFull().on_trial_error(iteration=0, trials=[trial], trial=trial)
    assert ended.value.errno == errno.ENOSPC and "c_00001" in str(ended.value)
    error_file.write_text("Failure # 1\nValueError: a trial's own bug\n")  # other errors: the sweep goes on
    StopWhenDiskFull().on_trial_error(iteration=0, trials=[trial], trial=trial)
