"""The command line of a comparison (``experiments.compare``, and ``experiments.lab``, whose entries are
comparisons of one on-policy arm): its options, and the arms, settings and configs they make."""

from __future__ import annotations

import argparse

from algorithms.replay import REPLAY_MODES
from experiments.common.comparison_arms import COMPARE_MODES, REFERENCE_MODE, mode_arm, parse_arms
from experiments.common.comparison_runs import PROG, run_settings
from experiments.common.run_config import DEFAULT_ENV, SettingsError, build_config, parse_set
from experiments.common.run_options import add_aliases, add_settings_option, check_env_id, settings_env
from experiments.common.workload import add_workload_args, workload_settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options of ``python -m experiments.compare`` (its docstring says what each does), checked, with
    the arms, their settings and configs resolved."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Arms of a comparison, trained and tested against each other"
    )
    parser.add_argument(
        "--envs",
        nargs="+",
        default=None,
        help=f"gymnasium ids (default: --settings' env, else {DEFAULT_ENV})",
    )
    add_settings_option(parser)
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
    if args.envs is None:
        args.envs = [settings_env(args.settings)] if args.settings else [DEFAULT_ENV]
    if args.settings and len(args.envs) > 1:
        parser.error(
            "--settings describes one env's runs: compare one env with it, or drop it to compare --envs"
        )
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
