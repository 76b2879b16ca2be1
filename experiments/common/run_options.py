"""The command-line options of a run, shared by the entry points: a settings file, then ``--set`` and its
aliases.

``--settings`` (or ``--env`` and ``--model``) picks the settings file; ``--set key=value`` (repeatable,
later wins) then sets any DAPOConfig key or run key (``experiments.common.run_config.parse_set``). Every
other option of a run is an alias of one ``--set``, listed once in :data:`ALIASES`: ``--replay per`` is
``--set replay_mode=per`` and ``--iterations 40`` is ``--set iterations=40``, in the order given on the
command line (docs/configuration.md has the table).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from experiments.common.run_config import (
    DEFAULT_ENV,
    RunSettings,
    SettingsError,
    load_settings,
    parse_set,
    settings_for,
    with_layer,
)

_TAKES_A_VALUE = object()


@dataclass(frozen=True)
class Alias:
    """A named option that is ``--set key=<its value>`` (or ``--set key=<const>`` for a flag)."""

    flag: str
    key: str
    help: str
    type: Callable[[str], Any] | None = None
    const: Any = _TAKES_A_VALUE  # a flag without a value sets this
    choices: tuple[str, ...] | None = None


def _alias_table() -> dict[str, Alias]:
    from algorithms.dapo import ALGORITHMS, SCALES
    from algorithms.replay import REPLAY_MODES

    aliases = [
        # Presets (layer 2) and the run's plumbing.
        Alias("--algorithm", "algorithm", "a rung of DAPO's Table 1 ladder", str, choices=tuple(ALGORITHMS)),
        Alias("--scale", "scale", "workload and learning settings", str, choices=tuple(sorted(SCALES))),
        Alias("--full-scale", "scale", "the papers' settings (= --scale paper)", const="paper"),
        Alias("--iterations", "iterations", "training iterations", int),
        Alias("--warm-start-steps", "warm_start_steps", "AdamW steps of the warm start on the oracle", int),
        Alias("--no-warm-start", "warm_start", "train the untrained tiny model (no oracle)", const=False),
        Alias("--num-env-runners", "num_env_runners", "remote EnvRunners (0: in-process)", int),
        Alias("--num-learners", "num_learners", "remote learners (0: in-process)", int),
        Alias("--gpu", "gpu", "one GPU per learner and remote EnvRunner", const=True),
        # DAPOConfig keys.
        Alias("--seed", "seed", "training seed", int),
        Alias("--replay", "replay_mode", "replay mode", str, choices=tuple(REPLAY_MODES)),
        Alias("--tau", "replay_tau", "FreshPER's age decay constant", float),
        Alias("--eps-high", "eps_high", "Clip-Higher's upper clip", float),
        Alias("--eval-tasks", "evaluation_num_tasks", "validation tasks of each evaluation", int),
        Alias("--eval-samples", "evaluation_samples_per_task", "samples per validation task (pass@k)", int),
        Alias("--eval-every", "evaluation_interval", "evaluate every k training iterations", int),
        Alias("--group-size", "group_size", "G, samples per prompt", int),
        Alias("--prompts", "prompts_per_iteration", "P, prompts per iteration", int),
        Alias("--max-response-tokens", "max_response_tokens", "per turn", int),
        Alias("--max-generation-batches", "max_generation_batches", "dynamic sampling's budget", int),
        Alias("--kv-cache-gib", "engine_kv_cache_gib", "vLLM's KV cache", float),
    ]
    return {alias.flag: alias for alias in aliases}


ALIASES: dict[str, Alias] = _alias_table()
# The aliases of each group of options.
MODEL_ALIASES = ("--warm-start-steps", "--no-warm-start")
ALGORITHM_ALIASES = ("--algorithm", "--scale", "--full-scale")
RUN_ALIASES = ("--iterations", "--eval-tasks", "--eval-samples", "--eval-every", "--num-env-runners",
               "--num-learners", "--gpu")  # fmt: skip
WORKLOAD_ALIASES = ("--group-size", "--prompts", "--max-response-tokens", "--max-generation-batches",
                    "--kv-cache-gib")  # fmt: skip


class _SetAlias(argparse.Action):
    """Appends ``key=value`` to ``--set``'s list, so an alias and ``--set`` are one list in command order."""

    def __init__(self, option_strings, dest, alias: Alias, **kwargs) -> None:
        self.alias = alias
        nargs = 0 if alias.const is not _TAKES_A_VALUE else None
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        value = self.alias.const if self.alias.const is not _TAKES_A_VALUE else values
        items = list(getattr(namespace, "set", None) or [])
        namespace.set = [*items, f"{self.alias.key}={json.dumps(value)}"]


def add_aliases(parser: argparse.ArgumentParser, flags: Iterable[str]) -> None:
    """The aliases ``flags`` (keys of :data:`ALIASES`), each documented as the ``--set`` it is."""
    for flag in flags:
        alias = ALIASES[flag]
        text = f"= --set {alias.key}=" + ("" if alias.const is _TAKES_A_VALUE else json.dumps(alias.const))
        parser.add_argument(
            flag,
            dest=f"alias_{flag[2:].replace('-', '_')}",
            action=_SetAlias,
            alias=alias,
            type=alias.type,
            choices=alias.choices,
            metavar=None if alias.choices or alias.const is not _TAKES_A_VALUE else alias.key.upper(),
            default=None,
            help=f"{alias.help} ({text})",
        )


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--settings",
        default=None,
        metavar="FILE",
        help="settings file (YAML, RunSettings' keys; default: experiments/settings/<the env's>.yaml)",
    )


def settings_env(settings_file: str) -> str:
    """The env of the settings file ``settings_file`` (the default env of a command given only the file)."""
    try:
        return load_settings(settings_file).env
    except SettingsError as error:
        raise SystemExit(str(error)) from None


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """The model and how the default one is made."""
    parser.add_argument(
        "--model",
        default=None,
        help="a model name (smollm2: SmolLM2-135M-Instruct, built offline), a local model dir or a hub id "
        "(default: the offline tiny model warm-started on the env)",
    )
    add_aliases(parser, MODEL_ALIASES)


def add_algorithm_options(parser: argparse.ArgumentParser) -> None:
    """The presets and ``--set``."""
    add_aliases(parser, ALGORITHM_ALIASES)
    parser.add_argument(
        "--set",
        dest="set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a DAPOConfig training, replay or evaluation key, or a run key (value in YAML: 1e-5, true, "
        "null, [0.9, 0.99]); repeatable, later wins; e.g. --set lr=1e-5 --set replay_capacity=512",
    )


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Env config, iterations, evaluation and resources (the options every entry point has)."""
    parser.add_argument("--env-config", default=None, help="JSON kwargs for gymnasium.make")
    add_aliases(parser, RUN_ALIASES)


def base_settings(
    prog: str, settings_file: str | None, env: str | None, model: str | None, quick: bool = False
) -> RunSettings:
    """The settings file named, else the env's shipped one for the model (``settings_for``), then (with
    ``quick`` and no file named) the short runs of ``QUICK_SETTINGS``."""
    from experiments.common.run_config import QUICK_SETTINGS

    try:
        if settings_file is None:
            settings = settings_for(env or DEFAULT_ENV, model)
            return load_settings(QUICK_SETTINGS, settings) if quick else settings
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
    overrides: Mapping[str, Any] | None = None,
    layer: str = "entry point",
) -> RunSettings:
    """``base`` with the command line on top (the "command line" layer): ``--env``, ``--model``,
    ``--env-config``, then the ``--set`` items and aliases in order (run keys replace base's, DAPOConfig keys
    go to its overrides); then ``overrides``, the caller's DAPOConfig keys, as the layer ``layer``. An
    error naming the option for a bad value."""
    given = {name: getattr(args, name, None) for name in ("env", "model", "env_config")}
    given = {name: value for name, value in given.items() if value is not None}
    try:
        if isinstance(given.get("env_config"), str):
            given["env_config"] = json.loads(given["env_config"])
        settings = with_layer(base, "command line", {**given, **parse_set(getattr(args, "set", None) or [])})
        return with_layer(settings, layer, overrides) if overrides else settings
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
