"""Arms of a comparison, trained and tested against each other: ``python -m experiments.compare``.

By default the arms are the replay modes: on-policy vs standard PER vs FreshPER (and its polynomial
variant), picked with ``--modes``, which also takes ``freshper+backfill`` (FreshPER with replay as backfill),
each tested against FreshPER. ``--arms KEY=V1,V2[,...]`` compares the values of any DAPOConfig or run key
instead (the keys ``--set`` takes, each value read as ``--set`` reads it), each tested against the first:

    python -m experiments.compare --envs freshrl/Sokoban-v0 --arms advantage_estimator=episode,gigpo --seeds 3

For every (seed, env, arm) it builds DAPO with ``experiments.common.run_config.build_config`` (the env's
settings file, then the options of ``experiments.sweep``: ``--model``, by default the tiny model warm-started
on the env; ``--algorithm``, ``--scale``, ``--set key=value`` and the workload options; then the arm's keys;
3 iterations evaluated every iteration on 16 tasks unless the options say otherwise), measures validation
success before training (``DAPO.evaluate_policy``) and inside training every ``--eval-every`` iterations
(RLlib's ``evaluation_interval``; the last iteration always), then stops the algorithm. Validation success is
the mean success of ``--eval-samples`` episode(s) on each of the first ``--eval-tasks`` tasks of the
validation split (``envs/seeds.py``), sampled with the training settings; the same tasks for every run. Each
run also records its wall time and the peak resident memory of this process while it ran
(``experiments/common/peak_memory.py``; Ray actors are other processes and not counted).

The runs are sequential, in this process: each builds its algorithm, trains, evaluates and stops, while Ray
(started once) and the imported torch / vLLM stay up. Tune trials would each start a fresh worker process
(imports and engine start again) for no gain on a machine that runs one trial at a time; the sweep
(``experiments.sweep``) is where Tune pays off.

Output, in ``--output`` (default ``results/compare-<time>``):
  ``runs/<env>__<arm>__seed<k>.json``  one finished run (curve, per-iteration training metrics, settings,
      wall time, peak memory); ``<arm>`` is the replay mode, or ``KEY-VALUE`` for ``--arms``
      (``FrozenLake-v0__lora_rank-16__seed0.json``). Written when the run ends, and skipped when the command
      is rerun with the same ``--output``, so an interrupted comparison resumes where it stopped (a run saved
      with other settings is an error);
  ``comparison.md``  FreshPER's Table 1 layout: rows = tasks, columns = arms, cell = peak validation success
      (the maximum over the evaluations after training started) as mean +- 95% t interval over seeds (and the
      standard deviation); the final success the same way; the reference arm (FreshPER for replay modes, else
      the first arm) tested against each other arm over seeds (the paired t-test by seed where both ran the
      same seeds, else Welch's; ``experiments/common/significance.py``), Holm-adjusted over the table, with
      the smallest difference the run could detect; the replay metrics (importance weights, success share,
      ages, decay of the oldest item, dual-clip fraction) where some arm replays; the cost per arm (wall
      minutes and peak memory per run); for replay modes, the paper's Table 1 beside it for reference.
      Rewritten after every run, so an interrupted comparison always has the report of its finished runs,
      headed by what is missing;
      ``--report-only`` writes it from the finished runs without training anything;
  ``curves-<env>.png``  validation success over iterations, mean per arm with the range over seeds;
  ``results.json``  its provenance (``experiments/common/results_json.py``), every run's raw numbers and the
      aggregates.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.dapo.config import RENAMED_KEYS, current_key
from algorithms.replay import REPLAY_MODES
from experiments.common import learning_diagnostics
from experiments.common.freshper_paper import PAPER_TABLE_1, PAPER_TASK, proportional_effect
from experiments.common.peak_memory import SAMPLE_INTERVAL_S, PeakRss
from experiments.common.ray_session import start_ray
from experiments.common.replay_drift import drift
from experiments.common.results_json import dtype_record, dumps, git_state, provenance
from experiments.common.run_config import (
    DEFAULT_ENV,
    RunSettings,
    SettingsError,
    build_config,
    explain_config,
    parse_set,
    run_keys,
)
from experiments.common.run_options import add_aliases, check_env_id
from experiments.common.significance import holm, mean_over_seeds, paired_seed_test
from experiments.common.training_metrics import MOSTLY_UNTRAINED_SHARE, flatten, measured, trained_nothing
from experiments.common.workload import add_workload_args, workload_config, workload_settings

PROG = "python -m experiments.compare"
MODE_LABELS = {
    "on_policy": "on-policy",
    "per": "standard PER",
    "freshper": "FreshPER",
    "freshper_poly": "FreshPER (polynomial decay)",
}
# Arms beyond the replay modes: a replay mode with DAPOConfig keys on top. FreshPER with replay as backfill
# (a short batch filled from the buffer instead of training short).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "freshper+backfill": ("freshper", {"replay_backfill": True}),
}
MODE_LABELS["freshper+backfill"] = "FreshPER + replay backfill"
COMPARE_MODES = (*REPLAY_MODES, *VARIANTS)
REFERENCE_MODE = "freshper"  # the replay mode every other one is tested against
# Keys a comparison sets itself, so they cannot be arms: the option that sets them instead.
NOT_ARMS = {"env": "--envs", "seed": "--seeds"}
# A value's characters kept as they are in a run's file name; any other makes the name a slug plus a hash.
_FILE_SAFE = re.compile(r"[^A-Za-z0-9._+-]")
_MAX_VALUE_IN_NAME = 40


@dataclass(frozen=True)
class Arm:
    """One arm of a comparison: what its runs set on top of the command line.

    ``label`` names it in the saved runs, ``results.json`` and the console (a replay mode, or ``KEY=VALUE``
    as typed); ``name`` heads its column in the report; ``file_stem`` is the middle of its runs' file names;
    ``keys`` are the DAPOConfig or run keys it sets, as ``--set`` takes them."""

    label: str
    name: str
    file_stem: str
    keys: dict[str, Any]


def mode_arm(mode: str) -> Arm:
    """The arm of a replay mode or a variant (its replay mode plus its keys); its file names are the ones
    comparisons have always written, so committed comparisons resume."""
    replay, keys = VARIANTS.get(mode, (mode, {}))
    return Arm(mode, MODE_LABELS[mode], mode, {"replay_mode": replay, **keys})


def parse_arms(texts: str | list[str]) -> list[Arm]:
    """``KEY=V1,V2[,...]`` -> one arm per value; several such texts (``--arms`` repeated) set several keys
    per arm, their values paired by position (``["lora_rank=0,16", "lr=2e-5,2e-4"]``: full training at
    2e-5 against LoRA at 2e-4). Each key is checked and each value read as ``--set`` does
    (``experiments.common.run_config.parse_set``: YAML, so 16 is an int, true a bool, gigpo a string); the
    values are split at the commas outside brackets and quotes, so ``adam_betas=[0.9,0.99],[0.9,0.999]`` is
    two arms. A :class:`SettingsError` for fewer than 2 values, unequal counts, a key given twice, two equal
    arms, an empty value or a bad key."""
    columns = [_key_values(text) for text in ([texts] if isinstance(texts, str) else texts)]
    keys = [key for _, key, _, _ in columns]
    for index, key in enumerate(keys):
        if key in keys[:index]:
            raise SettingsError(f"--arms {key}=... is given twice; give each key once")
    counts = {key: len(items) for _, key, items, _ in columns}
    if len(set(counts.values())) > 1:
        raise SettingsError(
            f"each --arms gives one value per arm, paired by position; got {counts}: give every key as many"
        )
    arms = []
    for position in range(len(columns[0][2])):
        arm = [(typed, key, items[position], parsed[position]) for typed, key, items, parsed in columns]
        label = ", ".join(f"{typed}={item}" for typed, _, item, _ in arm)
        stem = "+".join(_file_stem(key, item) for _, key, item, _ in arm)
        arms.append(Arm(label, label, stem, {key: value for _, key, _, value in arm}))
    canonical = [dumps(arm.keys, indent=None) for arm in arms]
    for index, form in enumerate(canonical):
        if form in canonical[:index]:
            first = arms[canonical.index(form)].label
            raise SettingsError(
                f"--arms: {first!r} and {arms[index].label!r} are the same arm; give each value once"
            )
    return arms


def _key_values(text: str) -> tuple[str, str, list[str], list[Any]]:
    """One ``--arms KEY=V1,V2[,...]``: its key as typed and as DAPOConfig names it now (a former name warns
    once), its values as typed and as read."""
    typed, sep, values = text.partition("=")
    typed = typed.strip()
    if not sep or not typed:
        raise SettingsError(f"--arms takes KEY=V1,V2,... (e.g. --arms lora_rank=0,16), got {text!r}")
    if typed in NOT_ARMS:
        raise SettingsError(f"--arms {typed}=...: the comparison sets {typed} itself; use {NOT_ARMS[typed]}")
    key = typed if typed in run_keys() else current_key(typed, "--arms")
    items = _top_level_items(values)
    if "" in items:
        raise SettingsError(f"--arms {text}: an empty value; write null for None")
    parsed = [parse_set([f"{key}={item}"])[key] for item in items]
    if len(items) < 2:
        raise SettingsError(f"--arms {text}: give at least 2 values to compare (--arms {key}=V1,V2)")
    return typed, key, items, parsed


def _top_level_items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes, each item stripped."""
    items, depth, quote, start = [], 0, None, 0
    for index, char in enumerate(text):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    return [item.strip() for item in [*items, text[start:]]]


def _file_stem(key: str, value: str) -> str:
    """``KEY-VALUE`` for a run's file name: the value as typed where it is short and file-safe, else its
    safe characters and a hash of it, so two values never share a name."""
    safe = _FILE_SAFE.sub("_", value)
    if safe != value or len(safe) > _MAX_VALUE_IN_NAME:
        safe = f"{safe[:_MAX_VALUE_IN_NAME]}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"
    return f"{key}-{safe}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--envs", nargs="+", default=[DEFAULT_ENV], help="gymnasium ids (default %(default)s)"
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        default=None,
        choices=COMPARE_MODES,
        help="replay modes, and freshper+backfill (FreshPER with --set replay_backfill=true), tested against "
        "FreshPER; default: the replay modes",
    )
    parser.add_argument(
        "--arms",
        action="append",
        default=None,
        metavar="KEY=V1,V2,...",
        help="compare these values of a DAPOConfig or run key instead of replay modes, each tested against "
        "the first (values as --set reads them), e.g. --arms lora_rank=0,16; repeat it to set several keys "
        "per arm, values paired by position (--arms lora_rank=0,16 --arms lr=2e-5,2e-4)",
    )
    parser.add_argument("--seeds", type=int, default=2, help="training seeds 0..n-1 per (env, arm)")
    add_aliases(parser, ("--tau",))
    parser.add_argument("--output", default=None, help="results folder (default results/compare-<time>)")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write the report of the runs already finished in --output and train nothing (the report of "
        "an interrupted comparison, headed by the runs still missing)",
    )
    add_workload_args(parser)
    args = parser.parse_args(argv)
    if args.report_only and args.output is None:
        parser.error("--report-only reads the runs of an earlier comparison: give its --output")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.arms is not None and args.modes is not None:
        parser.error(
            "--arms and --modes exclude each other: the replay modes are arms of replay_mode; drop --modes "
            "to compare --arms, or drop --arms to compare replay modes"
        )
    args.replay_arms = args.arms is None
    if args.replay_arms:
        args.arms = [mode_arm(mode) for mode in args.modes or REPLAY_MODES]
    else:
        try:
            args.arms = parse_arms(args.arms)
            given = parse_set(args.set)
        except SettingsError as error:
            parser.error(str(error))
        for key in set(args.arms[0].keys) & set(given):
            parser.error(f"--arms sets {key} in each arm; drop it from --set (or its alias, e.g. --tau)")
    args.reference = REFERENCE_MODE if args.replay_arms else args.arms[0].label
    configs = {}
    for env in args.envs:
        check_env_id(env)
        try:
            configs[env] = [build_config(run_settings(args, env, arm)) for arm in args.arms]
        except ValueError as error:
            raise SystemExit(f"{PROG}: {error}") from None
    args.run = workload_settings(PROG, args, env=args.envs[0])  # what every run shares
    args.config = build_config(args.run)
    # What the report's header states, which an arm may change: the first env's settings and config per arm.
    args.arm_runs = [run_settings(args, args.envs[0], arm) for arm in args.arms]
    args.arm_configs = configs[args.envs[0]]
    return args


def run_settings(args: argparse.Namespace, env: str, arm: Arm, seed: int = 0) -> RunSettings:
    """The settings of the run (env, arm, seed): the command line, then the arm's keys and the seed (the
    "entry point" layer), its DAPOConfig keys in the run's overrides and its run keys in their fields (both
    in what a resumed run must match)."""
    keys = {"seed": seed, **arm.keys}
    return workload_settings(PROG, args, env=env, overrides=keys, layer=f"entry point arm {arm.label}")


def run_path(output: Path, env: str, arm: Arm, seed: int) -> Path:
    """Where the run (env, arm, seed) is saved: its file under the arm's stem; a run saved before a key of
    the arm was renamed (``algorithms.dapo.config.RENAMED_KEYS``) is found under its former stem."""
    name = f"{env.split('/')[-1]}__{{}}__seed{seed}.json"
    path = output / "runs" / name.format(arm.file_stem)
    for old, new in RENAMED_KEYS.items():
        former = output / "runs" / name.format(arm.file_stem.replace(f"{new}-", f"{old}-"))
        if not path.exists() and former.exists():
            return former
    return path


def saved_settings(settings: RunSettings, config=None) -> dict[str, Any]:
    """What a saved run must share with the current command to be reused: its settings and the model
    actually used (the default model may change); without ``config`` (a report of saved runs), its settings
    alone."""
    model = {} if config is None else {"model_path": config.model_path}
    return json.loads(dumps({**settings.as_record(), **model}))


def load_finished(path: Path, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The saved run at ``path`` (None when absent); an error when it was made with other settings. Without
    ``model_path`` in ``settings`` (a report of saved runs, which never resolves, nor trains, a warm start)
    the run's model is not checked."""
    if not path.exists():
        return None
    run = json.loads(path.read_text())
    # Overrides saved under a key's former name (RENAMED_KEYS) are the same run.
    saved = dict(run["settings"])
    if "overrides" in saved:
        saved["overrides"] = {RENAMED_KEYS.get(key, key): value for key, value in saved["overrides"].items()}
    if "model_path" not in settings:
        saved = {key: value for key, value in saved.items() if key != "model_path"}
    if saved != settings:
        raise SystemExit(
            f"compare: {path} was run with {run['settings']}, not {settings}; use another --output"
        )
    if "arm" not in run:  # saved when the only arms were replay modes, which it named "mode"
        run["arm"] = run.pop("mode")
    return run


def curve_point(iteration: int, metrics: dict[str, Any]) -> dict[str, Any]:
    """One evaluation of a run's curve: its success and episodes, and every metric of it."""
    return {
        "iteration": iteration,
        "success": metrics["success"],
        "episodes": metrics["num_episodes"],
        "metrics": metrics,
    }


def train_and_evaluate(run: RunSettings, config, settings: dict[str, Any], arm: str) -> dict[str, Any]:
    """One run of ``config``: build, evaluate, train (evaluated inside training, with a progress bar: a
    SmolLM2 run takes a quarter of an hour), stop; with its wall time and this process's peak resident
    memory meanwhile (:class:`PeakRss`: remote Ray actors, ``num_env_runners > 0``, are other processes and
    not counted; None without ``/proc``)."""
    from models.progress import Progress

    started = time.perf_counter()
    commit, dirty = git_state()
    with PeakRss() as memory:
        algo = config.build_algo()
        try:
            curve = [curve_point(0, algo.evaluate_policy())]
            training = []
            label = f"{config.env.split('/')[-1]} {arm} seed {config.seed}"
            with Progress(range(1, run.iterations + 1), desc=label, unit="it") as bar:
                for iteration in bar:
                    result = algo.train()
                    if "evaluation" in result:
                        curve.append(curve_point(iteration, result["evaluation"]))
                        success = curve[-1]["success"]
                        bar.write(f"{label}, iteration {iteration}: validation success {success:.3f}")
                    training.append(
                        flatten({k: v for k, v in result.items() if k not in ("config", "evaluation")})
                    )
            if curve[-1]["iteration"] != run.iterations:  # the last iteration is off the evaluation interval
                curve.append(curve_point(run.iterations, algo.evaluate_policy()))
        finally:
            algo.stop()
    trained = [point["success"] for point in curve if point["iteration"] > 0]
    return {
        "env": config.env,
        "arm": arm,
        "seed": config.seed,
        "replay_mode": config.replay_mode,
        "tau": config.replay_tau,
        "age_unit": config.replay_age_unit,
        "settings": settings,
        "config_layers": explain_config(run, config),
        "curve": curve,
        "initial": curve[0]["success"],
        "peak": max(trained),
        "final": trained[-1],
        "training": training,
        "iterations_without_training": sum(trained_nothing(flat) for flat in training),
        "wall_s": time.perf_counter() - started,
        "peak_rss_gib": memory.peak_gib,
        "dtypes": dtype_record(config),
        # A comparison resumed in later sessions can gather runs made by different code: each says which.
        "commit": commit,
        "dirty": dirty,
    }


def save_run(path: Path, run: dict[str, Any]) -> None:
    """Write atomically, so an interrupted write never leaves a run that looks finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(dumps(run, indent=1))
    os.replace(partial, path)


# ---------------------------------------------------------------------------------------------------------
def aggregate(runs: list[dict[str, Any]], reference: str) -> dict[str, dict[str, dict[str, Any]]]:
    """{env: {arm: mean / std over seeds of peak, final and initial success, the mean curve, the replay
    metrics, the cost (wall time, peak memory) and, but for ``reference``, the test over seeds of
    ``reference`` against it (``vs_reference``: :func:`paired_seed_test`, with ``p_holm``, its p-value
    Holm-adjusted over every test of the table)}}."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for env in dict.fromkeys(run["env"] for run in runs):
        for arm in dict.fromkeys(run["arm"] for run in runs):
            cell = [run for run in runs if run["env"] == env and run["arm"] == arm]
            if not cell:
                continue
            iterations = [point["iteration"] for point in cell[0]["curve"]]
            curves = np.array([[point["success"] for point in run["curve"]] for run in cell])
            table.setdefault(env, {})[arm] = {
                "seeds": sorted(run["seed"] for run in cell),
                **{key: mean_over_seeds([run[key] for run in cell]) for key in ("peak", "final", "initial")},
                "curve": {
                    "iteration": iterations,
                    "mean": curves.mean(axis=0).tolist(),
                    "min": curves.min(axis=0).tolist(),
                    "max": curves.max(axis=0).tolist(),
                },
                "replay": {key: _run_mean(cell, key) for key in REPLAY_METRICS},
                "drift": drift(row for run in cell for row in run.get("training", [])),
                "cost": {key: _spread([run.get(key) for run in cell]) for key in ("wall_s", "peak_rss_gib")},
            }
        if reference in table.get(env, {}):
            cells = table[env]
            reference_runs = [run for run in runs if run["env"] == env and run["arm"] == reference]
            for arm in cells:
                if arm == reference:
                    continue
                other = [run for run in runs if run["env"] == env and run["arm"] == arm]
                cells[arm]["vs_reference"] = {
                    key: paired_seed_test(
                        {r["seed"]: r[key] for r in reference_runs}, {r["seed"]: r[key] for r in other}
                    )
                    for key in ("peak", "final")
                }
    # The report's table of tests is one family (Holm 1979): every arm, env and measure in it.
    family = [
        test
        for cells in table.values()
        for cell in cells.values()
        for test in cell.get("vs_reference", {}).values()
    ]
    for test, adjusted in zip(family, holm([test["p_value"] for test in family]), strict=True):
        test["p_holm"] = adjusted
    return table


# Replay metrics that show whether FreshPER acts (docs/design.md, section 7), averaged over a run's
# iterations, then over its seeds.
REPLAY_METRICS = (
    "replay/is_weight_mean",
    "replay/is_weight_min",
    "replay/success_fraction",
    "replay/batch_mean_age",
    "replay/oldest_decay",
    "replay/ess_fraction",
    "train/dual_clip_frac_replay",
)


def _run_mean(cell: list[dict[str, Any]], suffix: str) -> float | None:
    """Mean over seeds of each run's mean over iterations of the metric ending in ``suffix`` (None: never
    logged, e.g. replay metrics on-policy). An iteration that did not log it (NaN, null in a run loaded from
    disk) is skipped."""
    per_run = []
    for run in cell:
        values = [measured(flat, suffix) for flat in run.get("training", [])]
        values = [value for value in values if value is not None]
        if values:
            per_run.append(float(np.mean(values)))
    return float(np.mean(per_run)) if per_run else None


def _spread(values: list[float | None]) -> dict[str, Any] | None:
    """Mean, min and max of the measured values (None: not measured, e.g. peak memory without ``/proc`` or
    in a run saved before it was recorded), with how many runs were measured of how many; None if none."""
    known = [value for value in values if value is not None]
    if not known:
        return None
    return {
        "mean": float(np.mean(known)),
        "min": float(min(known)),
        "max": float(max(known)),
        "n": len(known),
        "of": len(values),
    }


def _commits_sentence(runs: list[dict[str, Any]]) -> str:
    """Which code made the runs, when a resumed comparison gathered runs from more than one commit, or any
    from uncommitted changes; empty otherwise. Runs saved before runs recorded their commit count as
    unknown."""
    made_by: dict[str, int] = {}
    for run in runs:
        commit, dirty = run.get("commit"), run.get("dirty")
        label = "unknown" if commit is None else commit[:7] + (" with uncommitted changes" if dirty else "")
        made_by[label] = made_by.get(label, 0) + 1
    commits = {run.get("commit") for run in runs}
    dirty = sum(bool(run.get("dirty")) for run in runs)
    if len(commits) > 1:
        counts = ", ".join(f"{count} at {label}" for label, count in made_by.items())
        return f" The runs were made by more than one commit: {counts}."
    if not dirty:
        return ""
    commit = (next(iter(commits)) or "unknown")[:7]
    which = "all of them" if dirty == len(runs) else f"{dirty} of the {len(runs)}"
    return (
        f" The runs were made at one commit, {commit}, {which} with uncommitted changes, which the commit "
        "alone does not reproduce."
    )


def markdown(
    args: argparse.Namespace,
    table: dict[str, Any],
    runs: list[dict[str, Any]],
    command: str,
    missing: list[tuple[str, Arm, int]] = (),
) -> str:
    arms = [arm for arm in args.arms if any(arm.label in cells for cells in table.values())]
    names = {arm.label: arm.name for arm in args.arms}
    noun = "mode" if args.replay_arms else "arm"
    wall = sum(run["wall_s"] for run in runs)
    models = ", ".join(
        sorted({run["settings"]["model_path"] or "the default model (model_path None)" for run in runs})
    )
    scales = _each(run.resolved_scale for run in args.arm_runs)
    intervals = _each(
        config.evaluation_interval or run.iterations
        for config, run in zip(args.arm_configs, args.arm_runs, strict=True)
    )
    lines = [
        f"# {' vs '.join(arm.name for arm in arms)} (DAPO, {scales} scale)",
        "",
        f"Command: `{command}`",
        "",
        *_missing_lines(missing, len(runs)),
        f"{_each(run.iterations for run in args.arm_runs)} DAPO iterations per run; seeds {args.seeds}; "
        f"validation success = mean success of "
        f"{_each(c.evaluation_samples_per_task for c in args.arm_configs)} episode(s) on each of "
        f"{_each(c.evaluation_num_tasks for c in args.arm_configs)} validation tasks, measured before "
        f"training and every {intervals} iteration(s). {_replay_sentence(args, runs)} Model: {models}. "
        f"Total run time {wall / 60:.1f} min." + _commits_sentence(runs),
        "",
        "## Peak validation success (mean ± 95% interval over seeds; std)",
        "",
        *_table(table, arms, "peak"),
        "",
        "## Final validation success (mean ± 95% interval over seeds; std)",
        "",
        *_table(table, arms, "final"),
        "",
        *_tests(table, arms, names.get(args.reference, args.reference), noun),
        *_replay_table(table, arms, noun),
        *learning_diagnostics.markdown_lines(learning_diagnostics.diagnostics(runs), names, noun),
        *_cost_table(table, arms, noun),
        *_initial_line(args, table, runs, arms),
        "",
        *_untrained_warning(runs, noun),
    ]
    if args.replay_arms:
        lines += _paper_table(table)
    return "\n".join(lines) + "\n"


def _missing_lines(missing: list[tuple[str, Arm, int]], done: int) -> list[str]:
    """What a partial report lacks: the runs not finished yet, seeds grouped per (env, arm)."""
    if not missing:
        return []
    seeds: dict[tuple[str, str], list[int]] = {}
    for env, arm, seed in missing:
        seeds.setdefault((env.split("/")[-1], arm.label), []).append(seed)
    listed = "; ".join(
        f"{env} {arm} seed{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))}"
        for (env, arm), ks in seeds.items()
    )
    return [
        f"**Partial: {done} of {done + len(missing)} runs finished.** Missing: {listed}. Every figure below "
        "is over the finished runs only (n in each cell); rerun the command to continue, finished runs are "
        "skipped.",
        "",
    ]


def _each(values: Any) -> str:
    """The distinct values, in order, joined by " / ": one where every arm shares it."""
    return " / ".join(str(value) for value in dict.fromkeys(values))


def _replay_sentence(args: argparse.Namespace, runs: list[dict[str, Any]]) -> str:
    """FreshPER's tau and its age unit; for generic arms, the replay modes the runs used too."""
    age_units = ", ".join(sorted({run.get("age_unit", "optimizer_steps") for run in runs}))
    if not args.replay_arms:
        modes = ", ".join(dict.fromkeys(run["replay_mode"] for run in runs))
        taus = ", ".join(f"{t:g}" for t in dict.fromkeys(run["tau"] for run in runs))
        return f"Replay mode {modes} (tau = {taus}, age in {age_units})."
    taus = sorted({run["tau"] for run in runs if run["arm"] in ("freshper", "freshper_poly")})
    return (
        f"FreshPER tau = {', '.join(f'{t:g}' for t in taus) or 'n/a'} (age in {age_units}). The FreshPER "
        "paper's reference code also counts ages in training iterations (a rollout batch and its update), "
        "with tau 500 (1000 on FrozenLake) over runs of thousands of iterations; docs/replay.md (FreshPER at "
        "the operating point, tau in the paper's units) compares the two operating points, and the replay "
        "table's tau_from_drift is the tau the paper's model (tau = 1/c) gives for these runs."
    )


def _initial_line(
    args: argparse.Namespace, table: dict[str, Any], runs: list[dict[str, Any]], arms: list[Arm]
) -> list[str]:
    """Validation success before training: per env for replay modes (one starting model), else per arm
    (an arm may change the starting model)."""
    if args.replay_arms:
        return [
            "Validation success before training (all modes start from the same model): "
            + ", ".join(
                f"{env.split('/')[-1]} {np.mean([run['initial'] for run in runs if run['env'] == env]):.3f}"
                for env in table
            )
        ]
    return [
        "Validation success before training (mean over seeds): "
        + "; ".join(
            f"{env.split('/')[-1]} "
            + ", ".join(
                f"{arm.name} {cells[arm.label]['initial']['mean']:.3f}" for arm in arms if arm.label in cells
            )
            for env, cells in table.items()
        )
    ]


def _paper_table(table: dict[str, Any]) -> list[str]:
    """FreshPER's Table 1 beside the replay modes' results, with the env closest to each task."""
    lines = [
        "## FreshPER paper, Table 1 (for reference only)",
        "",
        "Peak performance with Qwen2.5-3B/7B-class LLMs and VLMs, a REINFORCE++ backbone and thousands of "
        "training steps; ours are tiny CPU models trained with DAPO for a few iterations, so the numbers are "
        "not comparable in scale, only in layout. The paper reports score (return) for Sokoban and exact "
        "match for NQ Search; we report validation success for every env.",
        "",
        "| task | metric | on-policy | standard PER | FreshPER | our env |",
        "|---|---|---|---|---|---|",
    ]
    ours = {task: env for env, task in PAPER_TASK.items() if env in table}
    for task, (metric, on_policy, per, fresh) in PAPER_TABLE_1.items():
        lines.append(
            f"| {task} | {metric} | {on_policy:.3f} | {per:.3f} | {fresh:.3f} | {ours.get(task, '')} |"
        )
    return lines


def _untrained_warning(runs: list[dict[str, Any]], noun: str) -> list[str]:
    """A warning naming the runs in which most iterations trained nothing (0 informative groups)."""
    flagged = [
        f"{run['env'].split('/')[-1]} {run['arm']} seed {run['seed']}"
        for run in runs
        if run.get("iterations_without_training", 0) > MOSTLY_UNTRAINED_SHARE * len(run.get("training", []))
    ]
    if not flagged:
        return []
    return [
        f"**Warning:** most iterations trained nothing (0 informative groups) in: {', '.join(flagged)}. "
        f"Those runs measure the starting model, not the {'replay mode' if noun == 'mode' else noun}.",
        "",
    ]


def _table(table: dict[str, Any], arms: list[Arm], key: str) -> list[str]:
    rows = [
        "| task | " + " | ".join(arm.name for arm in arms) + " |",
        "|---" * (len(arms) + 1) + "|",
    ]
    for env, cells in table.items():
        values = []
        for arm in arms:
            stat = cells.get(arm.label, {}).get(key)
            values.append(
                ""
                if stat is None
                else f"{stat['mean']:.3f} ± {_number(stat['ci95'])} (std {stat['std']:.3f}, n={stat['n']})"
            )
        rows.append(f"| {env} | " + " | ".join(values) + " |")
    return rows


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _tests(table: dict[str, Any], arms: list[Arm], reference: str, noun: str) -> list[str]:
    """The reference arm against each other arm: difference, the test over seeds and its p-value, raw and
    Holm-adjusted over the table, and the difference the run could detect."""
    rows, names = [], []
    for env, cells in table.items():
        for arm in arms:
            test = cells.get(arm.label, {}).get("vs_reference")
            if test is None:
                continue
            for key in ("peak", "final"):
                t = test[key]
                names.append(t["test"])
                gain = cells[arm.label][key]["mean"] - cells[arm.label]["initial"]["mean"]
                effect = proportional_effect(env, arm.label, gain)
                rows.append(
                    f"| {env} | {arm.name} | {key} | {t['difference']:+.3f} | {t['test']} | "
                    f"{_number(t['p_value'])} | {_number(t['p_holm'])} | {_number(t['detectable'])} | "
                    f"{'-' if effect is None else f'{effect:+.3f}'} |"
                )
    if not rows:
        return []
    return [
        f"## {reference} against each {noun} ({' / '.join(dict.fromkeys(names))} over seeds)",
        "",
        f"Difference = {reference} minus the {noun}; the unit is the seed (one value per run). The paired "
        "t-test pairs the two runs of each seed where both ran the same seeds; Welch's t-test compares the "
        "two sets of runs otherwise. Holm p = the p-value adjusted over every test of this table (Holm's "
        "step-down). Detectable = the smallest difference this many seeds would detect at alpha 0.05 with "
        "80% power, given the spread measured here: a difference below it is not separated. Paper's effect = "
        "the difference FreshPER would make over that arm if it helped as in FreshPER's Table 1, in "
        "proportion: the paper's relative gain over the arm times the arm's own gain over the start here "
        "(- where the paper has no such task or reports a score); set it beside the detectable difference.",
        "",
        f"| task | {noun} | success | difference | test | p-value | Holm p | detectable | paper's effect |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def _replay_table(table: dict[str, Any], arms: list[Arm], noun: str) -> list[str]:
    """The replay batches at the operating point: importance weights, success share, ages, decay."""
    replaying = [
        arm
        for arm in arms
        if any(c.get(arm.label, {}).get("replay", {}).get(REPLAY_METRICS[0]) for c in table.values())
    ]
    if not replaying:
        return []
    rows = [
        "## Replay batches (mean over iterations, then seeds)",
        "",
        "kl_per_age: the per-token KL of a replay batch above the fresh batch's, per iteration of age (the "
        "slope over every seed's iterations, experiments/common/replay_drift.py); tau_from_drift = its "
        "inverse, the decay constant FreshPER's model (Eq. 12-13: KL ~ c x age, tau = 1/c) gives at this "
        'operating point, to set beside the tau the run used (docs/replay.md, "tau in the paper\'s units").',
        "",
        f"| task | {noun} | "
        + " | ".join(key.split("/")[-1] for key in REPLAY_METRICS)
        + " | kl_per_age | tau_from_drift |",
        "|---|---|" + "---|" * (len(REPLAY_METRICS) + 2),
    ]
    for env, cells in table.items():
        for arm in replaying:
            cell = cells.get(arm.label, {})
            values, fitted = cell.get("replay", {}), cell.get("drift") or {}
            shown = [_number(values.get(k)) for k in REPLAY_METRICS]
            shown += [_number(fitted.get("kl_per_age")), _number(fitted.get("tau"))]
            rows.append(f"| {env} | {arm.name} | " + " | ".join(shown) + " |")
    return [*rows, ""]


def _cost_table(table: dict[str, Any], arms: list[Arm], noun: str) -> list[str]:
    """Wall minutes and peak resident memory per run, mean over seeds with the range."""
    rows = [
        f"## Cost per {noun} (mean over seeds; range)",
        "",
        "Wall time: the run from building its algorithm to stopping it, evaluations included. Peak RSS: this "
        f"process's resident memory sampled every {SAMPLE_INTERVAL_S:g} s during the run "
        "(experiments/common/peak_memory.py); Ray actors (num_env_runners > 0) are other processes and not "
        "counted; n/a where it was not measured (no /proc on the machine, or a run saved before runs "
        "recorded it).",
        "",
        f"| task | {noun} | wall min per run | peak RSS GiB |",
        "|---|---|---|---|",
    ]
    for env, cells in table.items():
        for arm in arms:
            cost = cells.get(arm.label, {}).get("cost")
            if cost is not None:
                wall, peak = cost["wall_s"], cost["peak_rss_gib"]
                rows.append(f"| {env} | {arm.name} | {_range(wall, 1 / 60, 1)} | {_range(peak, 1, 2)} |")
    return [*rows, ""]


def _range(spread: dict[str, Any] | None, scale: float, digits: int) -> str:
    """ "mean (min-max)" of a :func:`_spread` in ``scale`` units, and how many runs were measured where not
    all were; n/a for None."""
    if spread is None:
        return "n/a"
    mean, low, high = (spread[key] * scale for key in ("mean", "min", "max"))
    partial = "" if spread["n"] == spread["of"] else f", {spread['n']} of {spread['of']} runs"
    return f"{mean:.{digits}f} ({low:.{digits}f}-{high:.{digits}f}{partial})"


def plot_curves(table: dict[str, Any], output: Path, names: dict[str, str]) -> list[Path]:
    """One PNG per env: validation success over iterations, mean per arm (``names``: its legend entry) and
    the range over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.common.plots import style_iteration_axis

    paths = []
    for env, cells in table.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for arm, cell in cells.items():
            curve = cell["curve"]
            (line,) = ax.plot(
                curve["iteration"], curve["mean"], marker="o", markersize=3, label=names.get(arm, arm)
            )
            ax.fill_between(
                curve["iteration"], curve["min"], curve["max"], color=line.get_color(), alpha=0.15
            )
        ax.set_title(f"{env}: validation success\n(mean over seeds; band: range over seeds)", fontsize=10)
        style_iteration_axis(ax, "validation success")
        ax.set_ylim(-0.02, 1.02)
        fig.tight_layout()
        path = output / f"curves-{env.split('/')[-1]}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> dict[str, Any]:
    from experiments.common.quiet_logs import LOG_FILE_NAME, install, worker_runtime_env

    args = parse_args(argv)
    arguments = list(sys.argv[1:] if argv is None else argv)
    # The report names the command that trains its runs; one written with --report-only says so.
    record = provenance(PROG, [argument for argument in arguments if argument != "--report-only"])
    record["report_only"] = args.report_only
    output = Path(args.output or f"results/compare-{time.strftime('%Y%m%d-%H%M%S')}")
    log_file = None if args.report_only else install(output / LOG_FILE_NAME)
    jobs = [(env, arm, seed) for seed in range(args.seeds) for env in args.envs for arm in args.arms]
    # Every saved run is loaded (and its settings checked) before anything trains, so a mismatch is an error
    # at once, not hours in, and each report covers every finished run.
    finished: dict[int, dict[str, Any]] = {}
    pending, skipped = [], []
    for index, (env, arm, seed) in enumerate(jobs):
        run_of = run_settings(args, env, arm, seed)
        config = None if args.report_only else workload_config(run_of, PROG)
        settings = saved_settings(run_of, config)
        path = run_path(output, env, arm, seed)
        run = load_finished(path, settings)
        if run is None:
            pending.append((index, path, run_of, config, settings))
        else:
            finished[index] = run
            skipped.append(path)
            _print_run(index, jobs, run, "already done, skipped")
    if args.report_only and not finished:
        raise SystemExit(
            f"{PROG}: --report-only found no finished run of this comparison in {output / 'runs'}; give the "
            "--output and the options of the comparison that wrote it"
        )
    ran = []
    report = None
    if not args.report_only:
        for index, path, run_of, config, settings in pending:
            start_ray(runtime_env=worker_runtime_env(log_file))
            finished[index] = train_and_evaluate(run_of, config, settings, jobs[index][1].label)
            save_run(path, finished[index])
            ran.append(path)
            _print_run(index, jobs, finished[index], "done")
            report = write_report(args, output, jobs, finished, record)
    text, table = report or write_report(args, output, jobs, finished, record)
    print(text)
    print(f"wrote {output / 'comparison.md'}, {output / 'results.json'} and the plots")
    return {"output": output, "ran": ran, "skipped": skipped, "aggregate": table}


def _print_run(index: int, jobs: list[tuple[str, Arm, int]], run: dict[str, Any], status: str) -> None:
    env, arm, seed = jobs[index]
    peak = run.get("peak_rss_gib")
    memory = "peak RSS not measured" if peak is None else f"peak RSS {peak:.2f} GiB"
    print(
        f"[{index + 1}/{len(jobs)}] {env} {arm.label} seed {seed}: peak {run['peak']:.3f}, "
        f"final {run['final']:.3f} ({status}, {run['wall_s']:.0f} s, {memory})"
    )


def write_report(
    args: argparse.Namespace,
    output: Path,
    jobs: list[tuple[str, Arm, int]],
    finished: dict[int, dict[str, Any]],
    record: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """``comparison.md``, the plots and ``results.json`` of the finished runs (``finished``: job index ->
    run), headed by the runs still missing when some are; returns the report's text and the aggregate."""
    output.mkdir(parents=True, exist_ok=True)
    runs = [finished[index] for index in sorted(finished)]
    missing = [jobs[index] for index in range(len(jobs)) if index not in finished]
    table = aggregate(runs, args.reference)
    text = markdown(args, table, runs, record["command"], missing=missing)
    (output / "comparison.md").write_text(text)
    names = {arm.label: arm.name for arm in args.arms}
    if runs:
        plot_curves(table, output, names)
        learning_diagnostics.plot(runs, output, names)
    results = {
        "provenance": record,
        "arms": [arm.label for arm in args.arms],
        "reference": args.reference,
        "envs": args.envs,
        "planned_runs": len(jobs),
        "missing": [{"env": env, "arm": arm.label, "seed": seed} for env, arm, seed in missing],
        "aggregate": table,
        "diagnostics": learning_diagnostics.diagnostics(runs),
        "runs": runs,
    }
    (output / "results.json").write_text(dumps(results, indent=1))
    return text, table


if __name__ == "__main__":
    main()
