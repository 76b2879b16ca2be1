"""The one configuration path: a run's settings (a settings file, then the command line) -> a DAPOConfig.

A DAPOConfig is folded from an ordered list of layers, each a plain mapping in one vocabulary (DAPOConfig's
attribute names, ``algorithms.dapo.config.config_keys``, and RunSettings' field names), each overriding the
ones before it (:data:`LAYERS`, docs/configuration.md):

1. ``defaults``: ``DAPOConfig``'s, the papers' (``algorithms/dapo/config.py``), and RunSettings';
2. ``algorithm``: a rung of DAPO's Table 1 ladder (``algorithms/dapo/ladder.py``);
3. ``scale``: the workload for a model and a machine (``algorithms/dapo/scales.py``);
4. ``settings file``: ``experiments/settings/<env>.yaml``, and a file laid over it (a sweep's quick one);
5. ``command line``: ``--set key=value`` and its aliases (``experiments/common/run_options.py``);
6. ``entry point``: what the command itself sets (the starting model, a comparison's arm);
7. ``tune grid``: a sweep's swept values.

Every key's final value remembers its layer: ``DAPOConfig.key_sources()`` and :func:`setting_sources`
(``experiments.train --explain-config`` prints them; every summary.json records them).

A run is a :class:`RunSettings`: the run's plumbing (env, model, warm start, presets, iterations, resources)
and ``overrides``, the DAPOConfig keys of layer 3. A *settings file* is the same fields in YAML (an unknown
key is an error naming close matches). Every entry point (train, sweep, compare, evaluate, warm_start) and
every benchmark turns its settings into a config with :func:`build_config`.

    settings = settings_for("freshrl/Math-v0")             # the env's shipped settings file
    settings = dataclasses.replace(settings, model=starting_model(settings))   # the tiny warm start
    config = build_config(settings, {"lr": 1e-5, "tau": 8.0})
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from algorithms.dapo import ALGORITHMS, SCALES, DAPOConfig
from algorithms.dapo.config import RENAMED_KEYS, config_keys, current_key, unknown_key_message

DEFAULT_ENV = "freshrl/FrozenLake-v0"
SETTINGS_DIR = Path(__file__).resolve().parents[1] / "settings"
# The runs of a sweep or a comparison without --settings: 3 iterations, evaluated after each on 16 tasks.
QUICK_SETTINGS = SETTINGS_DIR / "quick" / "sweep_and_compare.yaml"
# Former RunSettings fields that repeated a DAPOConfig key -> how a settings file says it now.
MOVED_KEYS = {
    "replay": "overrides: {replay_mode: ...}",
    "eval_tasks": "overrides: {evaluation_num_tasks: ...}",
    "eval_samples": "overrides: {evaluation_samples_per_task: ...}",
    "eval_every": "overrides: {evaluation_interval: ...}",
    "seed": "overrides: {seed: ...}",
}
SMOLLM2 = "smollm2"  # the model name (models/names.py) whose runs default to the smollm2 scale
# The kinds of layer a run's configuration is folded from, lowest first (docs/configuration.md's table). A
# layer's name is its kind, then what it is: "scale tiny",
# "settings file experiments/settings/frozen_lake.yaml".
LAYERS = ("defaults", "algorithm", "scale", "settings file", "command line", "entry point", "tune grid")


class SettingsError(ValueError):
    """A settings file or a setting that cannot describe a run; the message names the key and the fix."""


@dataclass(frozen=True)
class RunSettings:
    """What a run is: its plumbing, and ``overrides`` (DAPOConfig keys). Field names are a settings file's
    keys and ``--set`` takes them too; ``None`` means "the default" where noted. Nothing here repeats a
    DAPOConfig key: the replay mode, evaluation and seed are ``overrides`` (``replay_mode``,
    ``evaluation_num_tasks``, ``seed``, ...)."""

    env: str = DEFAULT_ENV  # a registered id, or module:ns/Name-v0 (docs/adding_an_env.md)
    env_config: dict[str, Any] = field(default_factory=dict)  # kwargs of gymnasium.make
    model: str | None = None  # a name (smollm2), a model directory or a hub id; None: the tiny warm start
    algorithm: str = "dapo"  # DAPO's Table 1 ladder (algorithms/dapo/ladder.py)
    scale: str | None = None  # tiny | smollm2 | paper; None: smollm2 for --model smollm2, else tiny
    iterations: int = 20
    # The warm start's AdamW steps on the env's oracle: of the tiny model (None: algorithms.warm_start's
    # per-env value), or of ``model`` (None or 0: the model as it is), with the base's recipe
    # (algorithms.warm_start).
    warm_start_steps: int | None = None
    warm_start: bool = True  # False: start from the untrained tiny model (no model only)
    # The env kwargs of the warm start's demonstrations (None: ``env_config``): RL on an easier setting of a
    # task can start from a policy that saw the whole task (docs/learning_lab.md, BabyAI).
    warm_start_env_config: dict[str, Any] | None = None
    num_env_runners: int = 0  # remote EnvRunners (0: in-process)
    num_learners: int = 0  # remote learners (0: in-process)
    gpu: bool = False  # one GPU per learner and per remote EnvRunner
    overrides: dict[str, Any] = field(default_factory=dict)  # DAPOConfig keys, as --set
    # Key (a field's name or an override's) -> (the layer that set it, the value it set): kept by
    # with_layer(), read by setting_sources(); not part of what the run is.
    sources: dict[str, tuple[str, Any]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(RunSettings)
        for item in dataclasses.fields(self):
            if item.name == "sources":
                continue
            value = getattr(self, item.name)
            if not _has_type(value, hints[item.name]):
                raise SettingsError(f"{item.name} must be {_type_name(hints[item.name])}, got {value!r}")
        choices = {"algorithm": list(ALGORITHMS), "scale": [None, *sorted(SCALES)]}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise SettingsError(f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}")
        if self.iterations < 1:
            raise SettingsError(f"iterations must be >= 1, got {self.iterations}")
        for name in ("num_env_runners", "num_learners"):
            if getattr(self, name) < 0:
                raise SettingsError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.warm_start_steps is not None and self.warm_start_steps < 0:
            raise SettingsError(f"warm_start_steps must be >= 0, got {self.warm_start_steps}")
        if self.warm_start_steps is not None and not self.warm_start:
            raise SettingsError("warm_start_steps and warm_start: false exclude each other; drop one")
        if self.model is not None and not self.warm_start:
            raise SettingsError(
                "warm_start: false chooses the untrained tiny model (no model); drop it or the model (a "
                "model is used as it is unless warm_start_steps is set)"
            )
        check_override_keys(self.overrides)
        object.__setattr__(self, "overrides", current_override_keys(self.overrides))

    def as_record(self) -> dict[str, Any]:
        """What the run is, as records hold it: every field but ``sources`` (summary.json keeps the layers
        apart, as ``config_layers``)."""
        record = dataclasses.asdict(self)
        del record["sources"]
        return record

    @property
    def resolved_scale(self) -> str:
        """The scale applied: ``scale``, else smollm2 for the smollm2 model and tiny otherwise."""
        if self.scale is not None:
            return self.scale
        return "smollm2" if self.model == SMOLLM2 else "tiny"


# ---------------------------------------------------------------------------------------------------------
def load_settings(path: str | Path, base: RunSettings | None = None) -> RunSettings:
    """The settings of a YAML settings file, over ``base`` (default: RunSettings' defaults): its keys
    replace base's and its ``overrides`` are merged over base's (a file of a few keys, such as
    :data:`QUICK_SETTINGS`, changes only those). A :class:`SettingsError` names the file and the bad key."""
    path = Path(path)
    if not path.is_file():
        raise SettingsError(f"no settings file {path}; the shipped ones are in {SETTINGS_DIR}")
    values = _yaml(path.read_text()) or {}
    if not isinstance(values, dict):
        raise SettingsError(f"{path}: a settings file is a mapping of keys to values, got {values!r}")
    keys = [*run_keys(), "overrides"]
    for key in values:
        if key in MOVED_KEYS:
            raise SettingsError(f"{path}: {key!r} is a DAPOConfig key now: write {MOVED_KEYS[key]}")
        if key not in keys:
            raise SettingsError(f"{path}: unknown key {key!r}{_close(key, keys)}; allowed: {keys}")
    try:
        return with_layer(base or RunSettings(), f"settings file {_shown(path)}", values)
    except SettingsError as error:
        raise SettingsError(f"{path}: {error}") from None


def with_layer(settings: RunSettings, layer: str, values: Mapping[str, Any]) -> RunSettings:
    """``settings`` with the layer ``layer`` (its name: a kind of :data:`LAYERS`, then what it is) on top:
    ``values`` holds run keys, which replace settings' fields, DAPOConfig keys, merged over its overrides,
    and ``overrides: {...}`` (a settings file's way of writing DAPOConfig keys). Former key names warn and
    are translated (``algorithms.dapo.config.RENAMED_KEYS``)."""
    values = dict(values)
    keys = dict(values.pop("overrides", None) or {})
    keys.update({key: values.pop(key) for key in list(values) if key not in run_keys()})
    where = layer.removeprefix("settings file ") if layer.startswith("settings file") else layer
    check_override_keys(keys)
    keys = current_override_keys(keys, where)
    sources = {**settings.sources, **{key: (layer, value) for key, value in {**values, **keys}.items()}}
    return dataclasses.replace(settings, **values, overrides={**settings.overrides, **keys}, sources=sources)


def setting_sources(settings: RunSettings) -> dict[str, str]:
    """Every run key and override of ``settings`` -> the layer that set its value: the last
    :func:`with_layer` that set it, "defaults" for RunSettings' own value, "code" for one set otherwise
    (``dataclasses.replace``)."""
    defaults = RunSettings()
    sources = {}
    current = {name: getattr(settings, name) for name in run_keys()} | dict(settings.overrides)
    for key, value in current.items():
        layer, recorded = settings.sources.get(key, ("defaults", getattr(defaults, key, _ABSENT)))
        sources[key] = layer if recorded == value else "code"
    return sources


_ABSENT = object()


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it is inside it (records stay the same on every clone)."""
    try:
        return str(path.resolve().relative_to(SETTINGS_DIR.parents[1]))
    except ValueError:
        return str(path)


def shipped_settings() -> dict[Path, RunSettings]:
    """Every settings file in ``experiments/settings/``."""
    return {path: load_settings(path) for path in sorted(SETTINGS_DIR.glob("*.yaml"))}


def default_settings_file(env: str, model: str | None = None) -> Path | None:
    """The shipped settings file of ``env`` for ``model``: the one with that ``env`` and ``model`` (e.g.
    ``math_smollm2.yaml`` for smollm2), else the env's default (no ``model``), else None."""
    shipped = shipped_settings()
    for wanted in dict.fromkeys([model, None]):
        match = [
            path for path, settings in shipped.items() if (settings.env, settings.model) == (env, wanted)
        ]
        if match:
            return match[0]
    return None


def settings_for(env: str = DEFAULT_ENV, model: str | None = None) -> RunSettings:
    """The shipped settings of ``env`` for ``model`` (:func:`default_settings_file`), with ``model`` set;
    the defaults of :class:`RunSettings` for an env without a settings file."""
    path = default_settings_file(env, model)
    settings = load_settings(path) if path else RunSettings(env=env)
    return settings if model is None else dataclasses.replace(settings, model=model)


# ---------------------------------------------------------------------------------------------------------
def run_keys() -> tuple[str, ...]:
    """The keys of a run's plumbing that ``--set`` takes besides DAPOConfig's: RunSettings' fields."""
    fields = dataclasses.fields(RunSettings)
    return tuple(item.name for item in fields if item.name not in ("overrides", "sources"))


def check_override_keys(keys: Iterable[str]) -> None:
    """A :class:`SettingsError` for the first key that is not a DAPOConfig key (``config_keys``, or a
    former name of one), listing close matches."""
    known = config_keys()
    for key in keys:
        if key in run_keys():
            raise SettingsError(
                f"{key!r} is a key of the run (RunSettings), not of DAPOConfig: a settings file sets it at "
                f"its top level, the command line with --set {key}=..."
            )
        if key not in known and key not in RENAMED_KEYS:
            raise SettingsError(unknown_key_message(key))


def current_override_keys(values: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """``values`` with former DAPOConfig key names translated, each with a warning naming the new one."""
    return {current_key(key, where): value for key, value in values.items()}


def parse_set(items: Iterable[str]) -> dict[str, Any]:
    """``["key=value", ...]`` (``--set`` and its aliases) -> {key: value}, each value parsed as YAML (1e-5,
    true, null, [0.9, 0.99]). A key is a DAPOConfig key (``algorithms.dapo.config.config_keys``; a former
    name warns and is translated) or a run key (:func:`run_keys`: iterations, scale, ...); anything else is
    an error listing close matches. A later item wins."""
    import yaml

    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"--set takes key=value (e.g. --set lr=1e-5), got {item!r}")
        key = key.strip()
        check_override_keys([] if key in run_keys() else [key])
        try:
            values[current_key(key, "--set")] = _yaml(text)
        except yaml.YAMLError as error:
            raise SettingsError(f"--set {item}: the value is not YAML ({error})") from None
    return values


# ---------------------------------------------------------------------------------------------------------
def build_config(
    settings: RunSettings, overrides: Mapping[str, Any] | None = None, layer: str = "entry point"
) -> DAPOConfig:
    """The validated DAPOConfig of a run, folded from the layers of :data:`LAYERS`: DAPOConfig's defaults;
    the presets (``settings.algorithm``, ``settings.resolved_scale``); ``settings.overrides``, each key
    under the layer that set it (a settings file, the command line: :func:`setting_sources`); then
    ``overrides``, the caller's (a starting model, a comparison's arm), under the name ``layer``. Then the
    run's plumbing that is not a DAPOConfig key: env, resources. The model is ``settings.model`` as given
    (None: the untrained tiny LM); :func:`starting_model` resolves the default. ``config.key_sources()``
    names each key's layer. A bad value is a ``ValueError`` from ``DAPOConfig.validate`` (the one
    validator) naming the key.
    """
    sources = setting_sources(settings)
    config = DAPOConfig().environment(settings.env, env_config=dict(settings.env_config))
    config.set_keys(ALGORITHMS[settings.algorithm], f"algorithm {settings.algorithm}")
    config.set_keys(SCALES[settings.resolved_scale], f"scale {settings.resolved_scale}")
    config.set_keys({"model_path": settings.model}, sources["model"])
    for key, value in settings.overrides.items():
        config.set_keys({key: value}, sources[key])
    if overrides:
        check_override_keys(overrides)
        config.set_keys(dict(overrides), layer)
    config = config.env_runners(num_env_runners=settings.num_env_runners)
    if settings.gpu and settings.num_env_runners > 0:
        config = config.env_runners(num_gpus_per_env_runner=1)  # one vLLM engine per GPU
    config = config.learners(
        num_learners=settings.num_learners, num_gpus_per_learner=1 if settings.gpu else 0
    )
    config.validate()
    return config


def explain_config(settings: RunSettings, config: DAPOConfig) -> dict[str, dict[str, Any]]:
    """Every key of the run -> ``{"value", "layer"}``: RunSettings' fields (the run's plumbing) and every
    DAPOConfig key, each with the layer that set its final value; values as JSON holds them (inf as
    Infinity, a class as its repr). What summary.json records as
    ``config_layers`` and ``experiments.train --explain-config`` prints."""
    sources = setting_sources(settings)
    rows = {key: {"value": _plain(getattr(settings, key)), "layer": sources[key]} for key in run_keys()}
    for key, layer in config.key_sources().items():
        rows[key] = {"value": _plain(getattr(config, key, None)), "layer": layer}
    return rows


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it (tuples as lists), or its repr where JSON has no form for it (a class)."""
    import json

    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def starting_model(settings: RunSettings) -> str:
    """The model a run starts from: ``settings.model`` as it is, or warm-started on the env for
    ``warm_start_steps`` when those are set (not 0); without a model, the tiny model warm-started on the env
    (``algorithms.warm_start``; trained on first use, then cached), or the untrained tiny model when
    ``warm_start`` is false. An env without ``oracle_responses()`` is a :class:`SettingsError` naming its
    contract and the ways around it. The warm start's demonstrations are episodes of the run's
    ``warm_start_env_config``, by default its ``env_config``."""
    from algorithms.warm_start import MissingOracleError, tiny_base_path, warm_started_path

    if settings.model is not None and not settings.warm_start_steps:  # None or 0: no warm start
        return settings.model
    if not settings.warm_start:
        return str(tiny_base_path(settings.env))
    demonstrated = settings.warm_start_env_config
    warm_start = {
        "steps": settings.warm_start_steps,
        "env_config": dict(settings.env_config if demonstrated is None else demonstrated),
    }
    try:
        if settings.model is not None:
            return str(warm_started_path(settings.env, base=settings.model, **warm_start))
        return str(warm_started_path(settings.env, **warm_start))
    except MissingOracleError as error:
        raise SettingsError(str(error)) from None


# ---------------------------------------------------------------------------------------------------------
def _close(key: str, choices: Iterable[str]) -> str:
    matches = difflib.get_close_matches(key, list(choices), n=4, cutoff=0.6)
    return f" (did you mean {', '.join(matches)}?)" if matches else ""


def _yaml(text: str) -> Any:
    """``text`` parsed as YAML, with YAML 1.2's floats: PyYAML (YAML 1.1) reads 1e-5 as a string."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
    return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)


_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


def _has_type(value: Any, hint: Any) -> bool:
    """``value`` fits the annotation ``hint`` (str, int, float, bool, dict, None and unions of them)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_has_type(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint) or hint
    if origin is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, origin)


def _type_name(hint: Any) -> str:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return " or ".join(_type_name(option) for option in typing.get_args(hint))
    if hint is type(None):
        return "null"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "a mapping"}[
        typing.get_origin(hint) or hint
    ]
