"""``python -m experiments.train``: one iteration writes its results folder; ``--resume`` continues it."""

from __future__ import annotations

import csv
import json

from algorithms.dapo import presets
from experiments import train
from models.tiny import tiny_lm_path


def read_rows(path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_train_writes_results_and_resumes(tmp_path, monkeypatch, ray_session):
    # experiments.train has no workload options; shrink the tiny preset it applies instead.
    for key, value in {
        "prompts_per_iteration": 2,
        "group_size": 2,
        "max_response_tokens": 12,
        "overlong_cache_len": 4,
        "max_generation_batches": 1,
        "minibatch_size": 4,
        "engine_kv_cache_gib": 0.5,
    }.items():
        monkeypatch.setitem(presets.TINY_SCALE, key, value)
    common = ["--iterations", "1", "--eval-seeds", "4", "--model", str(tiny_lm_path()), "--replay", "per"]

    first = tmp_path / "first"
    summary = train.main([*common, "--output", str(first)])
    rows = read_rows(first / "metrics.csv")
    assert [float(row["training_iteration"]) for row in rows] == [1.0]
    assert (first / "curves.png").read_bytes().startswith(b"\x89PNG")
    saved = json.loads((first / "summary.json").read_text())
    assert saved == json.loads(json.dumps(summary))
    assert saved["before"]["n"] == saved["after"]["n"] == 4
    low, high = saved["after"]["ci95"]
    assert 0.0 <= low <= saved["after"]["success"] <= high <= 1.0
    assert (first / "checkpoint" / "rllib_checkpoint.json").exists()

    second = tmp_path / "second"
    train.main([*common, "--resume", str(first / "checkpoint"), "--output", str(second)])
    rows = read_rows(second / "metrics.csv")
    assert [float(row["training_iteration"]) for row in rows] == [2.0]
    assert (second / "summary.json").exists() and (second / "checkpoint" / "rllib_checkpoint.json").exists()
