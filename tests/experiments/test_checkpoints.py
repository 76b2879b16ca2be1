"""A checkpoint that cannot be restored names its bad file (``experiments.common.checkpoints``), in
``experiments.train --resume`` and before ``experiments.sweep --resume``."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from experiments import sweep
from experiments.common import checkpoints


def write_checkpoint(folder: Path) -> Path:
    """A checkpoint laid out as RLlib's ``save_to_path`` lays it out: the top state and one component."""
    names = {"class_and_ctor_args_file": "class_and_ctor_args.pkl"}
    learner = folder / "learner_group" / "learner"
    learner.mkdir(parents=True)
    (folder / "rllib_checkpoint.json").write_text(json.dumps({**names, "state_file": "algorithm_state"}))
    (folder / "algorithm_state.pkl").write_bytes(pickle.dumps({"training_iteration": 3}))
    (folder / "class_and_ctor_args.pkl").write_bytes(pickle.dumps({"class": dict}))
    (learner / "metadata.json").write_text(json.dumps({**names, "state_file": "state"}))
    (learner / "state.pkl").write_bytes(pickle.dumps({"weights": list(range(1000))}))
    (learner / "class_and_ctor_args.pkl").write_bytes(pickle.dumps({"class": dict}))
    return folder


def truncate(file: Path) -> None:
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


def test_the_bad_file_of_a_checkpoint_is_named(tmp_path):
    folder = write_checkpoint(tmp_path / "checkpoint")
    assert checkpoints.bad_file(folder) is None
    state = folder / "learner_group" / "learner" / "state.pkl"
    truncate(state)
    assert checkpoints.bad_file(folder) == (state, "unreadable (UnpicklingError: pickle data was truncated)")
    state.write_bytes(b"")
    assert checkpoints.bad_file(folder) == (state, "empty (0 bytes)")
    state.unlink()
    assert checkpoints.bad_file(folder) == (state, "missing (named by metadata.json)")
    file, why = checkpoints.bad_file(tmp_path)
    assert file == tmp_path / "rllib_checkpoint.json" and "not an RLlib checkpoint" in why


def test_a_truncated_safetensors_file_is_named(tmp_path):
    folder = write_checkpoint(tmp_path / "checkpoint")
    weights = folder / "model.safetensors"
    save_file({"w": torch.zeros(64, 64)}, weights)
    assert checkpoints.bad_file(folder) is None
    truncate(weights)
    file, why = checkpoints.bad_file(folder)
    assert file == weights and "its header describes" in why


class FakeAlgorithm:
    """An algorithm whose restore reads the checkpoint's pickles, as RLlib's ``restore_from_path`` does."""

    def __init__(self, failure: Exception | None = None):
        self.failure = failure

    def restore_from_path(self, path: str) -> None:
        if self.failure:
            raise self.failure
        for file in sorted(Path(path).rglob("*.pkl")):
            pickle.loads(file.read_bytes())


def test_a_failed_restore_names_the_file_and_what_to_do(tmp_path):
    folder = write_checkpoint(tmp_path / "checkpoint")
    checkpoints.restore("prog", FakeAlgorithm(), folder, "Delete it.")  # a sound checkpoint restores
    truncate(folder / "algorithm_state.pkl")
    with pytest.raises(SystemExit) as refused:
        checkpoints.restore("prog", FakeAlgorithm(), folder, "Delete it.")
    message = str(refused.value)
    assert f"the checkpoint {folder} cannot be restored: {folder / 'algorithm_state.pkl'} is " in message
    assert "truncated" in message and message.endswith("Delete it.")
    assert isinstance(refused.value.__cause__, pickle.UnpicklingError)  # RLlib's own error stays attached
    # Where every file reads, the restore's own error is the answer.
    sound = write_checkpoint(tmp_path / "sound")
    with pytest.raises(KeyError):
        checkpoints.restore("prog", FakeAlgorithm(KeyError("learner")), sound, "")


def sweep_trial(trial_dir: Path, iterations: int, error=None):
    checkpoint = trial_dir / "checkpoint_000001"
    return SimpleNamespace(
        metrics={"training_iteration": iterations, "trial_id": trial_dir.name, "evaluation": {}},
        metrics_dataframe=None,
        config={"tau": 4.0, "seed": 0, "eps_high": 0.28, "replay_mode": "freshper"},
        error=error,
        path=str(trial_dir),
        checkpoint=SimpleNamespace(path=str(checkpoint)),
    )


def test_sweep_resume_names_an_unfinished_trials_bad_checkpoint_and_drops_errored_ones(tmp_path):
    args = sweep.parse_args(["--model", str(tmp_path), "--iterations", "3"])
    unfinished = write_checkpoint(tmp_path / "t1" / "checkpoint_000001")
    errored = write_checkpoint(tmp_path / "t2" / "checkpoint_000001")
    results = [sweep_trial(tmp_path / "t1", 2), sweep_trial(tmp_path / "t2", 1, error=RuntimeError())]
    sweep.prepare_resume(args, results)
    assert unfinished.is_dir() and not errored.exists()  # Tune restarts an errored trial from scratch

    truncate(unfinished / "learner_group" / "learner" / "state.pkl")
    with pytest.raises(SystemExit) as refused:
        sweep.prepare_resume(args, results)
    message = str(refused.value)
    assert str(unfinished / "learner_group" / "learner" / "state.pkl") in message
    assert f"Delete {unfinished}: the next --resume then marks trial t1 errored" in message
