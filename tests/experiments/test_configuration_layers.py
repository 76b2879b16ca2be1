"""The four configuration layers of docs/configuration.md: DAPOConfig's defaults, the presets (algorithm x
scale), the settings file's overrides, ``--set`` and its aliases. Each layer wins over the ones below, an
alias is exactly the ``--set`` it names, every key has one default, ``DAPOConfig.validate`` is the one
place that rejects a bad value, and the default job resolves to the values it had before the layers.
Configs only: nothing is loaded or started."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from algorithms.dapo import DAPOConfig
from algorithms.dapo.loss import LossConfig
from algorithms.dapo.scales import TINY_SCALE
from experiments import compare, sweep, train
from experiments.common.run_config import (
    SETTINGS_DIR,
    RunSettings,
    SettingsError,
    build_config,
    config_keys,
    run_keys,
)
from experiments.common.run_options import (
    ALIASES,
    add_algorithm_options,
    add_aliases,
    add_model_options,
    add_run_options,
    settings_from_args,
)

# An existing directory (as --model requires) that is never loaded.
NOT_LOADED = str(Path(__file__).resolve().parent)
# The resolved values of the default job (`python -m experiments.train`) and of frozen_lake_smollm2.yaml,
# computed with the configuration path these layers replaced (the model path stands in as "MODEL").
PINNED = json.loads((Path(__file__).resolve().parent / "pinned_configs.json").read_text())


def resolved_values(config: DAPOConfig, keys) -> dict:
    """``config``'s values of ``keys`` as JSON has them, its "auto" values resolved where a pin has one."""
    values = {key: getattr(config, key, "<absent>") for key in keys}
    values["overlong_cache_len"] = config.resolved_overlong_cache_len()
    values["resolved_dual_clip_c"] = config.resolved_dual_clip_c()
    return json.loads(json.dumps(values, default=repr))


SMOLLM2_FILE = str(SETTINGS_DIR / "frozen_lake_smollm2.yaml")


@pytest.mark.parametrize(
    "job, argv", [("default_job", []), ("frozen_lake_smollm2", ["--settings", SMOLLM2_FILE])]
)
def test_the_default_job_and_a_smollm2_settings_file_resolve_as_before(job, argv):
    args = train.parse_args(argv)
    every = args.config.evaluation_interval or args.run.iterations  # as train.main
    config = build_config(args.run, {"model_path": "MODEL", "evaluation_interval": every})
    assert resolved_values(config, PINNED[job]) == PINNED[job]


def test_each_layer_wins_over_the_ones_below(tmp_path):
    # 1. DAPOConfig's defaults: the paper preset changes nothing of them.
    paper = build_config(RunSettings(scale="paper"))
    assert (paper.lr, paper.eps_high, paper.replay_mode) == (DAPOConfig().lr, 0.28, "on_policy")
    # 2. The presets: the scale over the defaults, the algorithm over the defaults.
    tiny = build_config(RunSettings(scale="tiny", algorithm="grpo"))
    assert (tiny.lr, tiny.replay_mode, tiny.eps_high) == (TINY_SCALE["lr"], "freshper", 0.2)
    # 3. The settings file's overrides over the presets.
    path = tmp_path / "run.yaml"
    path.write_text("env: freshrl/FrozenLake-v0\nalgorithm: grpo\noverrides: {lr: 2.0e-5, eps_high: 0.3}\n")
    from_file = build_config(train.parse_args(["--settings", str(path), "--model", NOT_LOADED]).run)
    assert (from_file.lr, from_file.eps_high) == (2e-5, 0.3)
    # 4. --set and its aliases over the file; among them the later wins.
    argv = ["--settings", str(path), "--model", NOT_LOADED, "--set", "lr=3e-5", "--eps-high", "0.35"]
    cli = build_config(train.parse_args(argv).run)
    assert (cli.lr, cli.eps_high) == (3e-5, 0.35)
    later = build_config(train.parse_args([*argv, "--set", "eps_high=0.4", "--iterations", "2"]).run)
    assert later.eps_high == 0.4
    # A run key the same way: the file's iterations, then --set's.
    assert train.parse_args(["--settings", str(path), "--set", "iterations=7"]).run.iterations == 7


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_model_options(parser)
    add_algorithm_options(parser)
    add_run_options(parser)
    taken = {action for item in parser._actions for action in item.option_strings}
    add_aliases(parser, [flag for flag in ALIASES if flag not in taken])
    return parser


def _sample(flag: str) -> tuple[list[str], object]:
    """(command-line words of ``flag``, the value they set)."""
    alias = ALIASES[flag]
    if alias.choices:
        return [flag, alias.choices[-1]], alias.choices[-1]
    if alias.type is None:
        return [flag], alias.const
    value = alias.type("3")
    return [flag, str(value)], value


@pytest.mark.parametrize("flag", list(ALIASES))
def test_every_alias_is_the_set_it_names(flag):
    parser = _parser()
    words, value = _sample(flag)
    base = RunSettings(model=None if flag == "--no-warm-start" else "m")
    by_alias = settings_from_args("t", parser.parse_args(words), base)
    spelled = ["--set", f"{ALIASES[flag].key}={json.dumps(value)}"]
    by_set = settings_from_args("t", parser.parse_args(spelled), base)
    assert by_alias == by_set
    key = ALIASES[flag].key
    assert (getattr(by_alias, key) if key in run_keys() else by_alias.overrides[key]) == value


@pytest.mark.parametrize("entry_point", [train, sweep, compare], ids=lambda m: m.__name__.split(".")[-1])
def test_entry_points_take_the_aliases_as_set(entry_point):
    aliased = entry_point.parse_args(["--model", NOT_LOADED, "--iterations", "2", "--eval-tasks", "8"])
    spelled = entry_point.parse_args(
        ["--model", NOT_LOADED, "--set", "iterations=2", "--set", "evaluation_num_tasks=8"]
    )
    assert aliased.run == spelled.run and aliased.run.iterations == 2
    assert build_config(aliased.run).evaluation_num_tasks == 8


def test_one_default_per_key():
    # No run key repeats a DAPOConfig key: the replay mode, evaluation and seed live in DAPOConfig alone.
    assert not set(run_keys()) & set(config_keys())
    assert {"replay_mode", "evaluation_num_tasks", "evaluation_interval", "seed"} <= set(config_keys())
    # Every alias names a key that exists.
    assert {alias.key for alias in ALIASES.values()} <= set(run_keys()) | set(config_keys())
    # The library pieces take their values from the config, not defaults of their own.
    assert LossConfig.from_config(DAPOConfig()).eps_high == DAPOConfig().eps_high
    with pytest.raises(TypeError):
        LossConfig()  # no defaults to disagree with DAPOConfig's


def test_sweep_and_compare_runs_are_quick_without_settings_file():
    for entry_point in (sweep, compare):
        args = entry_point.parse_args(["--model", NOT_LOADED])
        assert args.run.iterations == 3
        assert (args.config.evaluation_num_tasks, args.config.evaluation_interval) == (16, 1)
    settings = ["--settings", str(SETTINGS_DIR / "frozen_lake.yaml"), "--model", NOT_LOADED]
    assert sweep.parse_args(settings).run.iterations == 40


def test_validate_is_the_one_place_that_rejects_a_bad_value():
    # The layers carry any value; the validator names the bad one and the fix.
    settings = RunSettings(overrides={"group_size": 1, "overlong_cache_len": "lots"})
    with pytest.raises(ValueError, match=r"^DAPOConfig: group_size must be >= 2"):
        build_config(settings)
    with pytest.raises(ValueError, match=r"DAPOConfig: overlong_cache_len must be an integer .* or 'auto'"):
        build_config(RunSettings(overrides={"overlong_cache_len": "lots"}))
    with pytest.raises(ValueError, match=r"overlong_cache_len must be in \(0, max_response_tokens=48\]"):
        build_config(RunSettings(overrides={"overlong_cache_len": 64}))
    # Keys, not values, are checked before it: a misspelt key names the closest one.
    with pytest.raises(SettingsError, match=r"did you mean eps_high"):
        RunSettings(overrides={"eps_hihg": 0.3})
    with pytest.raises(SystemExit, match=r"DAPOConfig: replay_tau must be > 0"):
        train.parse_args(["--model", NOT_LOADED, "--tau", "0"])
