"""The run of a sweep trial or a comparison arm: the shared options of ``experiments.sweep`` and
``experiments.compare`` and the settings and config they make of them."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from algorithms.dapo import DAPOConfig
from experiments.common.run_config import RunSettings, SettingsError, build_config, starting_model
from experiments.common.run_options import (
    add_algorithm_options,
    add_model_options,
    add_run_options,
    base_settings,
    settings_from_args,
)

# A sweep's (and a comparison's) run without --settings: short, evaluated every iteration on 16 tasks.
WORKLOAD_DEFAULTS: dict[str, Any] = {"iterations": 3, "eval_tasks": 16, "eval_every": 1}
# Workload options -> the DAPOConfig key each sets.
WORKLOAD_KEYS = {
    "group_size": "group_size",
    "prompts": "prompts_per_iteration",
    "max_response_tokens": "max_response_tokens",
    "max_generation_batches": "max_generation_batches",
    "kv_cache_gib": "engine_kv_cache_gib",
}


# ---------------------------------------------------------------------------------------------------------
def add_workload_args(parser: argparse.ArgumentParser) -> None:
    """Options shared with ``experiments.compare``: the model, algorithm, scale, ``--set``, evaluation and
    resources, and shorthands for the workload's size (DAPOConfig keys)."""
    add_model_options(parser)
    add_algorithm_options(parser)
    add_run_options(parser)
    shorthands = {
        "--group-size": (int, "G (= --set group_size=)"),
        "--prompts": (int, "P per iteration (= --set prompts_per_iteration=)"),
        "--max-response-tokens": (int, "per turn (= --set max_response_tokens=; L_cache shrinks with it)"),
        "--max-generation-batches": (int, "dynamic sampling budget (= --set max_generation_batches=)"),
        "--kv-cache-gib": (float, "vLLM KV cache (= --set engine_kv_cache_gib=)"),
    }
    for flag, (kind, text) in shorthands.items():
        parser.add_argument(flag, type=kind, default=None, help=text)


def workload_settings(
    prog: str,
    args: argparse.Namespace,
    *,
    env: str | None,
    replay: str | None = None,
    seed: int | None = None,
    overrides: dict[str, Any] | None = None,
) -> RunSettings:
    """The settings of one run of a sweep or comparison: ``--settings`` or the env's settings file, the
    options, :data:`WORKLOAD_DEFAULTS` (without ``--settings``), ``replay``, ``seed`` and ``overrides``
    (after ``--set`` and the workload options)."""
    settings_file = getattr(args, "settings", None)
    base = base_settings(prog, settings_file, env, args.model)
    shorthands = {key: getattr(args, name) for name, key in WORKLOAD_KEYS.items()}
    settings = settings_from_args(
        prog,
        args,
        base,
        defaults=None if settings_file else WORKLOAD_DEFAULTS,
        overrides={**{k: v for k, v in shorthands.items() if v is not None}, **(overrides or {})},
    )
    chosen = {"replay": replay, "seed": seed}
    try:
        return dataclasses.replace(settings, **{k: v for k, v in chosen.items() if v is not None})
    except SettingsError as error:
        raise SystemExit(f"{prog}: {error}") from None


def workload_config(settings: RunSettings, prog: str) -> DAPOConfig:
    """``build_config`` of ``settings`` from its starting model (the tiny warm start without a model)."""
    try:
        return build_config(settings, {"model_path": starting_model(settings)})
    except (SettingsError, ValueError) as error:
        raise SystemExit(f"{prog}: {error}") from None


