"""The command-line options of a run, shared by train, sweep and compare: a settings file, then the options.

Each option is a field of :class:`experiments.common.run_config.RunSettings` (same name, dashes for
underscores) and overrides the settings file; ``--set key=value`` (repeatable) sets any DAPOConfig key
(``experiments.common.run_config.override_keys``), after the file's ``overrides``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from experiments.common.run_config import (
    DEFAULT_ENV,
    RunSettings,
    SettingsError,
    load_settings,
    parse_overrides,
    settings_for,
)


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--settings",
        default=None,
        metavar="FILE",
        help="settings file (YAML, RunSettings' keys; default: experiments/settings/<the env's>.yaml)",
    )


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The model and how the default one is made."""
    parser.add_argument(
        "--model",
        default=None,
        help="a model name (smollm2: SmolLM2-135M-Instruct, built offline), a local model dir or a hub id "
        "(default: the offline tiny model warm-started on the env)",
    )
    parser.add_argument(
        "--warm-start-steps",
        type=int,
        default=None,
        help="AdamW steps of the warm start on the env's oracle: of the tiny model (default: "
        "algorithms.warm_start's per-env value), or of --model (default: its settings file's, else none; "
        "0: the model as it is; e.g. --model smollm2 --warm-start-steps 60)",
    )
    parser.add_argument(
        "--no-warm-start",
        dest="warm_start",
        action="store_const",
        const=False,
        default=None,
        help="train the untrained tiny model (no oracle needed; it rarely succeeds, so expect little signal)",
    )


def add_algorithm_options(parser: argparse.ArgumentParser) -> None:
    """Algorithm, scale and ``--set``."""
    from algorithms.dapo import ALGORITHMS, SCALES

    parser.add_argument(
        "--algorithm", default=None, choices=list(ALGORITHMS), help="DAPO's Table 1 ladder (default dapo)"
    )
    parser.add_argument(
        "--scale",
        default=None,
        choices=sorted(SCALES),
        help="workload and learning settings (algorithms/dapo/scales.py; default: smollm2 for --model "
        "smollm2, else tiny)",
    )
    parser.add_argument(
        "--full-scale",
        dest="scale",
        action="store_const",
        const="paper",
        help="the papers' settings (= --scale paper)",
    )
    parser.add_argument(
        "--set",
        dest="set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a DAPOConfig training, replay or evaluation key (value in YAML: 1e-5, true, null, "
        "[0.9, 0.99]); repeatable, later wins; e.g. --set lr=1e-5 --set replay_capacity=512",
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Env config, evaluation and resources (the options every entry point has)."""
    parser.add_argument("--env-config", default=None, help="JSON kwargs for gymnasium.make")
    parser.add_argument("--iterations", type=int, default=None, help="training iterations")
    parser.add_argument(
        "--eval-tasks", type=int, default=None, help="validation tasks of each evaluation (one episode each)"
    )
    parser.add_argument(
        "--eval-samples", type=int, default=None, help="samples per validation task (pass@k up to it)"
    )
    parser.add_argument("--eval-every", type=int, default=None, help="evaluate every k training iterations")
    parser.add_argument("--num-env-runners", type=int, default=None, help="remote EnvRunners (0: in-process)")
    parser.add_argument("--num-learners", type=int, default=None, help="remote learners (0: in-process)")
    parser.add_argument(
        "--gpu",
        action="store_const",
        const=True,
        default=None,
        help="one GPU per learner and remote EnvRunner",
    )


def base_settings(prog: str, settings_file: str | None, env: str | None, model: str | None) -> RunSettings:
    """The settings file named, else the env's shipped one for the model (``settings_for``)."""
    try:
        if settings_file is None:
            return settings_for(env or DEFAULT_ENV, model)
        settings = load_settings(settings_file)
    except SettingsError as error:
        raise SystemExit(f"{prog}: {error}") from None
    if env is not None and env != settings.env:
        raise SystemExit(f"{prog}: --env {env} differs from {settings_file}'s env {settings.env}")
    return settings


def settings_from_args(
    prog: str,
    args: argparse.Namespace,
    base: RunSettings,
    *,
    defaults: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> RunSettings:
    """``base`` with every option given on the command line (``args`` attributes named as RunSettings
    fields; None = not given), ``defaults`` for those not given, and the ``--set`` items then ``overrides``
    after the base's own overrides. An error naming the option for a bad value."""
    given = {
        item.name: getattr(args, item.name)
        for item in dataclasses.fields(RunSettings)
        if item.name != "overrides" and getattr(args, item.name, None) is not None
    }
    try:
        if isinstance(given.get("env_config"), str):
            given["env_config"] = json.loads(given["env_config"])
        cli = {**parse_overrides(getattr(args, "set", [])), **(overrides or {})}
        return dataclasses.replace(
            base,
            **{**(defaults or {}), **given},
            overrides={**base.overrides, **cli},
        )
    except json.JSONDecodeError as error:
        raise SystemExit(f"{prog}: --env-config is not JSON ({error})") from None
    except SettingsError as error:
        raise SystemExit(f"{prog}: {error}") from None


def check_env_id(env: str) -> None:
    """``env`` is a registered id, or ``module:id`` whose module registers it; else an error showing how
    training sees an env registered in a module of one's own."""
    import importlib

    import gymnasium as gym

    import envs  # noqa: F401  (registers the freshrl/... ids)

    module, _, env_id = env.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        gym.spec(env_id)
    except ModuleNotFoundError as error:
        raise SystemExit(
            f"freshrl: --env {env}: cannot import {module!r} ({error}); run from the directory that holds it "
            "or put that directory on PYTHONPATH (docs/adding_an_env.md)"
        ) from None
    except gym.error.Error as error:
        raise SystemExit(
            f"freshrl: --env {env}: {error}. An env registered in a module of your own is named with the "
            f"module first, Gymnasium's module:id form: --env mymodule:{env_id} (docs/adding_an_env.md)"
        ) from None
