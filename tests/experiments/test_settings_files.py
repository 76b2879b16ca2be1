"""The per-env settings files (``experiments/settings/``): each makes its env and a valid DAPO config; each
env has exactly one default file (extra ones name a model); the command line overrides them; bad files are
named."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import envs
from experiments import train
from experiments.common import run_config
from experiments.common.run_config import SETTINGS_DIR, SettingsError, build_config, load_settings

SETTINGS_FILES = sorted(SETTINGS_DIR.glob("*.yaml"))
# Configs only: an existing directory (as --model requires) that is never loaded.
NOT_LOADED = str(Path(__file__).resolve().parent)


def test_every_registered_env_has_exactly_one_default_settings_file():
    shipped = run_config.shipped_settings().values()
    defaults = [settings.env for settings in shipped if settings.model is None]
    assert sorted(defaults) == sorted(envs.ENV_IDS)
    pairs = [(settings.env, settings.model) for settings in shipped]
    assert len(pairs) == len(set(pairs)), "two settings files for the same env and model"


def test_an_extra_settings_file_for_a_model_is_found_for_that_model(tmp_path, monkeypatch):
    for path in SETTINGS_FILES:
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "frozen_lake_smollm2.yaml").write_text(
        "env: freshrl/FrozenLake-v0\nmodel: smollm2\niterations: 7\noverrides: {lr: 2.0e-6}\n"
    )
    monkeypatch.setattr(run_config, "SETTINGS_DIR", tmp_path)
    defaults = [s.env for s in run_config.shipped_settings().values() if s.model is None]
    assert sorted(defaults) == sorted(envs.ENV_IDS)  # the extra file is not a second default
    assert run_config.default_settings_file("freshrl/FrozenLake-v0").name == "frozen_lake.yaml"
    assert (
        run_config.default_settings_file("freshrl/FrozenLake-v0", "smollm2").name
        == "frozen_lake_smollm2.yaml"
    )
    assert run_config.default_settings_file("freshrl/FrozenLake-v0", "/a/dir").name == "frozen_lake.yaml"
    args = train.parse_args(["--model", "smollm2"])
    assert args.run.iterations == 7 and build_config(args.run).lr == 2.0e-6
    assert train.parse_args(["--model", NOT_LOADED]).run.iterations == 40


@pytest.mark.parametrize("path", SETTINGS_FILES, ids=lambda path: path.stem)
def test_settings_file_makes_its_env_and_a_valid_config(path):
    args = train.parse_args(["--settings", str(path), "--model", NOT_LOADED])
    env = gym.make(args.run.env, **args.run.env_config)
    observation, _ = env.reset(seed=0)
    assert observation
    config = build_config(args.run)
    assert (config.env, config.env_config) == (args.run.env, args.run.env_config)
    assert config.replay_mode == args.run.overrides.get("replay_mode", "freshper")  # the CPU scales'
    assert config.evaluation_num_tasks == args.run.overrides.get("evaluation_num_tasks", 128)  # DAPOConfig's


def test_defaults_are_the_frozen_lake_settings_file_and_flags_override_it():
    settings = load_settings(SETTINGS_DIR / "frozen_lake.yaml")
    args = train.parse_args([])
    assert (args.run.env, args.run.env_config, args.run.iterations) == (
        settings.env,
        settings.env_config,
        settings.iterations,
    )
    args = train.parse_args(["--env", "freshrl/Math-v0", "--iterations", "2", "--replay", "per"])
    assert args.settings_file.endswith("math.yaml") and args.run.env_config["max_turns"] == 1
    assert (args.run.iterations, args.run.overrides["replay_mode"]) == (2, "per")


def test_settings_file_overrides_reach_the_config_and_the_command_line_wins(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "env: freshrl/FrozenLake-v0\nscale: paper\noverrides: {group_size: 3, eps_high: 0.3, lr: 1e-5}\n"
    )
    config = build_config(train.parse_args(["--settings", str(path), "--model", NOT_LOADED]).run)
    assert (config.group_size, config.eps_high, config.lr) == (3, 0.3, 1e-5)
    assert config.prompts_per_iteration == 512  # the paper scale, set by the file
    argv = ["--settings", str(path), "--set", "group_size=5", "--eps-high", "0.25", "--scale", "tiny"]
    config = build_config(train.parse_args(argv).run)
    assert (config.group_size, config.eps_high, config.prompts_per_iteration) == (5, 0.25, 4)


def test_bad_settings_files_are_named(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env: freshrl/FrozenLake-v0\niteration: 1\n")
    with pytest.raises(SystemExit, match=r"bad.yaml: unknown key 'iteration' \(did you mean iterations"):
        train.parse_args(["--settings", str(path)])
    path.write_text("env: freshrl/FrozenLake-v0\neval_tasks: 1\n")  # a RunSettings field before
    with pytest.raises(SystemExit, match=r"'eval_tasks' is a DAPOConfig key now: write overrides: \{evaluat"):
        train.parse_args(["--settings", str(path)])
    path.write_text("env: freshrl/FrozenLake-v0\ntraining: {group_size: 4}\n")  # the old section's name
    with pytest.raises(SystemExit, match=r"unknown key 'training'.*allowed: \[.*'overrides'\]"):
        train.parse_args(["--settings", str(path)])
    path.write_text("env: freshrl/FrozenLake-v0\noverrides: {eps_hihg: 0.3}\n")
    with pytest.raises(
        SystemExit, match=r"bad.yaml: unknown DAPOConfig key 'eps_hihg' \(did you mean eps_high"
    ):
        train.parse_args(["--settings", str(path)])
    path.write_text("env: freshrl/FrozenLake-v0\niterations: many\n")
    with pytest.raises(SettingsError, match=r"bad.yaml: iterations must be an integer, got 'many'"):
        load_settings(path)
    path.write_text("env: freshrl/FrozenLake-v0\nalgorithm: dapo2\n")
    with pytest.raises(SettingsError, match=r"algorithm must be one of \['grpo'.*'dapo'\], got 'dapo2'"):
        load_settings(path)
    with pytest.raises(SystemExit, match="no settings file"):
        train.parse_args(["--settings", str(tmp_path / "missing.yaml")])
    with pytest.raises(SystemExit, match="differs"):
        train.parse_args(["--settings", str(SETTINGS_DIR / "math.yaml"), "--env", "freshrl/Sokoban-v0"])
