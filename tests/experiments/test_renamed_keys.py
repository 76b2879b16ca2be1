"""Renamed DAPOConfig keys (``tau`` -> ``replay_tau``, ``advantage`` -> ``advantage_estimator``): the old
spellings keep working everywhere a key is read, each with a DeprecatedKeyWarning naming the new one, and a
comparison resumed with the new name finds the runs saved under the old one."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from algorithms.dapo import DAPOConfig
from algorithms.dapo.config import RENAMED_KEYS, DeprecatedKeyWarning, config_keys, current_key
from experiments import replay_study, train
from experiments.common.comparison_arms import parse_arms
from experiments.common.comparison_runs import load_finished, run_path
from experiments.common.run_config import build_config, load_settings, parse_set

NOT_LOADED = str(Path(__file__).resolve().parent)


def test_the_warning_is_a_deprecation_shown_by_default():
    assert issubclass(DeprecatedKeyWarning, DeprecationWarning)
    assert issubclass(DeprecatedKeyWarning, FutureWarning)  # users of settings files see it
    assert RENAMED_KEYS == {"tau": "replay_tau", "advantage": "advantage_estimator"}


def test_dapo_config_reads_and_sets_the_old_names_with_a_warning():
    with pytest.warns(DeprecatedKeyWarning, match="'advantage' is now 'advantage_estimator'"):
        config = DAPOConfig().training(advantage="gigpo")
    assert config.advantage_estimator == "gigpo"
    with pytest.warns(DeprecatedKeyWarning, match="'tau' is now 'replay_tau'"):
        config.tau = 7.0
    assert config.replay_tau == 7.0
    with pytest.warns(DeprecatedKeyWarning):
        assert config.tau == 7.0
    assert "tau" not in config.to_dict() and config.to_dict()["replay_tau"] == 7.0


def test_a_saved_config_with_the_old_names_keeps_its_values():
    state = DAPOConfig().replay(tau=9.0).training(advantage_estimator="gigpo").get_state()
    state["tau"], state["advantage"] = state.pop("replay_tau"), state.pop("advantage_estimator")
    with pytest.warns(DeprecatedKeyWarning):
        restored = DAPOConfig().from_state(state)  # as RLlib's Algorithm restores its config
    assert (restored.replay_tau, restored.advantage_estimator) == (9.0, "gigpo")


def test_settings_files_set_and_the_aliases_take_the_old_names(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("env: freshrl/FrozenLake-v0\noverrides: {tau: 3.0, advantage: gigpo}\n")
    with pytest.warns(DeprecatedKeyWarning, match=f"{path}: 'tau' is now 'replay_tau'"):
        settings = load_settings(path)
    assert settings.overrides == {"replay_tau": 3.0, "advantage_estimator": "gigpo"}
    config = build_config(settings)
    assert (config.replay_tau, config.advantage_estimator) == (3.0, "gigpo")
    assert config.key_sources()["replay_tau"] == f"settings file {path}"
    with pytest.warns(DeprecatedKeyWarning, match="--set: 'tau' is now 'replay_tau'"):
        assert parse_set(["tau=5", "replay_tau=6"]) == {"replay_tau": 6}  # one key: the later wins
    with pytest.warns(DeprecatedKeyWarning):
        args = train.parse_args(["--model", NOT_LOADED, "--set", "advantage=gigpo"])
    assert args.config.advantage_estimator == "gigpo"


def test_the_shipped_files_use_the_new_names():
    from experiments.common.run_config import SETTINGS_DIR

    for path in SETTINGS_DIR.rglob("*.yaml"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecatedKeyWarning)
            assert load_settings(path).overrides is not None
    # The replay study's regimes lay --set keys over settings files: the same vocabulary.
    for name, regime in replay_study.regimes().items():
        for key in [*regime["set"], *regime["times"]]:
            with warnings.catch_warnings():
                warnings.simplefilter("error", DeprecatedKeyWarning)
                assert current_key(key, name) == key and key in config_keys(), (name, key)


def test_compare_arms_take_the_old_name_and_resume_runs_saved_under_it(tmp_path):
    with pytest.warns(DeprecatedKeyWarning, match="--arms: 'advantage' is now 'advantage_estimator'"):
        old = parse_arms("advantage=episode,gigpo")
    new = parse_arms("advantage_estimator=episode,gigpo")
    assert [arm.keys for arm in old] == [arm.keys for arm in new]
    assert [arm.label for arm in old] == ["advantage=episode", "advantage=gigpo"]  # as typed
    env = "freshrl/FrozenLake-v0"
    saved = tmp_path / "runs" / "FrozenLake-v0__advantage-gigpo__seed1.json"
    saved.parent.mkdir()
    saved.write_text(
        json.dumps({"arm": "advantage=gigpo", "settings": {"overrides": {"advantage": "gigpo"}}})
    )
    assert run_path(tmp_path, env, new[1], 1) == saved
    assert run_path(tmp_path, env, new[0], 1).name == "FrozenLake-v0__advantage_estimator-episode__seed1.json"
    run = load_finished(saved, {"overrides": {"advantage_estimator": "gigpo"}})
    assert run["arm"] == "advantage=gigpo"
    # A settings field added since, at its default, is the same run; at another value it is not.
    overrides = {"advantage_estimator": "gigpo"}
    assert load_finished(saved, {"overrides": overrides, "warm_start_env_config": None})
    with pytest.raises(SystemExit, match="not"):
        load_finished(saved, {"overrides": overrides, "warm_start_env_config": {}})
