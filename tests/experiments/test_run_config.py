"""The one configuration path (experiments/common/run_config.py): ``--set`` in every entry point,
``--eps-high``, the names of the algorithm ladder and the scales, and the scale that ``--model smollm2``
selects. Configs only: nothing is loaded or started."""

from __future__ import annotations

from pathlib import Path

import pytest

from algorithms.dapo import ALGORITHMS, SCALES, DAPOConfig, apply_algorithm, apply_scale
from algorithms.dapo.scales import SMOLLM2_SCALE, TINY_REPLAY, TINY_SCALE
from experiments import compare, sweep, train
from experiments.common.comparison_arms import mode_arm
from experiments.common.comparison_runs import run_settings
from experiments.common.run_config import (
    RunSettings,
    SettingsError,
    build_config,
    config_keys,
    parse_set,
)

# An existing directory (as --model requires) that is never loaded.
NOT_LOADED = str(Path(__file__).resolve().parent)


def train_config(*argv: str) -> DAPOConfig:
    return build_config(train.parse_args(["--model", NOT_LOADED, *argv]).run)


def test_set_values_are_yaml_and_reach_the_config():
    config = train_config(
        "--set", "lr=1e-5",
        "--set", "adam_betas=[0.9, 0.99]",
        "--set", "dynamic_sampling=false",
        "--set", "max_trajectory_response_tokens=null",
        "--set", "replay_capacity=512",
        "--set", "replay_tau=8",
        "--set", "evaluation_samples_per_task=4",
        "--set", "group_size=4", "--set", "group_size=6",  # later wins
    )  # fmt: skip
    assert (config.lr, config.adam_betas, config.dynamic_sampling) == (1e-5, (0.9, 0.99), False)
    assert config.max_trajectory_response_tokens is None
    assert (config.replay_capacity, config.replay_tau, config.group_size) == (512, 8, 6)
    assert config.evaluation_samples_per_task == 4


@pytest.mark.parametrize("entry_point", [train, sweep, compare], ids=lambda m: m.__name__.split(".")[-1])
def test_a_bad_set_key_is_an_error_listing_close_matches(entry_point):
    with pytest.raises(SystemExit, match=r"unknown DAPOConfig key 'eps_hihg' \(did you mean eps_high\?\)"):
        entry_point.parse_args(["--model", NOT_LOADED, "--set", "eps_hihg=0.3"])
    with pytest.raises(SystemExit, match=r"'replay_capasity' \(did you mean replay_capacity"):
        entry_point.parse_args(["--model", NOT_LOADED, "--set", "replay_capasity=5"])
    with pytest.raises(SystemExit, match=r"--set takes key=value"):
        entry_point.parse_args(["--model", NOT_LOADED, "--set", "lr"])


@pytest.mark.parametrize("entry_point", [train, sweep, compare], ids=lambda m: m.__name__.split(".")[-1])
def test_a_bad_set_value_is_named_by_dapo_configs_validator(entry_point):
    with pytest.raises(SystemExit, match=r"DAPOConfig: group_size must be >= 2"):
        entry_point.parse_args(["--model", NOT_LOADED, "--set", "group_size=1"])


def test_sweep_and_compare_set_reaches_every_run():
    args = sweep.parse_args(["--model", NOT_LOADED, "--set", "lr=3e-5", "--group-size", "3"])
    config, _, _ = sweep.search_space(args)
    assert (config.lr, config.group_size) == (3e-5, 3)
    with pytest.raises(SystemExit, match="the sweep sets it"):
        sweep.parse_args(["--model", NOT_LOADED, "--set", "tau=5"])
    args = compare.parse_args(["--model", NOT_LOADED, "--set", "lr=3e-5", "--tau", "7"])
    config = build_config(run_settings(args, "freshrl/FrozenLake-v0", mode_arm("per"), 1))
    assert (config.lr, config.replay_tau, config.replay_mode, config.seed) == (3e-5, 7.0, "per", 1)
    assert not config.replay_backfill
    args = compare.parse_args(
        ["--model", NOT_LOADED, "--set", "lr=3e-5", "--modes", "freshper", "freshper+backfill"]
    )
    config = build_config(run_settings(args, "freshrl/FrozenLake-v0", mode_arm("freshper+backfill"), 0))
    assert (config.lr, config.replay_mode, config.replay_backfill) == (3e-5, "freshper", True)


def test_train_takes_eps_high_and_tau():
    config = train_config("--eps-high", "0.35", "--tau", "12")
    assert (config.eps_high, config.replay_tau) == (0.35, 12.0)
    assert train_config().eps_high == DAPOConfig().eps_high == 0.28


def test_config_keys_cover_training_replay_and_evaluation():
    keys = config_keys()
    assert {"lr", "eps_high", "group_size", "minibatch_size", "num_epochs"} <= set(keys)
    assert keys["replay_tau"] == ("replay", "tau") and keys["replay_capacity"] == ("replay", "capacity")
    assert keys["replay_mode"] == ("replay", "mode")
    assert keys["evaluation_interval"][0] == keys["evaluation_num_tasks"][0] == "evaluation"
    config = DAPOConfig()
    for key, (method, _) in keys.items():
        if method == "replay":
            assert hasattr(config, key), key
    assert "num_sgd_iter" not in keys  # RLlib's deprecated keyword


def test_parse_set_reads_yaml_1_2_floats():
    assert parse_set(["lr=1e-5", "tis_cap=2", "system_prompt=Be brief.", "iterations=3"]) == {
        "lr": 1e-5,
        "tis_cap": 2,
        "system_prompt": "Be brief.",
        "iterations": 3,
    }
    with pytest.raises(SettingsError, match="not YAML"):
        parse_set(["adam_betas=[0.9"])


def test_the_ladder_and_the_scales_by_name():
    assert list(ALGORITHMS) == [
        "grpo",
        "grpo+overlong_filtering",
        "grpo+clip_higher",
        "grpo+soft_punishment",
        "grpo+token_loss",
        "dapo",
    ]
    grpo = train_config("--algorithm", "grpo")
    assert (grpo.eps_high, grpo.dynamic_sampling, grpo.loss_agg_mode) == (0.2, False, "seq-mean-token-mean")
    assert sorted(SCALES) == ["paper", "smollm2", "tiny"]
    # Switching scale leaves nothing of the other behind.
    assert set(SMOLLM2_SCALE) == set(TINY_SCALE)
    paper = train_config("--scale", "paper")
    paper_values = (paper.group_size, paper.prompts_per_iteration, paper.lr, paper.replay_tau)
    assert paper_values == (16, 512, 1e-6, 500.0)
    assert train_config("--full-scale").prompts_per_iteration == 512
    with pytest.raises(ValueError, match="scale must be one of"):
        apply_scale(DAPOConfig(), "huge")
    with pytest.raises(ValueError, match="algorithm must be one of"):
        apply_algorithm(DAPOConfig(), "ppo")
    with pytest.raises(SystemExit):
        train.parse_args(["--preset", "dapo"])  # the old name of --algorithm


@pytest.mark.parametrize("entry_point", [train, sweep, compare], ids=lambda m: m.__name__.split(".")[-1])
def test_model_smollm2_selects_the_smollm2_scale_in_every_entry_point(entry_point):
    # Math's SmolLM2 settings file sets no learning settings of its own (FrozenLake's sets lr).
    math = ["--envs" if entry_point is compare else "--env", "freshrl/Math-v0"]
    args = entry_point.parse_args(["--model", "smollm2", *math])
    assert args.run.resolved_scale == "smollm2"
    config = build_config(args.run)
    assert (config.lr, config.micro_batch_size) == (SMOLLM2_SCALE["lr"], SMOLLM2_SCALE["micro_batch_size"])
    replay = (config.replay_tau, config.replay_capacity)
    assert replay == (TINY_REPLAY["replay_tau"], TINY_REPLAY["replay_capacity"])
    assert config.model_path == "smollm2"
    tiny = build_config(entry_point.parse_args(["--model", "smollm2", "--scale", "tiny", *math]).run)
    assert tiny.lr == TINY_SCALE["lr"]
    assert build_config(entry_point.parse_args(["--model", NOT_LOADED]).run).lr == TINY_SCALE["lr"]


def test_a_settings_file_may_set_the_scale(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("env: freshrl/Math-v0\nscale: smollm2\n")
    args = train.parse_args(["--settings", str(path), "--model", NOT_LOADED])
    assert build_config(args.run).max_response_tokens == SMOLLM2_SCALE["max_response_tokens"]


def test_the_overlong_buffer_follows_the_response_limit_unless_set():
    settings = RunSettings()
    assert build_config(settings).resolved_overlong_cache_len() == 16  # a third of the tiny scale's 48
    assert build_config(settings, {"max_response_tokens": 12}).resolved_overlong_cache_len() == 4
    explicit = build_config(settings, {"max_response_tokens": 12, "overlong_cache_len": 6})
    assert explicit.resolved_overlong_cache_len() == 6
    assert build_config(settings, {"max_response_tokens": 480}).resolved_overlong_cache_len() == 160
    assert DAPOConfig().resolved_overlong_cache_len() == 4096  # DAPO's L_cache of its 20480
    assert build_config(RunSettings(scale="smollm2")).resolved_overlong_cache_len() == 16  # set by the scale


def test_run_settings_are_checked():
    with pytest.raises(SettingsError, match=r"iterations must be >= 1, got 0"):
        RunSettings(iterations=0)
    with pytest.raises(SettingsError, match=r"algorithm must be one of"):
        RunSettings(algorithm="ppo")
    with pytest.raises(SettingsError, match=r"'iterations' is a key of the run"):
        RunSettings(overrides={"iterations": 3})
    with pytest.raises(SettingsError, match=r"env_config must be a mapping"):
        RunSettings(env_config="size=4")
    with pytest.raises(SettingsError, match="drop it or the model"):
        RunSettings(model="smollm2", warm_start=False)
    assert RunSettings(model="smollm2", warm_start_steps=5).warm_start_steps == 5  # warm-starts smollm2
