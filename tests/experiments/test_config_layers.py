"""Layers as data: docs/configuration.md's table is the builder's list, every key of a run knows the layer
that set its final value (summary.json's ``config_layers``, ``experiments.train --explain-config``), and a
Tune grid's keys are the grid's. Configs only: nothing is loaded or started."""

from __future__ import annotations

import re
from pathlib import Path

from algorithms.dapo import DAPOConfig
from algorithms.dapo.config import config_keys
from experiments import sweep, train
from experiments.common.run_config import (
    LAYERS,
    RunSettings,
    build_config,
    explain_config,
    load_settings,
    run_keys,
    setting_sources,
    with_layer,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
NOT_LOADED = str(Path(__file__).resolve().parent)  # an existing directory, never loaded


def test_the_docs_table_lists_the_builders_layers_in_order():
    text = DOCS.read_text()
    table = text[text.index("| layer | where it lives |") :].split("\n\n")[0].splitlines()[2:]
    assert [re.match(r"\| ([^|]+?) \|", row).group(1) for row in table] == list(LAYERS)


def test_each_key_names_the_layer_of_its_final_value(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("env: freshrl/FrozenLake-v0\nalgorithm: grpo\niterations: 3\noverrides: {lr: 2.0e-5}\n")
    argv = ["--settings", str(path), "--model", NOT_LOADED, "--set", "group_size=4", "--tau", "6"]
    args = train.parse_args(argv)
    config = train.run_config(args.run, "MODEL", None)
    explained = explain_config(args.run, config)
    layers = {key: row["layer"] for key, row in explained.items()}
    file_layer = f"settings file {path}"
    assert layers["lr"] == file_layer and explained["lr"]["value"] == 2e-5
    assert layers["iterations"] == file_layer and layers["algorithm"] == file_layer
    assert layers["group_size"] == "command line" and layers["replay_tau"] == "command line"
    assert layers["model"] == "command line"
    assert layers["eps_high"] == "algorithm grpo"  # the rung's symmetric clip
    assert layers["max_response_tokens"] == "scale tiny" and layers["replay_mode"] == "scale tiny"
    assert layers["eps_low"] == "defaults" and layers["num_learners"] == "defaults"
    assert layers["model_path"] == train.ENTRY_POINT and explained["model_path"]["value"] == "MODEL"
    assert layers["evaluation_interval"] == train.ENTRY_POINT
    # Every run key and every DAPOConfig key is explained, each by a layer of the list (or "code").
    assert set(explained) == set(run_keys()) | set(config_keys())
    kinds = [*LAYERS, "code"]
    assert all(any(row["layer"].startswith(kind) for kind in kinds) for row in explained.values())


def test_a_later_layer_takes_the_key_and_the_shipped_settings_name_their_file():
    settings = load_settings(Path(train.default_settings_file("freshrl/FrozenLake-v0")))
    assert setting_sources(settings)["iterations"].startswith("settings file experiments/settings/")
    later = with_layer(settings, "command line", {"iterations": 2, "lr": 1e-5})
    assert setting_sources(later)["iterations"] == "command line"
    assert build_config(later).key_sources()["lr"] == "command line"
    # A value changed behind the layers' back is not credited to them.
    import dataclasses

    changed = dataclasses.replace(later, iterations=5)
    assert setting_sources(changed)["iterations"] == "code"


def test_a_value_set_outside_the_layers_is_code_not_the_layer_before():
    config = build_config(RunSettings(scale="tiny"))
    assert config.key_sources()["lr"] == "scale tiny"
    config.training(lr=3e-4)
    assert config.key_sources()["lr"] == "code"
    assert DAPOConfig().training(group_size=3).key_sources()["group_size"] == "code"


def test_the_swept_keys_are_the_tune_grids_and_a_trials_value_stays_the_grids():
    args = sweep.parse_args(["--model", NOT_LOADED, "--tau", "4", "8", "--eps-high", "0.28", "0.3"])
    space, _, _ = sweep.search_space(args)
    sources = space.key_sources()
    assert sources["replay_tau"] == sources["eps_high"] == "tune grid"
    # Tune hands each trial one point of the grid (update_from_dict of the space's dict).
    trial = DAPOConfig().update_from_dict({**space.to_dict(), "replay_tau": 8.0, "eps_high": 0.3})
    assert trial.key_sources()["replay_tau"] == "tune grid" and trial.key_sources()["lr"] == "scale tiny"


def test_explain_config_prints_every_key_without_running(capsys):
    record = train.main(["--explain-config", "--model", NOT_LOADED, "--set", "lr=2e-5"])
    lines = capsys.readouterr().out.splitlines()
    assert any(re.fullmatch(r"lr += 2e-05 +\(command line\)", line) for line in lines)
    assert any(re.fullmatch(r"group_size += 8 +\(scale tiny\)", line) for line in lines)
    assert set(record["config_layers"]) == set(run_keys()) | set(config_keys())
