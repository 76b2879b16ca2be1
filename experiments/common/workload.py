"""The run of a sweep trial or a comparison arm: the shared options of ``experiments.sweep`` and
``experiments.compare`` and the settings and config they make of them."""

from __future__ import annotations

import argparse
from typing import Any

from algorithms.dapo import DAPOConfig
from experiments.common.run_config import RunSettings, SettingsError, build_config, starting_model
from experiments.common.run_options import (
    WORKLOAD_ALIASES,
    add_algorithm_options,
    add_aliases,
    add_model_options,
    add_run_options,
    base_settings,
    settings_from_args,
)


def add_workload_args(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``experiments.sweep`` and ``experiments.compare``: the model, the presets, ``--set``,
    evaluation and resources, and the workload's size (aliases of DAPOConfig keys)."""
    add_model_options(parser)
    add_algorithm_options(parser)
    add_run_options(parser)
    add_aliases(parser, WORKLOAD_ALIASES)


def workload_settings(
    prog: str,
    args: argparse.Namespace,
    *,
    env: str | None,
    overrides: dict[str, Any] | None = None,
    layer: str = "entry point",
) -> RunSettings:
    """The settings of one run of a sweep or comparison: ``--settings``, else the env's settings file with
    the short runs of ``experiments/settings/quick/sweep_and_compare.yaml`` on top; then the command line,
    then ``overrides`` (the caller's run and DAPOConfig keys: a comparison's arm and seed) as the layer
    ``layer``."""
    base = base_settings(prog, getattr(args, "settings", None), env, args.model, quick=True)
    return settings_from_args(prog, args, base, overrides=overrides, layer=layer)


def workload_config(settings: RunSettings, prog: str) -> DAPOConfig:
    """``build_config`` of ``settings`` from its starting model (the tiny warm start without a model)."""
    try:
        return build_config(settings, {"model_path": starting_model(settings)})
    except (SettingsError, ValueError) as error:
        raise SystemExit(f"{prog}: {error}") from None
