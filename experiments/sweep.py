"""Ray Tune sweep over FreshPER's ``tau`` and DAPO's ``eps_high``: ``python -m experiments.sweep``.

Each trial is one DAPO run (``experiments.train``'s configuration: env, model (by default the tiny model
warm-started on the env), ``dapo`` preset at the tiny scale, replay mode) for ``--iterations`` training
iterations. After training iteration ``i`` the trial measures **validation success** when ``i == 1`` or
``i % --eval-every == 0``: one episode on each of the first ``--eval-seeds`` seeds of the validation split
(``envs/seeds.py``), sampled with the training settings (``DAPO.evaluate_success``). Every result reports the
latest measurement as ``validation/success`` (with ``validation/iteration``, the iteration it was measured
after, and ``validation/episodes``), so the metric is present in every result that Tune's searchers and
schedulers see.

Search: ``--search-alg grid`` (default) crosses the ``--tau`` and ``--eps-high`` lists with
``tune.grid_search`` (``--num-samples`` repeats the grid); any other name is one of Tune's searchers
(``random`` = Tune's ``BasicVariantGenerator`` drawing from the lists, ``optuna``, ``hyperopt``, ...) over
``tune.choice`` of the same lists, ``--num-samples`` trials (default 4). Trials run one at a time unless
``--max-concurrent`` says otherwise (on a cluster: docs/scaling.md).

Output: Tune's own results folder ``<--storage-path>/<--name>`` (per trial: ``result.json``,
``progress.csv``, TensorBoard event files, the final checkpoint) and ``summary.md`` / ``summary.json`` there:
every trial's settings, peak and final validation success, and the best configuration by peak validation
success (ties go to the first trial). ``tensorboard --logdir <--storage-path>`` shows the curves.

``--resume --name <name>`` continues an interrupted sweep with Tune's own restore: finished trials are kept,
unfinished ones continue from their latest checkpoint (trials checkpoint after every iteration), errored ones
start again. Tune keeps the original search space and stopping rule; give the same options as the first
command so that the summary's header describes it.

The sweep's trainable is ``ValidatedDAPO``, DAPO plus that validation step; plain
``tune.Tuner(DAPO, param_space=config)`` works too (it reports DAPO's training metrics only).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from pathlib import Path
from typing import Any

from ray.rllib.algorithms.algorithm_config import NotProvided

from algorithms.dapo import DAPO, DAPOConfig
from envs.seeds import seeds as split_seeds
from experiments.ray_session import start_ray
from experiments.results_json import write_json
from experiments.train import (
    DEFAULT_ENV,
    MOSTLY_UNTRAINED_SHARE,
    add_warm_start_args,
    build_config,
    check_env_id,
    check_warm_start_args,
    default_model,
)
from experiments.train import parse_args as train_args

VALIDATION_METRIC = "validation/success"
DEFAULT_TAUS = [50.0, 500.0]
DEFAULT_EPS_HIGH = [0.2, 0.28]
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


class ValidatedDAPOConfig(DAPOConfig):
    """DAPOConfig plus the validation schedule of :class:`ValidatedDAPO`."""

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or ValidatedDAPO)
        self.validation_num_seeds = 16  # first seeds of the validation split, one episode each
        self.validation_interval = 1  # measure after iteration 1 and every this many iterations

    def validation(self, *, num_seeds: int = NotProvided, interval: int = NotProvided) -> ValidatedDAPOConfig:
        if num_seeds is not NotProvided:
            self.validation_num_seeds = num_seeds
        if interval is not NotProvided:
            self.validation_interval = interval
        return self

    def validate(self) -> None:
        super().validate()
        if self.validation_num_seeds < 1 or self.validation_interval < 1:
            raise ValueError("ValidatedDAPOConfig: validation num_seeds and interval must be >= 1")

    @classmethod
    def from_dapo_config(cls, config: DAPOConfig) -> ValidatedDAPOConfig:
        """The same settings as ``config`` (e.g. from ``experiments.train.build_config``), validated."""
        settings = {k: v for k, v in config.to_dict().items() if k != "algo_class"}
        return cls().update_from_dict(settings)


class ValidatedDAPO(DAPO):
    """DAPO that reports validation success (see the module docstring for the schedule)."""

    @classmethod
    def get_default_config(cls) -> ValidatedDAPOConfig:
        return ValidatedDAPOConfig()

    def setup(self, config: ValidatedDAPOConfig) -> None:
        super().setup(config)
        self._validation: dict[str, float] | None = None

    def step(self) -> dict[str, Any]:
        result = super().step()
        iteration = self.iteration + 1  # Trainable.train() counts this step after step() returns
        if self._validation is None or iteration % self.config.validation_interval == 0:
            seeds = split_seeds("validation", self.config.validation_num_seeds)
            successes = self.evaluate_success(seeds)
            self._validation = {
                VALIDATION_METRIC: float(sum(successes)) / max(1, len(successes)),
                "validation/iteration": float(iteration),
                "validation/episodes": float(len(successes)),
            }
        result.update(self._validation)
        return result


# ---------------------------------------------------------------------------------------------------------
def add_workload_args(parser: argparse.ArgumentParser) -> None:
    """Options shared with ``experiments.compare``: the model and the size of the tiny workload."""
    parser.add_argument(
        "--model",
        default=None,
        help="model name (smollm2), model dir or hub id (default: the tiny model warm-started on the env)",
    )
    parser.add_argument("--env-config", default="{}", help="JSON kwargs for gymnasium.make")
    parser.add_argument("--iterations", type=int, default=3, help="training iterations per run")
    parser.add_argument("--eval-seeds", type=int, default=16, help="validation seeds (one episode each)")
    parser.add_argument("--group-size", type=int, default=None, help="G (default: tiny preset's 8)")
    parser.add_argument(
        "--prompts", type=int, default=None, help="P per iteration (default: tiny preset's 4)"
    )
    parser.add_argument(
        "--max-response-tokens", type=int, default=None, help="per turn (default: tiny preset's 48)"
    )
    parser.add_argument(
        "--max-generation-batches", type=int, default=None, help="dynamic sampling budget (tiny preset: 3)"
    )
    parser.add_argument("--kv-cache-gib", type=float, default=None, help="vLLM KV cache (tiny preset: 1.0)")
    parser.add_argument("--num-env-runners", type=int, default=0, help="remote EnvRunners (0: in-process)")
    parser.add_argument("--num-learners", type=int, default=0, help="remote learners (0: in-process)")
    parser.add_argument("--gpu", action="store_true", help="one GPU per learner and per remote EnvRunner")
    parser.add_argument("--full-scale", action="store_true", help="paper-scale settings, not the tiny ones")
    add_warm_start_args(parser)


def workload_config(
    args: argparse.Namespace, *, env: str, replay: str, seed: int = 0, tau: float | None = None
) -> DAPOConfig:
    """``experiments.train.build_config`` for (env, replay, seed, tau), shrunk by the workload options.

    With ``--max-response-tokens``, the overlong buffer L_cache shrinks to at most a third of it, so the
    soft punishment still has a band below the limit.
    """
    argv = ["--env", env, "--env-config", args.env_config, "--replay", replay, "--seed", str(seed)]
    argv += ["--num-env-runners", str(args.num_env_runners), "--num-learners", str(args.num_learners)]
    argv += ["--model", args.model or default_model(env, **warm_start_options(args))]
    argv += ["--gpu"] if args.gpu else []
    argv += ["--full-scale"] if args.full_scale else []
    argv += ["--tau", str(tau)] if tau is not None else []
    config = build_config(train_args(argv))
    overrides = {
        "group_size": args.group_size,
        "prompts_per_iteration": args.prompts,
        "max_generation_batches": args.max_generation_batches,
        "engine_kv_cache_gib": args.kv_cache_gib,
    }
    if args.max_response_tokens is not None:
        overrides["max_response_tokens"] = args.max_response_tokens
        overrides["overlong_cache_len"] = min(
            config.overlong_cache_len, max(1, args.max_response_tokens // 3)
        )
    return config.training(**{k: v for k, v in overrides.items() if v is not None})


def warm_start_options(args: argparse.Namespace) -> dict[str, Any]:
    """``default_model``'s keywords from the ``--warm-start-steps`` / ``--no-warm-start`` options."""
    return {"warm_start_steps": args.warm_start_steps, "warm_start": args.warm_start}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from algorithms.replay import REPLAY_MODES

    parser = argparse.ArgumentParser(prog="python -m experiments.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=DEFAULT_ENV, help="registered gymnasium id (default %(default)s)")
    parser.add_argument("--replay", default="freshper", choices=REPLAY_MODES)
    parser.add_argument("--tau", type=float, nargs="+", default=DEFAULT_TAUS, help="values of tau")
    parser.add_argument(
        "--eps-high", type=float, nargs="+", default=DEFAULT_EPS_HIGH, help="values of eps_high"
    )
    parser.add_argument(
        "--search-alg", default="grid", help="grid, random, or a Tune searcher name (optuna, hyperopt, ...)"
    )
    parser.add_argument("--num-samples", type=int, default=None, help="grid repeats, or trials (default 4)")
    parser.add_argument("--eval-every", type=int, default=1, help="validate every k iterations (and after 1)")
    parser.add_argument("--seed", type=int, default=0, help="training seed of every trial")
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
    add_workload_args(parser)
    args = parser.parse_args(argv)
    check_warm_start_args(parser, args)
    check_env_id(args.env)
    if args.resume and not args.name:
        parser.error("--resume needs the --name of the sweep to continue")
    if args.iterations < 1 or args.eval_every < 1 or args.eval_seeds < 1:
        parser.error("--iterations, --eval-every and --eval-seeds must be >= 1")
    return args


def search_space(args: argparse.Namespace) -> tuple[ValidatedDAPOConfig, Any, int]:
    """(param_space config, Tune search algorithm or None, num_samples) for the chosen search."""
    from ray import tune

    config = ValidatedDAPOConfig.from_dapo_config(
        workload_config(args, env=args.env, replay=args.replay, seed=args.seed)
    ).validation(num_seeds=args.eval_seeds, interval=args.eval_every)
    taus = args.tau
    if args.replay not in TAU_MODES and len(taus) > 1:
        print(f"sweep: tau has no effect with --replay {args.replay}; sweeping eps_high only")
        taus = taus[:1]
    if args.search_alg == "grid":
        domain, searcher, samples = tune.grid_search, None, args.num_samples or 1
    else:
        domain, searcher, samples = (
            tune.choice,
            make_searcher(args.search_alg, args.seed),
            args.num_samples or 4,
        )
    config = config.training(eps_high=domain(args.eps_high)).replay(tau=domain(taus))
    return config, searcher, samples


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

    start_ray()
    folder = Path(args.storage_path).resolve() / args.name
    if args.resume:
        if not tune.Tuner.can_restore(folder):
            raise SystemExit(f"sweep: no Tune experiment to resume at {folder}; check --storage-path/--name")
        # Tune keeps the original search space and stop criteria; the command's other options are ignored.
        return tune.Tuner.restore(str(folder), trainable=ValidatedDAPO, restart_errored=True).fit()
    config, searcher, samples = search_space(args)
    tuner = tune.Tuner(
        ValidatedDAPO,
        param_space=config,
        # No metric here: Tune would print every trial's whole config as "current best"; a model-based
        # searcher gets the metric itself (make_searcher), and summary_markdown picks the best trial.
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            num_samples=samples,
            max_concurrent_trials=args.max_concurrent,
        ),
        run_config=tune.RunConfig(
            name=args.name,
            storage_path=str(Path(args.storage_path).resolve()),
            stop={"training_iteration": args.iterations},
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=1, checkpoint_at_end=True, num_to_keep=1
            ),
            verbose=1,
        ),
    )
    return tuner.fit()


def trial_rows(results) -> list[dict[str, Any]]:
    """One row per trial: its settings and its validation success (peak and final)."""
    rows = []
    for result in results:
        frame = result.metrics_dataframe
        curve = [] if frame is None or VALIDATION_METRIC not in frame else frame[VALIDATION_METRIC].dropna()
        metrics = result.metrics or {}
        untrained = iterations_without_training(frame)
        iterations = int(metrics.get("training_iteration", 0))
        rows.append(
            {
                "trial": metrics.get("trial_id", Path(result.path).name),
                "tau": float(result.config["tau"]),
                "eps_high": float(result.config["eps_high"]),
                "replay": result.config["replay_mode"],
                "iterations": iterations,
                "iterations_without_training": untrained,
                "mostly_untrained": untrained > MOSTLY_UNTRAINED_SHARE * iterations,
                "peak_validation_success": float(max(curve)) if len(curve) else math.nan,
                "final_validation_success": float(metrics.get(VALIDATION_METRIC, math.nan)),
                "final_reward_mean": float(metrics.get("rollout/reward_mean", math.nan)),
                "status": "error" if result.error else "ok",
                "path": result.path,
                "checkpoint": result.checkpoint.path if result.checkpoint else None,
            }
        )
    return rows


def iterations_without_training(frame) -> int:
    """Iterations of a trial's ``progress.csv`` frame in which no group was informative (nothing trained)."""
    if frame is None or "rollout/groups_kept" not in frame:
        return 0
    kept = frame["rollout/groups_kept"].fillna(0)
    if "rollout/groups_from_surplus" in frame:
        kept = kept + frame["rollout/groups_from_surplus"].fillna(0)
    return int((kept == 0).sum())


def best_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The trial with the highest peak validation success (first one on ties)."""
    scored = [row for row in rows if row["status"] == "ok" and not math.isnan(row["peak_validation_success"])]
    return max(scored, key=lambda row: row["peak_validation_success"]) if scored else None


def summary_markdown(
    args: argparse.Namespace, rows: list[dict[str, Any]], best: dict[str, Any] | None
) -> str:
    lines = [
        f"# Sweep `{args.name}`: {args.env}, replay {args.replay}, search {args.search_alg}",
        "",
        f"{args.iterations} iterations per trial; validation success = one episode on each of "
        f"{args.eval_seeds} validation seeds, measured after iteration 1 and every {args.eval_every}.",
        "",
        "| trial | tau | eps_high | peak validation success | final validation success | final reward | "
        "iterations | iterations that trained nothing | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        mark = " **(best)**" if best is not None and row is best else ""
        lines.append(
            f"| {row['trial']}{mark} | {row['tau']:g} | {row['eps_high']:g} "
            f"| {_number(row['peak_validation_success'])} "
            f"| {_number(row['final_validation_success'])} | {_number(row['final_reward_mean'])} "
            f"| {row['iterations']} | {row.get('iterations_without_training', 0)} | {row['status']} |"
        )
    lines.append("")
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
            f"Best by peak validation success{tie_note}: "
            f"tau = {best['tau']:g}, eps_high = {best['eps_high']:g} "
            f"({best['peak_validation_success']:.3f}); checkpoint {best['checkpoint']}"
        )
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from models.progress import quiet_library_bars_in_logs

    args = parse_args(argv)
    quiet_library_bars_in_logs()
    args.name = args.name or f"sweep-{args.env.split('/')[-1]}-{time.strftime('%Y%m%d-%H%M%S')}"
    results = run_sweep(args)
    rows = trial_rows(results)
    best = best_row(rows)
    folder = Path(args.storage_path).resolve() / args.name
    markdown = summary_markdown(args, rows, best)
    (folder / "summary.md").write_text(markdown)
    summary = {
        "env": args.env,
        "replay": args.replay,
        "iterations": args.iterations,
        "trials": rows,
        "best": best,
    }
    write_json(folder / "summary.json", summary)
    print(markdown)
    print(f"wrote {folder / 'summary.md'} and summary.json; TensorBoard: tensorboard --logdir {folder}")
    return summary


if __name__ == "__main__":
    main()
