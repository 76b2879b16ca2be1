"""The learning lab: reference curves of on-policy DAPO, one per env family, that anyone re-runs on a laptop:
``python -m experiments.lab``.

An entry is a settings file in ``experiments/settings/lab/`` (its name is the file's stem): an env setting
and a starting model whose held-out success starts inside the learnable zone (15-50%: sampled groups
disagree, so RL has signal), trained on-policy for the file's iterations and evaluated on the same validation
tasks every ``evaluation_interval`` iterations. Its record lives in ``docs/results/lab/<entry>/``:
``runs/`` (one file per seed, as ``experiments.compare`` saves them), ``summary.json`` (provenance and the
figures of ``experiments/common/lab_report.py``), ``README.md`` (start, end, gain with its intervals by seed
and by task, the band, diagnostics, cost) and ``curves.png``.

    python -m experiments.lab list                      # the entries and what their records show
    python -m experiments.lab run frozen_lake           # train the missing seeds (at least 5), then report
    python -m experiments.lab run all --seeds 5         # every entry
    python -m experiments.lab check frozen_lake         # one new seed: inside the recorded band or not?
    python -m experiments.lab report frozen_lake        # rewrite the report from the saved runs

``run`` resumes: finished seeds are read back (a seed saved with other settings is an error) and the missing
ones trained, each saved as it ends, with the report rewritten after each. ``check`` trains one seed into
``results/lab-check-<entry>-<time>/`` (default: the first seed the record lacks, so it is a fresh draw of the
distribution the band predicts; a recorded seed is compared point by point with its recorded curve as well)
and exits with 1 when the curve leaves the band, naming the CPU kinds when they differ from the record's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from experiments.common import lab_entries, lab_report, solution_length
from experiments.common.blind_floor import blind_floor
from experiments.common.comparison_options import parse_args as comparison_options
from experiments.common.comparison_runs import (
    load_comparison,
    run_path,
    run_settings,
    save_run,
    saved_settings,
    train_and_evaluate,
    train_missing,
)
from experiments.common.quiet_logs import LOG_FILE_NAME, install, worker_runtime_env
from experiments.common.ray_session import start_ray
from experiments.common.results_json import REPOSITORY, dumps, machine, provenance
from experiments.common.run_config import load_settings
from experiments.common.workload import workload_config

PROG = "python -m experiments.lab"
# The lab's power targets: >= 5 seeds at the tiny scale (minutes a run), >= 3 at a larger model's scale
# such as smollm2's (up to an hour a run).
DEFAULT_SEEDS = 5
DEFAULT_SEEDS_LARGER_MODEL = 3
ARM = "on_policy"  # the reference curves are on-policy; replay is compared against them


def entries() -> dict[str, Path]:
    """Every lab entry: name -> its settings file."""
    return lab_entries.entries()


def entry_file(name: str) -> Path:
    """The settings file of entry ``name``; SystemExit naming the entries when there is none."""
    return lab_entries.entry_file(name, PROG)


def default_seeds(name: str) -> int:
    """The seeds an entry trains by default: :data:`DEFAULT_SEEDS` at the tiny scale (the offline tiny
    models), else :data:`DEFAULT_SEEDS_LARGER_MODEL`."""
    tiny = load_settings(entry_file(name)).resolved_scale == "tiny"
    return DEFAULT_SEEDS if tiny else DEFAULT_SEEDS_LARGER_MODEL


def comparison_args(name: str, seeds: int, output: Path) -> argparse.Namespace:
    """The entry as ``experiments.compare`` takes it: its settings file, the on-policy arm, ``seeds`` seeds,
    saved in ``output``; so the lab's runs are trained, saved and resumed by the comparison's own code."""
    return comparison_options(
        ["--settings", str(entry_file(name)), "--modes", ARM, "--seeds", str(seeds), "--output", str(output)]
    )


def settings_shown(name: str) -> str:
    return str(entry_file(name).relative_to(REPOSITORY))


def write_report(
    name: str, runs: list[dict[str, Any]], record: dict[str, Any], output: Path
) -> dict[str, Any]:
    """summary.json, README.md and curves.png of the entry's finished ``runs`` in ``output``."""
    summary = lab_report.summarize(name, runs)
    # The tasks the entry's evaluations played (every evaluation plays the same ones).
    tasks = runs[0]["curve"][0]["metrics"]["task_seeds"]
    floor = summary["blind_floor"] = blind_floor(summary["env"], summary["env_config"], tasks)
    summary["by_solution_length"] = by_solution_length(summary, runs, tasks, floor)
    output.mkdir(parents=True, exist_ok=True)
    (output / "summary.json").write_text(dumps({"provenance": record, **summary}, indent=1))
    (output / "README.md").write_text(lab_report.markdown(summary, record, settings_shown(name)))
    lab_report.plot(summary, output / "curves.png")
    return summary


def by_solution_length(
    summary: dict[str, Any], runs: list[dict[str, Any]], tasks: list[int], floor: dict[str, Any] | None
) -> list[dict[str, Any]] | None:
    """Start, end and blind success on the entry's validation tasks, by the oracle's solution length
    (experiments/common/solution_length.py); None where the env has no oracle moves."""
    lengths = solution_length.oracle_lengths(summary["env"], summary["env_config"], tasks)
    if lengths is None:
        return None
    rates = {point: solution_length.task_rates(runs, at, tasks) for point, at in (("start", 0), ("end", -1))}
    if floor is not None:
        rates["blind"] = floor["task_rates"]
    return solution_length.success_by_length(lengths, rates)


def recorded_seeds(output: Path) -> int:
    """How many seeds (0..n-1) an entry's folder holds runs of: one past the highest seed saved."""
    saved = [int(path.stem.rpartition("seed")[2]) for path in (output / "runs").glob(f"*__{ARM}__seed*.json")]
    return max(saved, default=-1) + 1


def run_entry(
    name: str, seeds: int | None, report_only: bool = False, root: Path | None = None
) -> dict[str, Any]:
    """Trains the entry's missing seeds in turn (unless ``report_only``) and writes its report after each, in
    ``root/<name>`` (default: the lab's records, ``lab_entries.RESULTS``). ``seeds`` None: every seed
    recorded, and for a run at least :func:`default_seeds`, so that a report never drops a recorded seed."""
    output = (root or lab_entries.RESULTS) / name
    if seeds is None:
        recorded = recorded_seeds(output)
        seeds = recorded if report_only and recorded else max(default_seeds(name), recorded)
    args = comparison_args(name, seeds, output)
    args.report_only = report_only
    # The command that trains this entry's runs, whichever of run and report wrote the files.
    where = [] if root is None else ["--output", str(root)]
    record = provenance(PROG, ["run", name, "--seeds", str(seeds), *where])
    record["report_only"] = report_only
    comparison = load_comparison(args, output)
    summary = None
    if not report_only:
        log_file = install(output / LOG_FILE_NAME)
        for _ in train_missing(comparison, log_file):
            summary = write_report(name, _finished(comparison), record, output)
    if summary is None:
        if not comparison.finished:
            raise SystemExit(f"{PROG}: {name} has no finished run in {output / 'runs'}: run it first")
        summary = write_report(name, _finished(comparison), record, output)
    print(_headline(summary))
    print(f"wrote {output / 'README.md'}, {output / 'summary.json'} and {output / 'curves.png'}")
    return summary


def _finished(comparison) -> list[dict[str, Any]]:
    return [comparison.finished[index] for index in sorted(comparison.finished)]


def _headline(summary: dict[str, Any]) -> str:
    before, after = summary["before"], summary["after"]
    verdict = "gains with power" if summary["gains_with_power"] else "no powered gain yet"
    return (
        f"{summary['entry']}: {len(summary['seeds'])} seeds, before {before['mean']:.3f} -> after "
        f"{after['mean']:.3f} ({100 * summary['gain']:+.1f} points; {verdict})"
    )


def check_entry(
    name: str, seed: int | None, output: Path | None, argv: list[str], coverage: float = 0.95
) -> bool:
    """Trains one seed of the entry and says whether its curve falls inside the band of the recorded seeds at
    ``coverage`` (True)."""
    recorded_file = lab_entries.RESULTS / name / "summary.json"
    if not recorded_file.is_file():
        raise SystemExit(f"{PROG}: {name} has no record ({recorded_file}); make it with `{PROG} run {name}`")
    recorded = json.loads(recorded_file.read_text())
    seeds = recorded["seeds"]
    seed = max(seeds) + 1 if seed is None else seed
    output = output or Path(f"results/lab-check-{name}-{time.strftime('%Y%m%d-%H%M%S')}")
    args = comparison_args(name, seed + 1, output)
    arm = args.arms[0]
    run_of = run_settings(args, args.envs[0], arm, seed)
    config = workload_config(run_of, PROG)
    log_file = install(output / LOG_FILE_NAME)
    start_ray(runtime_env=worker_runtime_env(log_file))
    run = train_and_evaluate(run_of, config, saved_settings(run_of, config), arm.label)
    save_run(run_path(output, args.envs[0], arm, seed), run)
    iterations, curve = lab_report.curve_of(run)
    if iterations != recorded["band"]["iteration"]:
        raise SystemExit(
            f"{PROG}: the re-run was evaluated at {iterations}, the record at "
            f"{recorded['band']['iteration']}: the entry's settings changed since it was recorded; "
            "re-record it with `run`"
        )
    here, there = machine(), recorded["provenance"]["machine"]
    same_kind = (here["cpu_model"], here["cpu_flags"]) == (there["cpu_model"], there["cpu_flags"])
    recorded_curves = list(recorded["curves"].values())
    if same_kind:
        band = lab_report.band_of(iterations, recorded_curves, coverage)
        outside = lab_report.outside_band(band, curve)
    else:  # the start moves between CPU kinds: compare each curve's change from its own start
        band = lab_report.band_of(*lab_report.changes(iterations, recorded_curves), coverage, clip=False)
        outside = lab_report.outside_band(band, lab_report.changes(iterations, [curve])[1][0])
    lines = [
        f"{name} seed {seed}: " + ", ".join(f"{i}: {v:.3f}" for i, v in zip(iterations, curve, strict=True))
    ]
    if str(seed) in recorded["curves"]:
        differences = [abs(a - b) for a, b in zip(curve, recorded["curves"][str(seed)], strict=True)]
        same = "exactly" if max(differences) == 0 else f"within {max(differences):.3f} at most"
        lines.append(f"the recorded seed {seed} is reproduced {same}")
    measured = "the curve" if same_kind else "the curve's change from its start"
    if not same_kind:
        lines.append(
            f"note: the record was made on {there['cpu_model']} ({', '.join(there['cpu_flags'])}), this run "
            f"on {here['cpu_model']} ({', '.join(here['cpu_flags'])}): the start moves between CPU kinds "
            "(the warm start's float32 rounding lands on another model), so each curve's change from its own "
            "start is checked against the recorded seeds' changes"
        )
    if outside:
        lines.append(f"OUTSIDE: {measured} leaves the {coverage:.0%} band of the recorded seeds at {outside}")
    else:
        lines.append(
            f"inside: {measured} stays in the {coverage:.0%} band of the {band['n']} recorded seeds at every "
            "evaluation"
        )
    summary = {
        "provenance": provenance(PROG, argv),
        "entry": name,
        "seed": seed,
        "iterations": iterations,
        "curve": curve,
        "coverage": coverage,
        "compared": "curve" if same_kind else "change from the start",
        "band": band,
        "outside_band_at": outside,
        "inside": not outside,
    }
    (output / "check.json").write_text(dumps(summary, indent=1))
    if same_kind:
        lab_report.plot({**recorded, "band": band}, output / "curves.png", check=curve)
    print("\n".join(lines))
    print(f"wrote {output / 'check.json'}" + (f" and {output / 'curves.png'}" if same_kind else ""))
    return not outside


def list_entries() -> None:
    for name, path in entries().items():
        summary_file = lab_entries.RESULTS / name / "summary.json"
        shown = (
            _headline(json.loads(summary_file.read_text()))
            if summary_file.is_file()
            else f"{name}: no record"
        )
        print(f"{shown}  [{path.relative_to(REPOSITORY)}]")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the entries and what their records show")
    run = commands.add_parser("run", help="train an entry's missing seeds and write its report")
    run.add_argument("entries", nargs="*", default=["all"], help="entry names, or all (default)")
    run.add_argument(
        "--seeds",
        type=int,
        default=None,
        help=f"seeds 0..n-1 (default: those recorded, at least {DEFAULT_SEEDS}; "
        f"{DEFAULT_SEEDS_LARGER_MODEL} for an entry at a larger model's scale such as smollm2)",
    )
    run.add_argument(
        "--output",
        type=Path,
        default=None,
        help="the folder of the entries' folders (default docs/results/lab)",
    )
    report = commands.add_parser("report", help="rewrite an entry's report from its saved runs")
    report.add_argument("entries", nargs="*", default=["all"], help="entry names, or all (default)")
    report.add_argument("--seeds", type=int, default=None, help="seeds 0..n-1 (default: every seed recorded)")
    check = commands.add_parser("check", help="re-run one seed and test it against the recorded band")
    check.add_argument("entry")
    check.add_argument("--seed", type=int, default=None, help="default: the first seed the record lacks")
    check.add_argument(
        "--coverage",
        type=float,
        default=0.95,
        help="probability that a sound run's curve falls inside the band (default %(default)s)",
    )
    check.add_argument("--output", type=Path, default=None, help="default results/lab-check-<entry>-<time>")
    args = parser.parse_args(argv)
    if getattr(args, "seeds", None) is not None and args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if not 0 < getattr(args, "coverage", 0.5) < 1:
        parser.error(f"--coverage must be between 0 and 1, got {args.coverage}")
    if getattr(args, "seed", None) is not None and args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if args.command in ("run", "report"):
        args.entries = list(entries()) if args.entries in (["all"], []) else args.entries
        for name in args.entries:
            entry_file(name)
    return args


def main(argv: list[str] | None = None) -> Any:
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(arguments)
    if args.command == "list":
        return list_entries()
    if args.command == "check":
        inside = check_entry(args.entry, args.seed, args.output, arguments, args.coverage)
        if argv is None:
            sys.exit(0 if inside else 1)
        return inside
    return {
        name: run_entry(name, args.seeds, args.command == "report", getattr(args, "output", None))
        for name in args.entries
    }


if __name__ == "__main__":
    main()
