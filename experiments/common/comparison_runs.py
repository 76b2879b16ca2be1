"""The runs of a comparison (``experiments.compare``): one per (env, arm, seed), each trained in this process
(:func:`train_and_evaluate`: build, evaluate, train with evaluations inside training, stop) and saved as one
JSON file under ``<output>/runs``. A saved run is reused when the command is run again with the same settings
(:func:`load_finished`), so an interrupted comparison resumes where it stopped: :func:`load_comparison` loads
every saved run before anything trains, :func:`train_missing` trains the others in turn."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from algorithms.dapo.config import RENAMED_KEYS
from experiments.common.comparison_arms import Arm
from experiments.common.peak_memory import PeakRss
from experiments.common.ray_session import start_ray
from experiments.common.results_json import dtype_record, dumps, git_state, machine
from experiments.common.run_config import RunSettings, explain_config
from experiments.common.run_loop import train_iterations
from experiments.common.workload import workload_config, workload_settings

if TYPE_CHECKING:
    from tqdm import tqdm

    from algorithms.dapo import DAPOConfig

PROG = "python -m experiments.compare"  # the command whose runs these are, named in their messages
Job = tuple[str, Arm, int]  # a planned run: (env, arm, seed)


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


def saved_settings(settings: RunSettings, config: DAPOConfig | None = None) -> dict[str, Any]:
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
    # A settings field added since the run was saved, at its default, is the same run.
    defaults = json.loads(dumps(RunSettings().as_record()))
    saved.update({key: defaults[key] for key in settings.keys() - saved.keys() if key in defaults})
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


def train_and_evaluate(
    run: RunSettings, config: DAPOConfig, settings: dict[str, Any], arm: str
) -> dict[str, Any]:
    """One run of ``config``: build, evaluate, train (evaluated inside training, with a progress bar: a
    SmolLM2 run takes a quarter of an hour), stop; with its wall time and this process's peak resident
    memory meanwhile (:class:`PeakRss`: remote Ray actors, ``num_env_runners > 0``, are other processes and
    not counted; None without ``/proc``)."""
    started = time.perf_counter()
    commit, dirty = git_state()
    label = f"{config.env.split('/')[-1]} {arm} seed {config.seed}"

    def report_evaluation(iteration: int, metrics: dict[str, Any], bar: tqdm | None) -> None:
        if iteration:  # before training, the bar is not open yet
            bar.write(f"{label}, iteration {iteration}: validation success {metrics['success']:.3f}")

    with PeakRss() as memory:
        algo = config.build_algo()
        try:
            trained_run = train_iterations(algo, run.iterations, label, on_evaluation=report_evaluation)
        finally:
            algo.stop()
    curve = [curve_point(iteration, metrics) for iteration, metrics in trained_run.evaluations.items()]
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
        "training": trained_run.rows,
        "iterations_without_training": trained_run.untrained,
        "wall_s": time.perf_counter() - started,
        "peak_rss_gib": memory.peak_gib,
        "dtypes": dtype_record(config),
        # A comparison resumed in later sessions can gather runs made by different code: each says which.
        "commit": commit,
        "dirty": dirty,
        "machine": machine(),
    }


def save_run(path: Path, run: dict[str, Any]) -> None:
    """Write atomically, so an interrupted write never leaves a run that looks finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(dumps(run, indent=1))
    os.replace(partial, path)


@dataclass
class Comparison:
    """The runs of one comparison: every planned job, in the order they run; the finished runs, by job index;
    the jobs still to train (job index, file, settings, config, what its saved file must match); and the
    files of the runs trained now (``ran``) and of those loaded from an earlier command (``skipped``)."""

    jobs: list[Job]
    finished: dict[int, dict[str, Any]] = field(default_factory=dict)
    pending: list[tuple[int, Path, RunSettings, DAPOConfig | None, dict[str, Any]]] = field(
        default_factory=list
    )
    ran: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


def load_comparison(args: argparse.Namespace, output: Path) -> Comparison:
    """Every (env, arm, seed) of the command, seed by seed, and the saved runs of ``output`` among them (each
    printed). All are loaded and their settings checked before anything trains, so a mismatch is an error at
    once, not hours in, and each report covers every finished run. With ``--report-only``, an error when
    there is no saved run; no starting model is resolved then."""
    jobs = [(env, arm, seed) for seed in range(args.seeds) for env in args.envs for arm in args.arms]
    comparison = Comparison(jobs)
    for index, (env, arm, seed) in enumerate(jobs):
        run_of = run_settings(args, env, arm, seed)
        config = None if args.report_only else workload_config(run_of, PROG)
        settings = saved_settings(run_of, config)
        path = run_path(output, env, arm, seed)
        run = load_finished(path, settings)
        if run is None:
            comparison.pending.append((index, path, run_of, config, settings))
        else:
            comparison.finished[index] = run
            comparison.skipped.append(path)
            _print_run(index, jobs, run, "already done, skipped")
    if args.report_only and not comparison.finished:
        raise SystemExit(
            f"{PROG}: --report-only found no finished run of this comparison in {output / 'runs'}; give the "
            "--output and the options of the comparison that wrote it"
        )
    return comparison


def train_missing(comparison: Comparison, log_file: Path | None) -> Iterator[Path]:
    """Trains the comparison's pending runs in turn, each saved as it ends, and yields its file, so that the
    caller writes the report of the finished runs after each."""
    from experiments.common.quiet_logs import worker_runtime_env

    for index, path, run_of, config, settings in comparison.pending:
        start_ray(runtime_env=worker_runtime_env(log_file))
        run = train_and_evaluate(run_of, config, settings, comparison.jobs[index][1].label)
        comparison.finished[index] = run
        save_run(path, run)
        comparison.ran.append(path)
        _print_run(index, comparison.jobs, run, "done")
        yield path


def _print_run(index: int, jobs: list[Job], run: dict[str, Any], status: str) -> None:
    env, arm, seed = jobs[index]
    peak = run.get("peak_rss_gib")
    memory = "peak RSS not measured" if peak is None else f"peak RSS {peak:.2f} GiB"
    print(
        f"[{index + 1}/{len(jobs)}] {env} {arm.label} seed {seed}: peak {run['peak']:.3f}, "
        f"final {run['final']:.3f} ({status}, {run['wall_s']:.0f} s, {memory})"
    )
