"""The disk a run needs, checked before ``experiments.train`` and ``experiments.sweep`` write anything, and a
disk that fills up mid-run."""

from __future__ import annotations

import errno
import json
import tempfile
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from ray.tune import TuneError
from safetensors.torch import save_file

from experiments import sweep, train
from experiments.common import disk_space

Usage = namedtuple("Usage", "total used free")


@pytest.fixture
def model_dir(tmp_path) -> Path:
    """A model directory whose safetensors hold 1856 parameters: two embedding-shaped matrices and one
    linear layer (32 x 8)."""
    folder = tmp_path / "model"
    folder.mkdir()
    tensors = {
        "model.embed_tokens.weight": torch.zeros(100, 8),
        "model.layers.0.mlp.up_proj.weight": torch.zeros(32, 8),
        "lm_head.weight": torch.zeros(100, 8),
    }
    save_file(tensors, folder / "model.safetensors")
    return folder


@pytest.fixture
def free_space(monkeypatch):
    """Sets the free space every disk reports."""

    def set_free(free: int) -> None:
        monkeypatch.setattr(disk_space.shutil, "disk_usage", lambda path: Usage(10**13, 0, free))

    return set_free


def test_a_checkpoint_is_estimated_from_the_models_parameters(model_dir):
    # 12 bytes per trainable parameter (float32 weight + AdamW's two moments), with the overhead.
    assert disk_space.checkpoint_bytes(str(model_dir)) == int(1856 * 12 * 1.25)
    # LoRA rank 2 trains r x (in + out) per linear weight; embeddings and the output head have none.
    assert disk_space.checkpoint_bytes(str(model_dir), lora_rank=2) == int(2 * (32 + 8) * 12 * 1.25)
    assert disk_space.checkpoint_bytes("owner/not-local") is None  # a hub id: its size is unknown
    assert disk_space.needed_bytes(1000, 3) == 3000 + disk_space.MARGIN_BYTES
    assert disk_space.needed_bytes(None, 3) == disk_space.MARGIN_BYTES


def test_a_short_disk_is_refused_naming_the_folder_the_space_and_the_fix(tmp_path, free_space):
    folder = tmp_path / "not" / "made" / "yet"  # measured on its nearest existing parent
    checkpoint = 2 * 10**9
    free_space(3 * 10**9)
    with pytest.raises(SystemExit) as refused:
        disk_space.check_free_space("prog", folder, checkpoint, 2, "use another disk")
    message = str(refused.value)
    assert str(folder) in message and "4.5 GB" in message and "3.0 GB is free" in message
    assert "2 checkpoint(s) of about 2.0 GB" in message and message.endswith("or use another disk.")
    free_space(5 * 10**9)
    needed = disk_space.check_free_space("prog", folder, checkpoint, 2, "x")
    assert needed == 4 * 10**9 + disk_space.MARGIN_BYTES


def test_the_sweep_counts_the_checkpoints_its_running_trials_hold(tmp_path, model_dir, free_space):
    args = sweep.parse_args(
        ["--model", str(model_dir), "--tau", "4", "8", "--max-concurrent", "2", "--keep-checkpoints"]
    )
    free_space(0)
    with pytest.raises(SystemExit) as refused:
        sweep.check_disk(args, tmp_path / "s", args.config)
    # Two trials at once, each with its latest checkpoint, the next one and (on this disk) its temporary copy,
    # and the best one kept.
    per_trial = 2 + disk_space.same_disk(tempfile.gettempdir(), tmp_path)
    message = str(refused.value)
    assert f"{2 * per_trial + 1} checkpoint(s)" in message and str(tmp_path / "s") in message
    assert "--storage-path" in message and "--max-concurrent" in message and "--keep-checkpoints" in message
    free_space(10**12)
    assert sweep.check_disk(args, tmp_path / "s", args.config) > disk_space.MARGIN_BYTES


def test_train_refuses_a_short_disk_before_it_starts(tmp_path, model_dir, free_space, monkeypatch):
    monkeypatch.setattr("experiments.common.quiet_logs.install", lambda path: path)
    monkeypatch.setattr(
        "experiments.common.ray_session.start_ray", lambda **kwargs: pytest.fail("the run started")
    )
    free_space(1000)
    with pytest.raises(SystemExit, match="not enough disk space") as refused:
        train.main(["--model", str(model_dir), "--output", str(tmp_path / "out")])
    assert str(tmp_path / "out") in str(refused.value) and "--output" in str(refused.value)


def test_a_full_disk_is_recognised_through_wrapping_and_text():
    full = OSError(errno.ENOSPC, "No space left on device")
    try:
        raise TuneError("the experiment failed") from full
    except TuneError as error:
        wrapped = error
    assert disk_space.disk_full(full) and disk_space.disk_full(wrapped)
    assert disk_space.disk_full(RuntimeError("OSError: [Errno 28] No space left on device: '/x'"))
    assert not disk_space.disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not disk_space.disk_full(None)


def test_a_full_disk_mid_train_keeps_the_metrics_written_and_names_the_folder(tmp_path, monkeypatch):
    path = tmp_path / "metrics.csv"
    train._write_csv(path, [{"a": 1.0}])

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(train.os, "replace", full)
    cut_short = disk_space.exit_when_full("prog", tmp_path, 5 * 10**9, "metrics.csv holds the rest.")
    with pytest.raises(SystemExit) as ended, cut_short:
        train._write_csv(path, [{"a": 1.0}, {"a": 2.0}])
    assert path.read_text().splitlines() == ["a", "1.0"]  # the earlier file, whole
    assert [file.name for file in tmp_path.iterdir()] == ["metrics.csv"]  # no partial file left
    message = str(ended.value)
    assert f"the disk of {tmp_path} is full" in message and "needs about 5.0 GB" in message
    assert message.endswith("metrics.csv holds the rest.")
    with pytest.raises(PermissionError), disk_space.exit_when_full("prog", tmp_path, 1, ""):
        raise PermissionError(errno.EACCES, "Permission denied")  # other errors pass through


def finished_trial(trial: str, seed: int, error=None):
    return SimpleNamespace(
        metrics={
            "training_iteration": 3, "time_total_s": 60.0, "trial_id": trial,
            "evaluation": {"success": 0.5, "iteration": 3},
        },
        metrics_dataframe=None,
        config={"tau": 4.0, "seed": seed, "eps_high": 0.28, "replay_mode": "freshper"},
        error=error,
        path=f"/sweep/{trial}",
        checkpoint=None,
    )  # fmt: skip


@pytest.mark.parametrize("where", ["driver", "trial"])
def test_a_full_disk_mid_sweep_writes_the_summary_of_the_finished_trials(tmp_path, monkeypatch, where):
    # The driver's error (writing results or Tune's state) ends fit(); a trial's (writing its checkpoint)
    # is that trial's error. Either way the trials finished so far are reported, then the sweep stops.
    full = OSError(errno.ENOSPC, "No space left on device")
    results = [finished_trial("t0", 0)]
    if where == "trial":
        results.append(finished_trial("t1", 1, error=RuntimeError(f"OSError: {full}")))

    def fit(args):
        if where == "driver":
            raise TuneError("Tune failed") from full
        return results

    monkeypatch.setattr("experiments.common.quiet_logs.install", lambda path: path)
    (tmp_path / "s").mkdir()  # made by install() and Tune
    monkeypatch.setattr(sweep, "check_disk", lambda args, folder, config: 7 * 10**9)
    monkeypatch.setattr(sweep, "run_sweep", fit)
    monkeypatch.setattr(sweep, "load_results", lambda folder: results)
    argv = ["--model", str(tmp_path), "--tau", "4", "--eps-high", "0.28", "--seeds", "2"]
    with pytest.raises(SystemExit) as ended:
        sweep.main([*argv, "--iterations", "3", "--storage-path", str(tmp_path), "--name", "s"])
    message = str(ended.value)
    assert f"the disk of {tmp_path / 's'} is full" in message and "needs about 7.0 GB" in message
    assert "1 of 2 trials finished" in message and "--resume --name s" in message
    saved = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert [row["trial"] for row in saved["trials"] if row["status"] == "ok"] == ["t0"]
    assert saved["missing"] == ["tau 4, eps_high 0.28, seed 1"]
    assert "Partial: 1 of 2 trials finished" in (tmp_path / "s" / "summary.md").read_text()
