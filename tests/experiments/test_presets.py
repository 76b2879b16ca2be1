"""The per-env preset files of ``experiments.train``: each makes its env and a valid DAPO config; the
command line overrides them; bad files are named."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import envs
from experiments import train

PRESET_FILES = sorted(train.PRESETS_DIR.glob("*.yaml"))
# Configs only: an existing directory (as --model requires) that is never loaded.
NOT_LOADED = str(Path(__file__).resolve().parent)


def test_every_registered_env_has_exactly_one_preset():
    preset_envs = [train.load_preset(path)["env"] for path in PRESET_FILES]
    assert sorted(preset_envs) == sorted(envs.ENV_IDS)


@pytest.mark.parametrize("path", PRESET_FILES, ids=lambda path: path.stem)
def test_preset_makes_its_env_and_a_valid_config(path):
    args = train.parse_args(["--config", str(path), "--model", NOT_LOADED])
    env = gym.make(args.env, **json.loads(args.env_config))
    observation, _ = env.reset(seed=0)
    assert observation
    config = train.build_config(args)
    config.validate()
    assert (config.env, config.env_config) == (args.env, json.loads(args.env_config))
    assert config.replay_mode == args.replay


def test_defaults_are_the_frozen_lake_preset_and_flags_override_it():
    preset = train.load_preset(train.PRESETS_DIR / "frozen_lake.yaml")
    args = train.parse_args([])
    assert (args.env, json.loads(args.env_config), args.iterations) == (
        preset["env"],
        preset["env_config"],
        preset["iterations"],
    )
    args = train.parse_args(["--env", "freshrl/Math-v0", "--iterations", "2", "--replay", "per"])
    assert args.preset_file.endswith("math.yaml") and json.loads(args.env_config)["max_turns"] == 1
    assert (args.iterations, args.replay) == (2, "per")


def test_preset_training_keys_reach_the_config(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("env: freshrl/FrozenLake-v0\ntraining: {group_size: 3, eps_high: 0.3}\n")
    config = train.build_config(train.parse_args(["--config", str(path), "--model", NOT_LOADED]))
    assert (config.group_size, config.eps_high) == (3, 0.3)


def test_bad_preset_files_are_named(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("env: freshrl/FrozenLake-v0\nlearning_rate: 1\n")
    with pytest.raises(SystemExit, match="unknown keys \\['learning_rate'\\]"):
        train.parse_args(["--config", str(path)])
    with pytest.raises(SystemExit, match="no preset file"):
        train.parse_args(["--config", str(tmp_path / "missing.yaml")])
    with pytest.raises(SystemExit, match="differs"):
        train.parse_args(["--config", str(train.PRESETS_DIR / "math.yaml"), "--env", "freshrl/Sokoban-v0"])
