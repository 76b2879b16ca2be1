"""Ray Tune sweep over FreshPER's ``tau`` and DAPO's ``eps_high``: ``python -m experiments.sweep``.

Each trial is one DAPO run with the configuration of ``experiments.common.run_config.build_config``: the env's
settings file (``--settings`` names another), the options (``--model``, by default the tiny model
warm-started on the env; ``--algorithm``, ``--scale``, ``--set key=value``, the workload options), the
replay mode, for ``--iterations`` training iterations. The trial is evaluated inside training by DAPO's own
evaluation (RLlib's ``evaluation_interval`` = ``--eval-every``: one episode on each of the first
``--eval-tasks`` tasks of the validation split, ``DAPO.evaluate_policy``). Every result carries the latest
evaluation under ``evaluation/`` (``evaluation/success``, its 95% interval, pass@k, ...;
``evaluation/iteration`` says after which iteration it was measured): the starting policy is evaluated
before training (the first result carries it as ``evaluation_start`` and, unless RLlib evaluated after
iteration 1, as the latest evaluation) and the last result is evaluated where RLlib's interval skips it
(:class:`CarryEvaluation`), so the metric is present in every result that Tune's searchers and schedulers
see, which Tune requires of a searcher's metric, and a trial's final success is its trained policy's.

Without ``--settings``, a trial runs 3 iterations evaluated every iteration on 16 tasks (the env's settings
file with ``experiments/settings/quick/sweep_and_compare.yaml`` on top).

Search: ``--search-alg grid`` (default) crosses the ``--tau`` and ``--eps-high`` lists, and with ``--seeds N``
the seeds ``--seed`` .. ``--seed + N - 1``, with ``tune.grid_search`` (``--num-samples`` repeats the grid at
the same seeds). ``--tau inf`` is the point without age decay (standard PER's priorities). Any other name is
one of Tune's searchers (``random`` = Tune's ``BasicVariantGenerator`` drawing from the lists, ``optuna``,
``hyperopt``, ...) over ``tune.choice`` of the same lists, ``--num-samples`` trials (default 4). Trials run
one at a time unless ``--max-concurrent`` says otherwise (on a cluster: docs/scaling.md).

Output: Tune's own results folder ``<--storage-path>/<--name>`` (per trial: ``result.json``, ``progress.csv``,
TensorBoard event files) and ``summary.md`` / ``summary.json`` there: the grid points' area under the
held-out success curve against training episodes over one episode budget (AUC, the replay study's primary
metric), final and peak validation success, mean over their seeds with 95% t intervals, the clip fractions
and the measured drift, and the best point by AUC; every trial's settings, curve, peak and final validation
success, and Tune's best configuration by peak validation success (ties go to the lowest trial id); with more
than one point, ``success-vs-tau.png``: the AUC against tau, one line per eps_high
(experiments/common/sweep_points.py). ``tensorboard --logdir <--storage-path>`` shows the curves.

Checkpoints (experiments/common/sweep_checkpoints.py): a trial checkpoints after every iteration and its
checkpoint is deleted when it finishes; ``--keep-checkpoints`` keeps the best finished trial's. Unfinished and
errored trials keep theirs. The summary names the checkpoint kept. Before training, the sweep checks that the
disk of ``--storage-path`` has room for the checkpoints that can exist at once
(experiments/common/disk_space.py); a disk that fills up anyway ends the sweep with the summary of the trials
finished so far.

``--resume --name <name>`` continues an interrupted sweep with Tune's own restore: finished trials are kept,
unfinished ones continue from their latest checkpoint (read first: an unreadable file is named), errored ones
start again (their old checkpoints, which nothing resumes from, are deleted). Tune keeps the original search
space, stopping rule and checkpoint policy; give the same options as the first command so that the summary's
header describes it. ``--report-only --name <name>`` (the same options again)
writes the summary of a stopped sweep from Tune's folder without training: a summary with fewer finished
trials than the grid plans is headed "Partial: k of n trials finished" and names the missing ones
(``summary.json``: ``planned_trials``, ``missing``); only finished trials count in the grid points. Each
trial's wall time is in the summary (minutes per trial, and per point).

Schedulers, for bigger budgets (``--scheduler``; the default ``fifo`` runs every trial to its last iteration):
``asha`` stops the trials whose ``evaluation/success`` is below the top quarter's at ASHA's rungs, the first
after ``--grace-period`` iterations (default a quarter of ``--iterations``; a rung compares the latest
evaluations, so a grace period that is a multiple of ``--eval-every`` compares policies trained that long).
``pbt`` (synchronous Population Based Training; ``--search-alg grid`` or ``random``): every
``--perturbation-interval`` iterations (default ``--eval-every``) the lowest quarter of the trials continue
from the top quarter's checkpoints and settings, eps_high moved over the ``--eps-high`` values. Tau is copied,
never explored: a checkpoint's FreshPER buffer loads under its own tau only. Under PBT all trials are held at
once (``--max-concurrent`` does not apply: as many run as their resources fit, the others wait paused), they
checkpoint at those points only, and the summary shows each trial's last settings. ``--min-entropy X`` (any
scheduler) stops a trial whose token entropy (``learners/train/entropy``) was below X in
``--entropy-patience`` (default 3) consecutive iterations that trained
(experiments/common/entropy_stopper.py). The summary marks a trial stopped early ``stopped``, with the reason:
it is not missing, and only trials that ran all their iterations compete for the best.

The trainable is plain ``DAPO``; ``tune.Tuner(DAPO, param_space=config)`` works with any DAPOConfig.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.rllib.callbacks.callbacks import RLlibCallback

from algorithms.dapo import DAPO, DAPOConfig
from experiments.common import disk_space, replay_auc, replay_drift, sweep_points
from experiments.common.checkpoints import check_restorable
from experiments.common.entropy_stopper import ENTROPY_KEY, STOPPED_EARLY_KEY, EntropyCollapseStopper
from experiments.common.pbt_checkpoints import KeepCheckpointsToRestore
from experiments.common.ray_session import start_ray
from experiments.common.results_json import provenance, write_json
from experiments.common.run_config import RunSettings, build_config, explain_config
from experiments.common.run_loop import mostly_untrained, rllib_evaluation
from experiments.common.run_options import add_aliases, add_settings_option, check_env_id
from experiments.common.sweep_checkpoints import (
    VALIDATION_METRIC,
    DropFinishedCheckpoints,
    StopWhenDiskFull,
    best_row,
    drop_checkpoints,
    trial_checkpoints,
)
from experiments.common.sweep_points import tau_label
from experiments.common.training_metrics import measured
from experiments.common.workload import add_workload_args, workload_config, workload_settings

if TYPE_CHECKING:
    from ray.tune import CheckpointConfig, Stopper
    from ray.tune.schedulers import TrialScheduler

PROG = "python -m experiments.sweep"
PLOT_NAME = "success-vs-tau.png"
DEFAULT_TAUS = [50.0, 500.0]
DEFAULT_EPS_HIGH = [0.2, 0.28]
SCHEDULERS = ("fifo", "asha", "pbt")
DEFAULT_ENTROPY_PATIENCE = 3
# PBT runs synchronously: at each perturbation point every trial is paused (a checkpoint) and the lowest
# quarter take the top quarter's latest checkpoints, to restore when they next start. A donor writes at most
# two more (its pause there, where PBT saved it just before; its next pause or its last) before it waits for
# all the others again or finishes (experiments/common/pbt_checkpoints.py), so keeping 3 deletes none that a
# clone has yet to restore.
PBT_CHECKPOINTS_KEPT = 3
# A trial's status in the summary once Tune is done with it: it ran all its iterations, or was stopped early.
DONE = ("ok", "stopped")
# Modes whose sampling depends on tau: a tau sweep is meaningless for the others.
TAU_MODES = ("freshper", "freshper_poly")
# Tune searchers backed by optional packages: searcher name -> modules it imports (pip names in the error).
SEARCHER_PACKAGES: dict[str, dict[str, str]] = {
    "optuna": {"optuna": "optuna"},
    "hyperopt": {"hyperopt": "hyperopt"},
    "bayesopt": {"bayes_opt": "bayesian-optimization"},
    "ax": {"ax": "ax-platform"},
    "nevergrad": {"nevergrad": "nevergrad"},
    "zoopt": {"zoopt": "zoopt"},
    "hebo": {"hebo": "HEBO"},
    "bohb": {"hpbandster": "hpbandster", "ConfigSpace": "ConfigSpace"},
}


class CarryEvaluation(RLlibCallback):
    """Every training result carries the latest evaluation (``result["evaluation"]``, plus the
    ``iteration`` it was measured after): RLlib evaluates every ``evaluation_interval`` iterations only, and
    Tune needs a searcher's metric in every result. It is the evaluation rule of
    ``experiments.common.run_loop``, applied result by result (Tune runs the loop here): with
    ``evaluate_start``, the starting policy is evaluated as the algorithm is built and a fresh trial's first
    result carries it (``result["evaluation_start"]``, iteration 0, and as the latest evaluation where RLlib
    did not evaluate after iteration 1), the start of the curve whose area is the sweep's primary metric.
    Where nothing else is known, the first result of a trial (a restored one, or without
    ``evaluate_start``) is evaluated, and the result of ``final_iteration`` is evaluated where RLlib's
    interval skips it, so that a trial's last result holds the trained policy's success (None: no final
    evaluation)."""

    def __init__(self, final_iteration: int | None = None, evaluate_start: bool = False) -> None:
        super().__init__()
        self.final_iteration = final_iteration
        self.evaluate_start = evaluate_start
        self._start: dict[str, Any] | None = None
        self._latest: dict[str, Any] | None = None

    def on_algorithm_init(self, *, algorithm, **kwargs) -> None:
        # Tune restores a checkpoint after the algorithm is built, so a restored trial measures its start
        # here too; its first result is past iteration 1 and drops it.
        if self.evaluate_start and algorithm.iteration == 0:
            self._start = {**algorithm.evaluate_policy(), "iteration": 0}

    def on_train_result(self, *, algorithm, result: dict, **kwargs) -> None:
        # Trainable.train() has counted this iteration: algorithm.iteration is the one just trained.
        iteration = algorithm.iteration
        if self._start is not None:
            if iteration == 1:
                result["evaluation_start"] = dict(self._start)
                self._latest = self._start
            self._start = None
        evaluation = rllib_evaluation(result)
        if evaluation is None and (self._latest is None or iteration == self.final_iteration):
            evaluation = algorithm.evaluate_policy()
        if evaluation is not None:
            self._latest = {**evaluation, "iteration": iteration}
        result["evaluation"] = dict(self._latest)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    add_settings_option(parser)
    parser.add_argument("--env", default=None, help="registered gymnasium id (default: the settings file's)")
    add_aliases(parser, ("--replay", "--seed"))
    parser.add_argument(
        "--tau",
        type=float,
        nargs="+",
        default=DEFAULT_TAUS,
        help="values of tau (inf: no decay, PER's priorities)",
    )
    parser.add_argument(
        "--eps-high", type=float, nargs="+", default=DEFAULT_EPS_HIGH, help="values of eps_high"
    )
    parser.add_argument(
        "--search-alg", default="grid", help="grid, random, or a Tune searcher name (optuna, hyperopt, ...)"
    )
    parser.add_argument("--num-samples", type=int, default=None, help="grid repeats, or trials (default 4)")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="training seeds per grid point: --seed, --seed + 1, ... (grid search only; default 1)",
    )
    parser.add_argument(
        "--max-concurrent", type=int, default=1, help="trials at once (each needs its own resources)"
    )
    parser.add_argument("--storage-path", default="results/sweeps", help="Tune's results root")
    parser.add_argument("--name", default=None, help="experiment folder (default sweep-<env>-<time>)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted sweep --name (same options as the first command)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write the summary of the sweep --name from its finished trials, training nothing",
    )
    parser.add_argument(
        "--keep-checkpoints",
        action="store_true",
        help="keep the best finished trial's checkpoint (by default a trial's is deleted when it finishes)",
    )
    parser.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default="fifo",
        help="Tune's trial scheduler: fifo (all iterations), asha (stops the worst trials at its rungs), pbt "
        "(population based training over --eps-high)",
    )
    parser.add_argument(
        "--grace-period",
        type=int,
        default=None,
        help="asha: iterations before its first rung (default --iterations // 4, at least 1)",
    )
    parser.add_argument(
        "--perturbation-interval",
        type=int,
        default=None,
        help="pbt: iterations between its exploit/explore steps (default --eval-every)",
    )
    parser.add_argument(
        "--min-entropy",
        type=float,
        default=None,
        help="stop a trial whose token entropy stays below this (default: off)",
    )
    parser.add_argument(
        "--entropy-patience",
        type=int,
        default=None,
        help="consecutive iterations below --min-entropy that stop a trial "
        f"(default {DEFAULT_ENTROPY_PATIENCE})",
    )
    add_workload_args(parser)
    args = parser.parse_args(argv)
    for flag, wanted in (("--resume", args.resume), ("--report-only", args.report_only)):
        if wanted and not args.name:
            parser.error(f"{flag} needs the --name of an earlier sweep")
    if args.resume and args.report_only:
        parser.error("--resume trains and then writes the summary; --report-only writes it without training")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.seeds > 1 and args.search_alg != "grid":
        parser.error(
            f"--seeds {args.seeds} crosses the grid with seeds; with --search-alg {args.search_alg} give "
            "--num-samples instead (each trial then draws its point, at the one --seed)"
        )
    swept = {"tau", "replay_tau", "eps_high"} & {item.partition("=")[0].strip() for item in args.set}
    if swept:
        raise SystemExit(
            f"{PROG}: --set {', '.join(sorted(swept))}: the sweep sets it; give its values to --tau / "
            "--eps-high"
        )
    args.run = workload_settings(PROG, args, env=args.env)
    check_env_id(args.run.env)
    try:
        args.config = build_config(args.run)
    except ValueError as error:
        raise SystemExit(f"{PROG}: {error}") from None
    check_scheduler_options(parser, args)
    return args


def check_scheduler_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Parser errors, naming the fix, for options of another scheduler or out of range; fills in the defaults
    of the chosen scheduler's options (they depend on --iterations and --eval-every)."""
    iterations = args.run.iterations
    for flag, value, owner in (
        ("--grace-period", args.grace_period, "asha"),
        ("--perturbation-interval", args.perturbation_interval, "pbt"),
    ):
        if value is not None and args.scheduler != owner:
            parser.error(
                f"{flag} is a setting of --scheduler {owner}: add --scheduler {owner}, or leave it out"
            )
    if args.min_entropy is not None and not args.min_entropy > 0:
        parser.error(
            f"--min-entropy must be > 0 (leave it out to turn early stopping off), got {args.min_entropy}"
        )
    if args.entropy_patience is not None and args.min_entropy is None:
        parser.error("--entropy-patience counts iterations below --min-entropy: give --min-entropy too")
    if args.entropy_patience is None:
        args.entropy_patience = DEFAULT_ENTROPY_PATIENCE
    if args.entropy_patience < 1:
        parser.error(f"--entropy-patience must be >= 1, got {args.entropy_patience}")
    if args.scheduler == "asha":
        if args.grace_period is None:
            args.grace_period = max(1, iterations // 4)
        if not 1 <= args.grace_period <= iterations:
            parser.error(
                f"--grace-period must be between 1 and --iterations ({iterations}), got {args.grace_period}"
            )
    if args.scheduler == "pbt":
        check_pbt_options(parser, args)


def check_pbt_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """check_scheduler_options for ``--scheduler pbt``; fills in the default --perturbation-interval."""
    if args.search_alg not in ("grid", "random"):
        parser.error(
            f"--scheduler pbt chooses the next settings itself, and Tune refuses a searcher beside it: give "
            f"--search-alg grid or random, not {args.search_alg}"
        )
    if len(set(args.eps_high)) < 2:
        parser.error("--scheduler pbt explores eps_high over the --eps-high values: give at least two")
    if trial_count(args) < 2:
        parser.error("--scheduler pbt needs a population of at least 2 trials: raise --num-samples")
    given = args.perturbation_interval is not None
    interval = args.perturbation_interval if given else args.config.evaluation_interval
    if not given and not interval:  # None or 0: RLlib never evaluates inside train()
        parser.error(
            "--scheduler pbt compares the trials' latest evaluation/success, measured every --eval-every "
            "iterations: give --eval-every (the default --perturbation-interval) or --perturbation-interval"
        )
    if not 1 <= interval < args.run.iterations:
        flag = "--perturbation-interval" if given else "--eval-every (the default interval)"
        parser.error(
            f"{flag} {interval}: PBT's interval must be between 1 and --iterations - 1 "
            f"({args.run.iterations - 1}), or it never perturbs; give --perturbation-interval or more "
            "--iterations"
        )
    args.perturbation_interval = interval


def search_space(args: argparse.Namespace) -> tuple[DAPOConfig, Any, int]:
    """(param_space config, Tune search algorithm or None, num_samples) for the chosen search."""
    from ray import tune

    # A partial, not a class attribute: Tune rebuilds the config in each trial's process. PBT restarts its
    # trials from others' checkpoints with moved settings, so its trials have no curve of their own to
    # measure from the start.
    config = workload_config(args.run, PROG).callbacks(
        functools.partial(
            CarryEvaluation, final_iteration=args.run.iterations, evaluate_start=args.scheduler != "pbt"
        )
    )
    taus = swept_taus(args)
    if len(taus) < len(args.tau):
        print(f"sweep: tau has no effect with --replay {config.replay_mode}; sweeping eps_high only")
    if args.search_alg == "grid":
        domain, searcher, samples = tune.grid_search, None, args.num_samples or 1
    else:
        domain, searcher, samples = (
            tune.choice,
            make_searcher(args.search_alg, config.seed),
            args.num_samples or 4,
        )
    grid = {
        key: tune.grid_search(values) if key == "seed" else domain(values)
        for key, values in swept_keys(args).items()
    }
    config.set_keys(grid, "tune grid")
    return config, searcher, samples


def swept_keys(args: argparse.Namespace) -> dict[str, list[Any]]:
    """The DAPOConfig keys the sweep sets (the "tune grid" layer) -> the values it tries; seeds are crossed
    with the grid."""
    keys: dict[str, list[Any]] = {"eps_high": args.eps_high, "replay_tau": swept_taus(args)}
    if args.seeds > 1:
        keys["seed"] = swept_seeds(args)
    return keys


def scheduler_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The arguments of the Tune scheduler of ``--scheduler`` (none for fifo); the summary records them."""
    if args.scheduler == "fifo":
        return {}
    # The metric goes to the scheduler, not to TuneConfig (see run_sweep); CarryEvaluation puts it in every
    # result, which Tune requires of a scheduler's metric.
    common = {"metric": VALIDATION_METRIC, "mode": "max", "time_attr": "training_iteration"}
    if args.scheduler == "asha":
        return {**common, "max_t": args.run.iterations, "grace_period": args.grace_period}
    return {
        **common,
        "perturbation_interval": args.perturbation_interval,
        # eps_high only: a clone's replay buffer is the donor's, prioritised under the donor's tau, and
        # PrioritizedReplayBuffer.load_state_dict refuses it under another tau (the module docstring).
        "hyperparam_mutations": {"eps_high": list(args.eps_high)},
        "synch": True,  # the checkpoint rule of PBT_CHECKPOINTS_KEPT
    }


def make_scheduler(args: argparse.Namespace) -> TrialScheduler | None:
    """The Tune trial scheduler of ``--scheduler``; None for fifo (Tune's default, FIFOScheduler)."""
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

    if args.scheduler == "fifo":
        return None
    scheduler = {"asha": ASHAScheduler, "pbt": PopulationBasedTraining}[args.scheduler]
    return scheduler(**scheduler_settings(args))


def stopping_rule(args: argparse.Namespace) -> dict[str, int] | Stopper:
    """Tune's stop: the sweep's iterations; with ``--min-entropy``, the entropy collapse too."""
    from ray.tune.stopper import CombinedStopper, FunctionStopper

    last = {"training_iteration": args.run.iterations}
    if args.min_entropy is None:
        return last
    # Tune takes a dict or Stoppers, not both. The iteration limit comes first: a trial that collapses in its
    # last iteration is finished, not stopped early.
    return CombinedStopper(
        FunctionStopper(functools.partial(reached, args.run.iterations)),
        EntropyCollapseStopper(args.min_entropy, args.entropy_patience),
    )


def reached(iterations: int, trial_id: str, result: dict[str, Any]) -> bool:
    """Whether a trial's ``result`` is of its last iteration (the stop dict's rule, as a Stopper function)."""
    return result["training_iteration"] >= iterations


def concurrent_trials(args: argparse.Namespace) -> int:
    """Tune's max_concurrent_trials: --max-concurrent, except under PBT, whose population is the trials that
    Tune holds at once (it creates no next trial while that many are unfinished, paused ones included): there
    all trials are held, and as many run at once as their resources fit while the others wait paused."""
    return trial_count(args) if args.scheduler == "pbt" else args.max_concurrent


def checkpoint_config(args: argparse.Namespace) -> CheckpointConfig:
    """Tune's checkpoint policy: after every iteration, the latest kept (for --resume); under PBT at its
    perturbation points, the last PBT_CHECKPOINTS_KEPT kept (PBT's clones restore from them)."""
    from ray import tune

    if args.scheduler == "pbt":
        return tune.CheckpointConfig(
            checkpoint_frequency=args.perturbation_interval,
            checkpoint_at_end=True,
            num_to_keep=PBT_CHECKPOINTS_KEPT,
        )
    return tune.CheckpointConfig(checkpoint_frequency=1, checkpoint_at_end=True, num_to_keep=1)


def swept_taus(args: argparse.Namespace) -> list[float]:
    """The values of tau the sweep tries: one only where the replay mode has no age decay."""
    return args.tau if args.config.replay_mode in TAU_MODES else args.tau[:1]


def swept_seeds(args: argparse.Namespace) -> list[int]:
    return [args.config.seed + k for k in range(args.seeds)]


def planned_trials(args: argparse.Namespace) -> list[tuple[float, float, int]] | None:
    """The (tau, eps_high, seed) of every trial a grid search runs (``--num-samples`` repeats included);
    None for a searcher, whose trials draw their points."""
    if args.search_alg != "grid":
        return None
    grid = [
        (tau, eps_high, seed)
        for tau in swept_taus(args)
        for eps_high in args.eps_high
        for seed in swept_seeds(args)
    ]
    return grid * (args.num_samples or 1)


def trial_count(args: argparse.Namespace) -> int:
    """The trials the sweep runs: the grid's, or ``--num-samples`` drawn by a searcher."""
    return len(planned_trials(args) or []) or args.num_samples or 4


def missing_trials(args: argparse.Namespace, rows: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(trials planned, the planned trials not done (finished or stopped early), named by point and seed:
    ``tau 35, eps_high 0.28, seed 1``; for a searcher, and under PBT, the count only)."""
    finished = Counter(
        (row["tau"], row["eps_high"], row.get("seed")) for row in rows if row["status"] in DONE
    )
    planned = planned_trials(args)
    # A searcher draws its trials' points, and PBT changes them as it goes: only the count says what is left.
    if planned is None or args.scheduler == "pbt":
        left = trial_count(args) - sum(finished.values())
        drawn = "of the PBT population" if planned else f"drawn by {args.search_alg}"
        return trial_count(args), [f"{left} trial(s) {drawn}"] if left > 0 else []
    missing = Counter(planned) - finished
    labels = [
        f"tau {tau_label(tau)}, eps_high {eps_high:g}, seed {seed}"
        for (tau, eps_high, seed), count in sorted(missing.items())
        for _ in range(count)
    ]
    return len(planned), labels


def make_searcher(name: str, seed: int):
    """A Tune searcher by name; a clear error when its package is not installed."""
    from ray.tune.search import SEARCH_ALG_IMPORT, BasicVariantGenerator, create_searcher

    if name == "random":
        return BasicVariantGenerator(random_state=seed)
    if name not in SEARCH_ALG_IMPORT:
        raise SystemExit(
            f"sweep: unknown --search-alg {name!r}; choose grid or one of {sorted(SEARCH_ALG_IMPORT)}"
        )
    missing = [pip for module, pip in SEARCHER_PACKAGES.get(name, {}).items() if not _importable(module)]
    if missing:
        raise SystemExit(
            f"sweep: --search-alg {name} needs the package(s) {', '.join(missing)}, which are not installed "
            f"(pip install {' '.join(missing)}); --search-alg grid and random need nothing extra"
        )
    return create_searcher(name, metric=VALIDATION_METRIC, mode="max", seed=seed, random_state_seed=seed)


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def run_sweep(args: argparse.Namespace):
    """Fit the Tune experiment; returns Tune's ``ResultGrid``."""
    from ray import tune

    from experiments.common.quiet_logs import worker_runtime_env

    start_ray(runtime_env=worker_runtime_env(args.log_file))
    folder = Path(args.storage_path).resolve() / args.name
    if args.resume:
        prepare_resume(args, load_results(folder))
        # Tune keeps the original search space, stop criteria and callbacks (the checkpoint policy); the
        # command's other options are ignored.
        return tune.Tuner.restore(str(folder), trainable=DAPO, restart_errored=True).fit()
    config, searcher, samples = search_space(args)
    drop = DropFinishedCheckpoints(args.run.iterations, keep_best=args.keep_checkpoints)
    tuner = tune.Tuner(
        DAPO,
        param_space=config,
        # No metric here: Tune would print every trial's whole config as "current best"; a model-based
        # searcher gets the metric itself (make_searcher), and summary_markdown picks the best trial.
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=make_scheduler(args),
            num_samples=samples,
            max_concurrent_trials=concurrent_trials(args),
        ),
        run_config=tune.RunConfig(
            name=args.name,
            storage_path=str(Path(args.storage_path).resolve()),
            stop=stopping_rule(args),
            checkpoint_config=checkpoint_config(args),
            callbacks=[
                KeepCheckpointsToRestore(drop) if args.scheduler == "pbt" else drop,
                StopWhenDiskFull(),
            ],
            verbose=1,
        ),
    )
    return tuner.fit()


def prepare_resume(args: argparse.Namespace, results) -> None:
    """Before ``--resume``: a ``SystemExit`` naming the unreadable file of an unfinished trial's checkpoint
    (Tune would restore from it), and the errored trials' checkpoints deleted (Tune restarts those trials from
    their first iteration, as new trials: nothing would ever read them)."""
    for row in trial_rows(results, args.run.iterations, args.scheduler):
        if row["status"] == "unfinished" and row["checkpoint"]:
            check_restorable(
                PROG,
                row["checkpoint"],
                f"Delete {row['checkpoint']}: the next --resume then marks trial {row['trial']} errored and "
                "the one after it runs the trial again from its first iteration; or start a new sweep with "
                "another --name.",
            )
        elif row["status"] == "error" and trial_checkpoints(row["path"]):
            print(f"sweep: deleting errored trial {row['trial']}'s checkpoints; --resume restarts it")
            drop_checkpoints(row["path"])


def check_disk(args: argparse.Namespace, folder: Path, config: DAPOConfig) -> int:
    """The disk the sweep needs in ``folder`` (a ``SystemExit`` naming it, the space needed and free where
    the disk is short): the checkpoints its running trials can hold at once, and the best one kept."""
    checkpoint = disk_space.checkpoint_bytes(config.model_path, config.lora_rank)
    trials = trial_count(args)
    # Under PBT every trial of the population holds checkpoints, paused or running.
    running = min(concurrent_trials(args), trials)
    # Per running trial: the checkpoints it keeps, the next one (Tune deletes the oldest only once the next is
    # stored), and the temporary folder the next is written to first, where that is on the same disk.
    per_trial = checkpoint_config(args).num_to_keep + 1 + disk_space.same_disk(tempfile.gettempdir(), folder)
    fixes = ["give --storage-path on a disk with room"]
    if args.scheduler == "pbt":
        fixes.append("fewer trials (PBT's population)")
    elif running > 1:
        fixes.append("a lower --max-concurrent")
    if args.keep_checkpoints:
        fixes.append("leave out --keep-checkpoints")
    return disk_space.check_free_space(
        PROG, folder, checkpoint, running * per_trial + args.keep_checkpoints, ", or ".join(fixes)
    )


def load_results(folder: Path):
    """Tune's ``ResultGrid`` of the sweep stored at ``folder``, read without running anything."""
    from ray import tune

    if not tune.Tuner.can_restore(folder):
        raise SystemExit(f"sweep: no Tune experiment at {folder}; check --storage-path/--name")
    return tune.Tuner.restore(str(folder), trainable=DAPO).get_results()


def trial_rows(results, iterations: int, scheduler: str = "fifo") -> list[dict[str, Any]]:
    """One row per trial: its settings, its validation success (peak and final), its wall time and its
    checkpoint where it still has one (None: deleted, or never written). A trial that ended before
    ``iterations`` without an error is ``stopped`` where the entropy stopper or ASHA (``scheduler``) stopped
    it (``stopped_early``: the reason), else ``unfinished``. The final validation success is NaN where the
    trial's last evaluation came before its last iteration (``last_evaluated_iteration``): it would be an
    earlier policy's."""
    rows = []
    for result in results:
        frame = result.metrics_dataframe
        curve = [] if frame is None or VALIDATION_METRIC not in frame else frame[VALIDATION_METRIC].dropna()
        metrics = result.metrics or {}
        latest = metrics.get("evaluation") or {}
        trained = int(metrics.get("training_iteration", 0))
        # The final success is the trained policy's only if measured after the trial's last iteration.
        final = latest.get("success", math.nan) if latest.get("iteration") == trained else math.nan
        untrained = iterations_without_training(frame)
        stopped = None if result.error else stop_reason(metrics, iterations, scheduler)
        if result.error:
            status = "error"
        elif trained >= iterations:
            status = "ok"
        else:
            status = "stopped" if stopped else "unfinished"
        # Tune's record names a finished trial's last checkpoint even once DropFinishedCheckpoints deleted it.
        checkpoint = result.checkpoint.path if result.checkpoint else None
        records = [] if frame is None else frame.to_dict("records")
        config = trial_config(result)
        rows.append(
            {
                "trial": metrics.get("trial_id", Path(result.path).name),
                # A sweep run before tau was renamed replay_tau reports "tau".
                "tau": float(config.get("replay_tau", config.get("tau", math.nan))),
                "seed": None if config.get("seed") is None else int(config["seed"]),
                "eps_high": float(config.get("eps_high", math.nan)),
                "replay": config.get("replay_mode"),
                "iterations": trained,
                "iterations_without_training": untrained,
                "mostly_untrained": mostly_untrained(untrained, trained),
                "peak_validation_success": float(max(curve)) if len(curve) else math.nan,
                "final_validation_success": float(final),
                "last_evaluated_iteration": latest.get("iteration"),
                "final_reward_mean": float(metrics.get("rollout/reward_mean", math.nan)),
                "minutes": float(metrics.get("time_total_s", math.nan)) / 60,
                "status": status,
                "stopped_early": stopped,
                "path": result.path,
                "checkpoint": checkpoint if checkpoint and Path(checkpoint).is_dir() else None,
                "episode_curve": episode_curve(records, config.get("group_size")),
                "clip_fractions": clip_fractions(records),
                "drift": replay_drift.drift(records),
            }
        )
    return rows


def trial_config(result) -> dict[str, Any]:
    """A trial's configuration: Tune's record of it, which a trial that died before its first result lacks;
    then the ``params.json`` Tune wrote as the trial started; else empty (its settings are unknown)."""
    if result.config:
        return result.config
    params = Path(result.path) / "params.json"
    try:
        return json.loads(params.read_text())
    except (OSError, ValueError):
        return {}


def episode_curve(records: list[dict[str, Any]], group_size: int | None) -> dict[str, list[float]] | None:
    """A trial's evaluations against its training episodes, the replay study's curve
    (:func:`experiments.common.replay_auc.episode_curve`), from its results in order (``progress.csv``'s
    rows): the start (``evaluation_start``, at 0 episodes), then each evaluation made after the iteration
    whose result carries it. None for a trial without a measured start (run by PBT, or before the sweep
    measured starts), without a ``group_size`` or with a result that did not log the groups it sampled."""
    start = measured(records[0], "evaluation_start/success") if records else None
    if start is None or group_size is None:
        return None
    evaluations = [{"iteration": 0, "success": start}]
    for record in records:
        success = measured(record, "evaluation/success")
        if success is not None and record.get("evaluation/iteration") == record.get("training_iteration"):
            evaluations.append({"iteration": int(record["training_iteration"]), "success": success})
    run = {"curve": evaluations, "training": records}
    try:
        episodes, success = replay_auc.episode_curve(run, int(group_size))
    except ValueError:
        return None
    return {"iterations": [e["iteration"] for e in evaluations], "episodes": episodes, "success": success}


def clip_fractions(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """The share of response tokens the clip bounds cut, mean over the iterations that trained
    (``clipfrac_high``: Clip-Higher's bound 1 + eps_high on positive advantages)."""
    fractions = {}
    for name in ("clipfrac_high", "clipfrac_low"):
        values = [value for record in records if (value := measured(record, f"train/{name}")) is not None]
        fractions[name] = sum(values) / len(values) if values else None
    return fractions


def stop_reason(metrics: dict[str, Any], iterations: int, scheduler: str) -> str | None:
    """Why Tune stopped a trial before its last iteration, from its last result ``metrics``: the entropy
    stopper's reason, or ASHA's; None for a trial that ran all ``iterations``, or was interrupted."""
    trained = int(metrics.get("training_iteration", 0))
    if trained >= iterations:
        return None
    if metrics.get(STOPPED_EARLY_KEY):
        return metrics[STOPPED_EARLY_KEY]
    # Tune marks "done" the last result of a trial that it stopped; an interrupted trial's is not.
    if scheduler == "asha" and metrics.get("done"):
        return f"ASHA: {VALIDATION_METRIC} below its rung's cutoff after iteration {trained}"
    return None


def iterations_without_training(frame) -> int:
    """Iterations of a trial's ``progress.csv`` frame in which no group was informative (nothing trained)."""
    if frame is None or "rollout/groups_kept" not in frame:
        return 0
    kept = frame["rollout/groups_kept"].fillna(0)
    if "rollout/groups_from_surplus" in frame:
        kept = kept + frame["rollout/groups_from_surplus"].fillna(0)
    return int((kept == 0).sum())


def summary_markdown(
    args: argparse.Namespace, rows: list[dict[str, Any]], best: dict[str, Any] | None
) -> str:
    run: RunSettings = args.run
    config = args.config
    interval = f"every {config.evaluation_interval} iteration(s) " if config.evaluation_interval else ""
    grid = sweep_points.points(rows)
    planned, missing = missing_trials(args, rows)
    partial = (
        [
            f"**Partial: {planned - len(missing)} of {planned} trials finished.** "
            f"Missing: {'; '.join(missing)}.",
            "",
        ]
        if missing
        else []
    )
    scheduler = f", scheduler {args.scheduler}" if args.scheduler != "fifo" else ""
    first = "after iteration 1" if args.scheduler == "pbt" else "before training"
    lines = [
        f"# Sweep `{args.name}`: {run.env}, replay {config.replay_mode}, search {args.search_alg}{scheduler}",
        "",
        *partial,
        f"{run.iterations} iterations per trial; validation success = mean success of "
        f"{config.evaluation_samples_per_task} episode(s) on each of {config.evaluation_num_tasks} "
        f"validation tasks (DAPO.evaluate_policy), measured {first}, {interval}and after the "
        f"last ({run.iterations}).",
        "",
        *early_stopping_lines(args),
        *sweep_points.markdown_lines(grid, sweep_points.best_point(grid)),
        f"![final validation success against tau]({PLOT_NAME})" if len(grid) > 1 else "",
        "",
        "## Trials",
        "",
        "| trial | tau | eps_high | seed | peak validation success | final validation success | final reward "
        "| iterations | iterations that trained nothing | minutes | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mark = " **(best)**" if best is not None and row is best else ""
        lines.append(
            f"| {row['trial']}{mark} | {tau_label(row['tau'])} | {row['eps_high']:g} "
            f"| {row.get('seed', 'n/a')} "
            f"| {_number(row['peak_validation_success'])} "
            f"| {_number(row['final_validation_success'])} | {_number(row['final_reward_mean'])} "
            f"| {row['iterations']} | {row.get('iterations_without_training', 0)} "
            f"| {_number(row.get('minutes', math.nan), '.1f')} | {row['status']} |"
        )
    lines.append("")
    stopped = [
        f"{row['trial']} after iteration {row['iterations']} ({row['stopped_early']})"
        for row in rows
        if row["status"] == "stopped"
    ]
    if stopped:
        lines += [
            f"Stopped early (done, not missing; only trials that ran all their iterations compete for the "
            f"best): {'; '.join(stopped)}.",
            "",
        ]
    stale = [
        f"{row['trial']} (after iteration {row['last_evaluated_iteration']})"
        for row in rows
        if row["status"] == "ok" and row.get("last_evaluated_iteration") not in (None, row["iterations"])
    ]
    if stale:
        lines += [
            f"**Warning:** trial(s) {', '.join(stale)} were last evaluated before their last iteration: "
            "their final validation success is n/a and they are left out of the grid points. Run them again.",
            "",
        ]
    untrained = [row["trial"] for row in rows if row.get("mostly_untrained")]
    if untrained:
        lines += [
            f"**Warning:** in trial(s) {', '.join(map(str, untrained))} most iterations trained nothing (0 "
            "informative groups: every sample of each task got the same reward); their results measure the "
            "starting model. Start from a model that sometimes succeeds (--warm-start-steps, --model).",
            "",
        ]
    if best is None:
        lines.append("No trial finished with a validation measurement.")
    else:
        ties = sum(row["peak_validation_success"] == best["peak_validation_success"] for row in rows)
        tie_note = f" ({ties} trials tie; the first is shown)" if ties > 1 else ""
        lines.append(
            f"Best trial by peak validation success (Tune's best configuration){tie_note}: "
            f"tau = {tau_label(best['tau'])}, eps_high = {best['eps_high']:g} "
            f"({best['peak_validation_success']:.3f})."
        )
    lines += ["", checkpoints_sentence(rows, best)]
    return "\n".join(lines) + "\n"


def early_stopping_lines(args: argparse.Namespace) -> list[str]:
    """The summary's sentences on the scheduler and the entropy stopper (none for fifo without either)."""
    lines = []
    if args.scheduler == "asha":
        lines.append(
            f"Scheduler ASHA on {VALIDATION_METRIC} (max): a trial below the top quarter at a rung (the "
            f"first after {args.grace_period} iteration(s)) is stopped there."
        )
    elif args.scheduler == "pbt":
        values = ", ".join(f"{value:g}" for value in args.eps_high)
        lines.append(
            f"Scheduler PBT on {VALIDATION_METRIC} (max), synchronous, every {args.perturbation_interval} "
            f"iteration(s): the lowest quarter of the trials continue from the top quarter's checkpoints and "
            f"settings, eps_high perturbed over {values}; a trial's tau and eps_high below are its last."
        )
    if args.min_entropy is not None:
        lines.append(
            f"Early stopping: a trial whose token entropy ({ENTROPY_KEY}) is below {args.min_entropy:g} in "
            f"{args.entropy_patience} consecutive iterations that trained is stopped."
        )
    return [*lines, ""] if lines else []


def kept_checkpoints(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The checkpoints still on disk, by their trials' status: ``ok`` (finished: the best one's with
    --keep-checkpoints), ``unfinished`` (for --resume), ``error`` (until --resume restarts the trial)."""
    return {
        status: [row["checkpoint"] for row in rows if row["status"] == status and row["checkpoint"]]
        for status in ("ok", "unfinished", "error")
    }


def checkpoints_sentence(rows: list[dict[str, Any]], best: dict[str, Any] | None) -> str:
    kept = kept_checkpoints(rows)
    if best is not None and kept["ok"] == [best["checkpoint"]]:
        sentence = f"Checkpoint kept: the best trial's, {best['checkpoint']}."
    elif kept["ok"]:
        sentence = f"Checkpoints of finished trials kept: {', '.join(kept['ok'])}."
    else:
        sentence = (
            "No finished trial's checkpoint was kept (each is deleted when its trial finishes; "
            "--keep-checkpoints keeps the best one's)."
        )
    if kept["unfinished"]:
        sentence += f" Unfinished trials keep theirs for --resume: {', '.join(kept['unfinished'])}."
    if kept["error"]:
        sentence += f" Errored trials keep theirs until --resume restarts them: {', '.join(kept['error'])}."
    return sentence


def _number(value: float, spec: str = ".3f") -> str:
    return "n/a" if math.isnan(value) else format(value, spec)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from experiments.common.quiet_logs import LOG_FILE_NAME, install

    args = parse_args(argv)
    arguments = list(sys.argv[1:] if argv is None else argv)
    args.name = args.name or f"sweep-{args.run.env.split('/')[-1]}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = Path(args.storage_path).resolve() / args.name
    if args.report_only:
        return write_summary(args, arguments, folder, load_results(folder))
    if args.resume:
        from ray import tune

        # Before the disk check, which builds the starting model (a warm start takes minutes).
        if not tune.Tuner.can_restore(folder):
            raise SystemExit(f"sweep: no Tune experiment to resume at {folder}; check --storage-path/--name")
    args.log_file = install(folder / LOG_FILE_NAME)
    needed = check_disk(args, folder, workload_config(args.run, PROG))
    full = None  # the error of a disk that filled up
    try:
        results = run_sweep(args)
    except Exception as error:  # a full disk ends the sweep with the trials finished so far reported
        if not disk_space.disk_full(error):
            raise
        results, full = load_results(folder), error
    full = full or next((result.error for result in results if disk_space.disk_full(result.error)), None)
    summary = write_summary(args, arguments, folder, results)
    if full is not None:
        finished = summary["planned_trials"] - len(summary["missing"])
        raise SystemExit(
            disk_space.disk_full_message(
                PROG,
                folder,
                needed,
                f"{finished} of {summary['planned_trials']} trials finished; their summary is in "
                f"{folder / 'summary.md'}. Free space (or give --storage-path on another disk), then "
                f"continue with --resume --name {args.name}.",
            )
        ) from full
    return summary


def write_summary(args: argparse.Namespace, arguments: list[str], folder: Path, results) -> dict[str, Any]:
    """Writes summary.md, summary.json and the plot of Tune's ``results``; returns the summary."""
    rows = trial_rows(results, args.run.iterations, args.scheduler)
    best = best_row(rows)
    planned, missing = missing_trials(args, rows)
    markdown = summary_markdown(args, rows, best)
    grid = sweep_points.points(rows)
    summary = {
        "env": args.run.env,
        "replay": args.config.replay_mode,
        "iterations": args.run.iterations,
        "settings": args.run.as_record(),
        # Each key's layer; the swept ones are the Tune grid's (their values: the grid).
        "config_layers": explain_config(args.run, args.config.copy().set_keys(swept_keys(args), "tune grid")),
        "trials": rows,
        "best": best,
        "points": grid,
        "best_point": sweep_points.best_point(grid),
        "planned_trials": planned,
        "missing": missing,
        "scheduler": {"name": args.scheduler, **scheduler_settings(args)},
        "early_stopping": None
        if args.min_entropy is None
        else {"key": ENTROPY_KEY, "min_entropy": args.min_entropy, "patience": args.entropy_patience},
        "checkpoints": kept_checkpoints(rows),
        # The summary names the command that trains its trials; one written with --report-only says so.
        "provenance": {
            **provenance(PROG, [item for item in arguments if item != "--report-only"], args.config),
            "report_only": args.report_only,
        },
    }
    later = f"Free space, then write the summary with --report-only --name {args.name}."
    with disk_space.exit_when_full(PROG, folder, disk_space.MARGIN_BYTES, later):
        (folder / "summary.md").write_text(markdown)
        if len(grid) > 1:
            title = (
                f"{args.run.env}: {sweep_points.primary(grid)[1]}, {args.run.iterations} iterations\n"
                "(mean over seeds, 95% t interval)"
            )
            sweep_points.plot(grid, folder / PLOT_NAME, title)
        write_json(folder / "summary.json", summary)
    print(markdown)
    print(f"wrote {folder / 'summary.md'} and summary.json; TensorBoard: tensorboard --logdir {folder}")
    return summary


if __name__ == "__main__":
    main()
