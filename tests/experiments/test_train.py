"""``python -m experiments.train``: one iteration writes its results folder; ``--resume`` continues it."""

from __future__ import annotations

import csv
import json
import math
import shutil

import pytest

from experiments import train
from experiments.common import checkpoints
from experiments.common.run_config import RunSettings, SettingsError, build_config, starting_model
from experiments.common.training_metrics import trained_nothing
from models.tiny import tiny_lm_path


def read_rows(path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_train_writes_results_and_resumes(tmp_path, ray_session):
    workload = {
        "prompts_per_iteration": 2,
        "group_size": 2,
        "max_response_tokens": 12,
        "overlong_cache_len": 4,
        "max_generation_batches": 1,
        "minibatch_size": 4,
        "engine_kv_cache_gib": 0.5,
    }
    common = ["--iterations", "1", "--eval-tasks", "4", "--model", str(tiny_lm_path()), "--replay", "per"]
    common += [arg for key, value in workload.items() for arg in ("--set", f"{key}={value}")]

    first = tmp_path / "first"
    summary = train.main([*common, "--output", str(first)])
    rows = read_rows(first / "metrics.csv")
    assert [float(row["training_iteration"]) for row in rows] == [1.0]
    assert (first / "curves.png").read_bytes().startswith(b"\x89PNG")
    saved = json.loads((first / "summary.json").read_text())
    assert saved == json.loads(json.dumps(summary))
    assert saved["before"]["num_episodes"] == saved["after"]["num_episodes"] == 4
    assert saved["change"]["difference"] == saved["after"]["success"] - saved["before"]["success"]
    after = saved["after"]
    assert 0.0 <= after["success_ci95_low"] <= after["success"] <= after["success_ci95_high"] <= 1.0
    assert {"pass@1", "return_mean", "format_valid_rate", "turns_mean", "response_length_mean"} <= set(after)
    # The evaluation after training is RLlib's, inside the last iteration's result.
    assert float(rows[0]["evaluation/success"]) == after["success"]
    assert [e["iteration"] for e in saved["evaluations"]] == [0, 1]
    assert saved["overrides"]["group_size"] == 2 and saved["scale"] == "tiny"
    # The tiny scale's explicit float32, recorded with the CPU it ran on.
    dtypes = saved["provenance"]["dtypes"]
    assert dtypes["model_dtype_reason"] == dtypes["engine_dtype_reason"] == "float32: set explicitly"
    assert dtypes["cpu_capability"]
    assert (first / "checkpoint" / "rllib_checkpoint.json").exists()
    # A copy of the checkpoint cut short (a full disk) names its bad file (test_checkpoints.py has the restore
    # that reports it).
    corrupt = shutil.copytree(first / "checkpoint", tmp_path / "corrupt")
    assert checkpoints.bad_file(corrupt) is None
    weights = max(corrupt.rglob("*.pkl"), key=lambda file: file.stat().st_size)
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    truncated = "unreadable (UnpicklingError: pickle data was truncated)"
    assert checkpoints.bad_file(corrupt) == (weights, truncated)

    second = tmp_path / "second"
    train.main([*common, "--resume", str(first / "checkpoint"), "--output", str(second)])
    rows = read_rows(second / "metrics.csv")
    assert [float(row["training_iteration"]) for row in rows] == [2.0]
    assert (second / "summary.json").exists() and (second / "checkpoint" / "rllib_checkpoint.json").exists()


NOTHING = {"rollout/groups_sampled": 12.0, "rollout/groups_kept": 0.0, "rollout/groups_from_surplus": 0.0}


def test_an_iteration_that_trained_nothing_says_so_and_shows_only_metrics_that_exist():
    flat = {
        **NOTHING,
        "rollout/episode_return_mean": -0.3,
        "rollout/success": 0.0,
        "rollout/tokens_per_s": 120.0,
    }
    assert trained_nothing(flat)
    fields = train.progress_postfix(flat, untrained=3)
    assert fields["note"] == "0 informative groups: nothing trained this iteration"
    assert fields["return"] == "-0.30" and fields["untrained_its"] == "3"
    assert "nan" not in " ".join(fields.values())
    assert fields["success"] == "0.00"  # every rollout's, trained on or not
    assert "entropy" not in fields  # not measured when nothing was trained
    trained = {
        **flat,
        "rollout/groups_kept": 2.0,
        "rollout/success": 0.25,
        "rollout/invalid_output_rate": 0.5,
    }
    assert not trained_nothing(trained)
    fields = train.progress_postfix(trained, untrained=0)
    assert "note" not in fields and fields["success"] == "0.25" and fields["invalid"] == "0.50"
    # Groups left over from the previous iteration are trained on too.
    assert not trained_nothing({**NOTHING, "rollout/groups_from_surplus": 1.0})


def test_warm_start_options(monkeypatch):
    args = train.parse_args(["--warm-start-steps", "25"])
    assert (args.run.warm_start_steps, args.run.warm_start) == (25, True)
    assert train.parse_args(["--no-warm-start"]).run.warm_start is False
    for bad in (["--warm-start-steps", "-1"], ["--warm-start-steps", "5", "--no-warm-start"]):
        with pytest.raises(SystemExit, match="warm_start"):
            train.parse_args(bad)
    with pytest.raises(SystemExit, match="warm_start"):  # a model's settings file may set the steps
        train.parse_args(["--model", "smollm2", "--no-warm-start"])
    args = train.parse_args(["--model", "smollm2", "--warm-start-steps", "60"])
    assert (args.run.model, args.run.warm_start_steps) == ("smollm2", 60)
    chosen = []
    monkeypatch.setattr(
        "algorithms.warm_start.warm_started_path",
        lambda env, steps, env_config, base=None: (
            chosen.append((env, base, steps, env_config)) or f"/warm-{base}-{steps}"
        ),
    )
    monkeypatch.setattr("algorithms.warm_start.tiny_base_path", lambda env: f"/base-{env}")
    assert starting_model(RunSettings(env="e", warm_start_steps=7)) == "/warm-None-7"
    assert starting_model(RunSettings(env="e", warm_start=False)) == "/base-e"
    assert starting_model(RunSettings(env="e", model="smollm2")) == "smollm2"  # as it is
    assert starting_model(RunSettings(env="e", model="smollm2", warm_start_steps=0)) == "smollm2"
    assert starting_model(RunSettings(env="e", model="smollm2", warm_start_steps=60)) == "/warm-smollm2-60"
    assert chosen == [("e", None, 7, {}), ("e", "smollm2", 60, {})]
    # The demonstrations are episodes of the run's env setting.
    starting_model(RunSettings(env="e", env_config={"size": 5}))
    assert chosen[-1] == ("e", None, None, {"size": 5})
    # ... unless the warm start demonstrates another (RL on an easier setting of the task).
    easier = RunSettings(env="e", env_config={"size": 5, "short": 1}, warm_start_env_config={"size": 5})
    starting_model(easier)
    assert chosen[-1] == ("e", None, None, {"size": 5})


def test_an_env_without_oracle_stops_train_with_the_contract(monkeypatch):
    from algorithms.warm_start import MissingOracleError

    def missing(env, steps, env_config):
        raise MissingOracleError("x: needs oracle_responses()")

    monkeypatch.setattr("algorithms.warm_start.warm_started_path", missing)
    with pytest.raises(SettingsError, match="oracle_responses"):
        starting_model(RunSettings(env="x"))


def test_module_colon_id_envs_need_no_shipped_settings_file(tmp_path):
    env = "examples.guess_number:examples/GuessNumber-v0"
    args = train.parse_args(["--env", env, "--model", str(tmp_path)])
    assert args.settings_file is None and args.run.env == env
    assert build_config(args.run).env == env


def test_written_json_is_strict(tmp_path):
    from experiments.common.results_json import write_json

    path = tmp_path / "s.json"
    write_json(path, {"peak": math.nan, "rows": [{"x": math.inf}, (1.0, -math.inf)], "ok": 0.5})

    def reject(constant):
        raise ValueError(f"not JSON: {constant}")

    assert json.loads(path.read_text(), parse_constant=reject) == {
        "peak": None,
        "rows": [{"x": None}, [1.0, None]],
        "ok": 0.5,
    }


def test_resume_needs_a_checkpoint_folder(tmp_path, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--resume", str(tmp_path)])
    assert f"--resume {tmp_path} is not a checkpoint folder" in capsys.readouterr().err
    (tmp_path / "rllib_checkpoint.json").write_text("{}")
    assert train.parse_args(["--resume", str(tmp_path)]).resume == str(tmp_path)


def test_an_unregistered_env_names_the_module_colon_id_form():
    with pytest.raises(SystemExit, match="--env mymodule:newcomer/Countdown-v0"):
        train.parse_args(["--env", "newcomer/Countdown-v0"])
    with pytest.raises(SystemExit, match="PYTHONPATH"):
        train.parse_args(["--env", "no_such_module_here:newcomer/Countdown-v0"])
