"""The replay study (docs/replay.md, "The replay study: pre-registration"): on-policy, PER, FreshPER and
FreshPER with polynomial decay on a learning-lab entry in one regime, compared on held-out success per
training episode: ``python -m experiments.replay_study``.

A regime is data (``experiments/replay_regimes.yaml``): keys laid over the entry's settings
file (``experiments/settings/lab/<entry>.yaml``). The runs are ``experiments.compare``'s own (trained, saved
and resumed by its code, ``--modes on_policy per freshper freshper_poly``), one file per mode and seed, in
``docs/results/replay_study/<entry>-<regime>/``: ``runs/``, ``README.md``, ``summary.json`` (provenance and
the figures of ``experiments/common/replay_study_report.py``) and ``curves.png``.

    python -m experiments.replay_study run frozen_lake --regime rollout_limited   # 4 modes x 5 seeds
    python -m experiments.replay_study report frozen_lake --regime rollout_limited
    python -m experiments.replay_study family --regime rollout_limited             # Holm over the entries

``run`` resumes: finished runs are read back (one saved with other settings is an error) and the missing
ones trained, the report rewritten after each. Its iterations default to the study's saved runs', else to
the point where the entry's on-policy lab curve reaches 90% of its gain (:func:`iterations_from_curve`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.common import lab_entries, replay_study_report
from experiments.common.comparison_options import parse_args as comparison_options
from experiments.common.comparison_runs import Comparison, load_comparison, train_missing
from experiments.common.quiet_logs import LOG_FILE_NAME, install
from experiments.common.results_json import REPOSITORY, dumps, provenance
from experiments.common.run_config import build_config, load_settings

if TYPE_CHECKING:
    from algorithms.dapo import DAPOConfig

PROG = "python -m experiments.replay_study"
REGIMES_FILE = REPOSITORY / "experiments" / "replay_regimes.yaml"  # not a settings file: keys laid over one
STUDY_RESULTS = REPOSITORY / "docs" / "results" / "replay_study"
DEFAULT_SEEDS = 5  # the pre-registration's seeds 0-4
# The pre-registration's iterations: where the on-policy lab curve reaches this share of its final gain,
# rounded up to the evaluation interval, at most MAX_ITERATIONS.
REACHED = 0.9
MAX_ITERATIONS = 100


def entry_file(name: str) -> Path:
    """The lab entry's settings file; SystemExit naming the entries when there is none."""
    return lab_entries.entry_file(name, PROG)


def regimes() -> dict[str, dict[str, dict[str, Any]]]:
    """The regimes of :data:`REGIMES_FILE`: name -> {"set": {key: value}, "times": {key: factor}}."""
    import yaml

    loaded = yaml.safe_load(REGIMES_FILE.read_text()) or {}
    for name, regime in loaded.items():
        unknown = set(regime or {}) - {"set", "times"}
        if unknown:
            raise SystemExit(
                f"{PROG}: {REGIMES_FILE}: regime {name} has {sorted(unknown)}; it takes set, times"
            )
    return {name: {"set": {}, "times": {}, **(regime or {})} for name, regime in loaded.items()}


def entry_config(entry: str) -> DAPOConfig:
    """The config the entry's settings file resolves to (over its scale)."""
    return build_config(load_settings(entry_file(entry)))


def regime_keys(regime: str, entry: str) -> dict[str, Any]:
    """The keys ``regime`` sets on ``entry``: its ``set`` values, and each ``times`` factor times the value
    the entry's settings resolve to (an integer key must stay one)."""
    known = regimes()
    if regime not in known:
        raise SystemExit(f"{PROG}: no regime {regime!r}; the regimes are {sorted(known)} ({REGIMES_FILE})")
    keys = dict(known[regime]["set"])
    config = entry_config(entry) if known[regime]["times"] else None
    for key, factor in known[regime]["times"].items():
        base = getattr(config, key)
        value = base * factor
        if isinstance(base, int):
            if value != int(value):
                raise SystemExit(f"{PROG}: {entry}'s {key} {base} x {factor} is not an integer")
            value = int(value)
        keys[key] = value
    return keys


def iterations_from_curve(iterations: Sequence[int], mean: Sequence[float], interval: int) -> tuple[int, str]:
    """The pre-registration's iterations from an on-policy mean curve (``mean`` at ``iterations``, the
    first the start): the first evaluation where it reaches :data:`REACHED` of its final gain, rounded up to
    ``interval``, at most :data:`MAX_ITERATIONS`; with the reason in words. ValueError for a curve that does
    not gain."""
    start, end = mean[0], mean[-1]
    if end <= start:
        raise ValueError(f"the mean curve does not gain ({start:.3f} -> {end:.3f}): it has no 90% point")
    target = start + REACHED * (end - start)
    reached = next(i for i, value in zip(iterations, mean, strict=True) if value >= target)
    rounded = math.ceil(reached / interval) * interval
    chosen = min(rounded, MAX_ITERATIONS)
    reason = (
        f"the lab's on-policy mean curve ({start:.3f} -> {end:.3f}) first reaches {REACHED:.0%} of its gain "
        f"({target:.3f}) at iteration {reached}, rounded up to the evaluation interval {interval}"
    )
    return chosen, reason + (f" ({rounded}), at most {MAX_ITERATIONS}" if chosen < rounded else "")


def lab_iterations(entry: str) -> tuple[int, str]:
    """:func:`iterations_from_curve` of the entry's lab record (its band's mean curve) and its evaluation
    interval."""
    record = lab_entries.RESULTS / entry / "summary.json"
    if not record.is_file():
        raise SystemExit(
            f"{PROG}: {entry} has no lab record ({record}) to choose the iterations from: make it with "
            f"`python -m experiments.lab run {entry}`, or give --iterations"
        )
    band = json.loads(record.read_text())["band"]
    interval = entry_config(entry).evaluation_interval
    try:
        return iterations_from_curve(band["iteration"], band["mean"], interval)
    except ValueError as error:
        raise SystemExit(f"{PROG}: {entry}: {error}; give --iterations") from None


def saved_runs(output: Path) -> list[dict[str, Any]]:
    """The runs saved in a record folder."""
    return [json.loads(path.read_text()) for path in sorted((output / "runs").glob("*.json"))]


def study_iterations(entry: str, output: Path, given: int | None) -> tuple[int, str]:
    """The iterations of the study's runs and why: ``given``, else those of the runs already saved (so a
    study resumes with them), else :func:`lab_iterations`."""
    if given is not None:
        return given, "given"
    saved = {run["settings"]["iterations"] for run in saved_runs(output)}
    if len(saved) > 1:
        raise SystemExit(
            f"{PROG}: {output / 'runs'} holds runs of {sorted(saved)} iterations: one study each"
        )
    if saved:
        return saved.pop(), "the study's saved runs"
    return lab_iterations(entry)


def recorded_seeds(output: Path) -> int:
    """One past the highest seed saved in a record folder (0: none)."""
    saved = [int(path.stem.rpartition("seed")[2]) for path in (output / "runs").glob("*__seed*.json")]
    return max(saved, default=-1) + 1


def comparison_args(
    entry: str, keys: dict[str, Any], iterations: int, seeds: int, output: Path, report_only: bool
) -> argparse.Namespace:
    """The study as ``experiments.compare`` takes it: the entry's settings file, the regime's keys as
    ``--set``, the four modes, so the runs are trained, saved and resumed by the comparison's code."""
    keys_set = [item for key, value in keys.items() for item in ("--set", f"{key}={value}")]
    args = comparison_options(
        ["--settings", str(entry_file(entry)), "--modes", *replay_study_report.MODES, "--seeds", str(seeds)]
        + ["--iterations", str(iterations), "--output", str(output), *keys_set]
    )
    args.report_only = report_only
    return args


def write_report(
    entry: str,
    regime: str,
    comparison: Comparison,
    group_size: int,
    extra: dict[str, Any],
    record: dict[str, Any],
    output: Path,
) -> dict[str, Any]:
    """summary.json, README.md and curves.png of the finished runs in ``output``; ``extra``: what the
    summary records of the command (the regime's keys, the iterations)."""
    runs = [comparison.finished[index] for index in sorted(comparison.finished)]
    summary = replay_study_report.summarize(entry, regime, runs, group_size)
    summary["missing"] = [
        {"mode": arm.label, "seed": seed}
        for index, (_, arm, seed) in enumerate(comparison.jobs)
        if index not in comparison.finished
    ]
    summary.update(extra)
    output.mkdir(parents=True, exist_ok=True)
    (output / "summary.json").write_text(dumps({"provenance": record, **summary}, indent=1))
    settings = entry_file(entry)
    shown = settings.relative_to(REPOSITORY) if settings.is_relative_to(REPOSITORY) else settings
    (output / "README.md").write_text(replay_study_report.markdown(summary, record, str(shown)))
    if summary["seeds"]:
        replay_study_report.plot(summary, output / "curves.png")
    return summary


def run_study(
    entry: str,
    regime: str,
    seeds: int | None,
    iterations: int | None,
    report_only: bool = False,
    root: Path | None = None,
) -> dict[str, Any]:
    """Trains the study's missing runs of ``entry`` x ``regime`` in turn (unless ``report_only``) and
    writes its report after each, in ``root/<entry>-<regime>`` (default :data:`STUDY_RESULTS`). ``seeds``
    None: every seed recorded, and for a run at least :data:`DEFAULT_SEEDS`."""
    output = (root or STUDY_RESULTS) / f"{entry}-{regime}"
    keys = regime_keys(regime, entry)
    recorded = recorded_seeds(output)
    if seeds is None:
        seeds = recorded if report_only and recorded else max(DEFAULT_SEEDS, recorded)
    iterations, reason = study_iterations(entry, output, iterations)
    print(f"{entry} {regime}: {iterations} iterations ({reason}); regime keys {keys or 'none'}")
    args = comparison_args(entry, keys, iterations, seeds, output, report_only)
    where = [] if root is None else ["--output", str(root)]
    arguments = ["run", entry, "--regime", regime, "--seeds", str(seeds), "--iterations", str(iterations)]
    record = provenance(PROG, [*arguments, *where])
    record["report_only"] = report_only
    extra = {"regime_keys": keys, "iterations": iterations, "iterations_reason": reason}
    comparison = load_comparison(args, output)
    summary = None
    if not report_only:
        log_file = install(output / LOG_FILE_NAME)
        for _ in train_missing(comparison, log_file):
            summary = write_report(entry, regime, comparison, args.config.group_size, extra, record, output)
    if summary is None:
        if not comparison.finished:
            raise SystemExit(
                f"{PROG}: {entry}-{regime} has no finished run in {output / 'runs'}: run it first"
            )
        summary = write_report(entry, regime, comparison, args.config.group_size, extra, record, output)
    for test in summary["tests"]:
        print(
            f"{test['hypothesis']} {test['claim']}: {100 * test['difference']:+.1f} points, {test['outcome']}"
        )
    print(f"wrote {output / 'README.md'} and {output / 'summary.json'}")
    return summary


def write_family(regime: str, root: Path | None = None) -> dict[str, Any]:
    """The regime's family over every entry recorded for it in ``root`` (default :data:`STUDY_RESULTS`):
    ``family-<regime>.md`` and ``.json`` there."""
    root = root or STUDY_RESULTS
    summaries = [json.loads(path.read_text()) for path in sorted(root.glob("*/summary.json"))]
    summaries = [summary for summary in summaries if summary["regime"] == regime]
    if not summaries:
        raise SystemExit(f"{PROG}: no entry of the {regime} regime is recorded in {root}")
    table = replay_study_report.family(summaries)
    where = [] if root == STUDY_RESULTS else ["--output", str(root)]
    record = provenance(PROG, ["family", "--regime", regime, *where])
    (root / f"family-{regime}.json").write_text(dumps({"provenance": record, **table}, indent=1))
    (root / f"family-{regime}.md").write_text(replay_study_report.family_markdown(table, record))
    for test in table["tests"]:
        print(f"{test['entry']} {test['hypothesis']} {test['claim']}: {test['outcome']}")
    print(f"wrote {root / f'family-{regime}.md'} and {root / f'family-{regime}.json'}")
    return table


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    names = sorted(regimes())
    run = commands.add_parser("run", help="train an entry x regime's missing runs and write its report")
    report = commands.add_parser("report", help="rewrite an entry x regime's report from its saved runs")
    for command in (run, report):
        command.add_argument("entry", help="a learning-lab entry (experiments/settings/lab/<entry>.yaml)")
        command.add_argument("--regime", required=True, choices=names)
        command.add_argument(
            "--iterations",
            type=int,
            default=None,
            help="training iterations (default: the saved runs', else where the lab curve reaches 90%% of "
            "its gain)",
        )
    run.add_argument(
        "--seeds",
        type=int,
        default=None,
        help=f"seeds 0..n-1 (default: those recorded, at least {DEFAULT_SEEDS})",
    )
    report.add_argument("--seeds", type=int, default=None, help="seeds 0..n-1 (default: every seed recorded)")
    family = commands.add_parser("family", help="the Holm-adjusted family table of a regime's entries")
    family.add_argument("--regime", required=True, choices=names)
    for command in (run, report, family):
        command.add_argument(
            "--output",
            type=Path,
            default=None,
            help="the folder of the study's records (default docs/results/replay_study)",
        )
    args = parser.parse_args(argv)
    for name in ("seeds", "iterations"):
        if getattr(args, name, None) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.command != "family":
        entry_file(args.entry)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command == "family":
        return write_family(args.regime, args.output)
    return run_study(
        args.entry, args.regime, args.seeds, args.iterations, args.command == "report", args.output
    )


if __name__ == "__main__":
    main()
