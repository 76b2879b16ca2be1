"""The README's per-env RL table and its replay table, written from the results files: ``python -m
experiments.results_table``.

Rewrites only the blocks between :data:`BEGIN` and :data:`END` and between :data:`REPLAY_BEGIN` and
:data:`REPLAY_END` in README.md (``--check``: exits 1, changing nothing, when a block differs from what the
files give; tests/experiments/test_results_table.py runs it).
Every figure comes from a results file under docs/results/ (docs/results/README.md): the default job's
``default_job/summary.json``, the replay-mode comparison's ``compare-FrozenLake.json``, the tiny warm starts'
``tiny_warm_starts/results.json``, the SmolLM2 runs' ``smollm2_rl/results.json`` and the ecosystem envs'
``experiments.evaluate --train`` reports (:data:`ECOSYSTEM`), the comparisons over seeds
(:data:`COMPARISONS`, :data:`REPLAY_STUDY`) and FreshPER's Table 1 (``experiments/common/freshper_paper.py``);
the words (env, model, what the row shows, the links) are written here, one row each.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from algorithms.replay import REPLAY_MODES
from algorithms.warm_start import WARM_START_STEPS
from experiments.common.freshper_paper import PAPER_TABLE_1
from experiments.common.results_json import REPOSITORY
from experiments.common.significance import intervals_overlap, success_change

PROG = "python -m experiments.results_table"
README = REPOSITORY / "README.md"
RESULTS = REPOSITORY / "docs" / "results"
BEGIN = (
    "<!-- results-table: written by python -m experiments.results_table from docs/results/; edit those -->"
)
END = "<!-- /results-table -->"
HEADER = [
    "| env | model (warm-start steps) | start | after RL | does RL help? | details |",
    "|---|---|---|---|---|---|",
]
HISTORY = "docs/results/history.md"
SMOLLM2_RUNS = f"[SmolLM2 runs]({HISTORY}#smollm2-135m-instruct-per-env)"
TINY_WARM_STARTS = f"[tiny warm starts]({HISTORY}#tiny-model-warm-starts)"
# Envs of the ecosystem libraries (envs/ecosystem/) trained with SmolLM2: the row's env name -> the folder of
# its ``experiments.evaluate --train`` report under docs/results/.
ECOSYSTEM = {
    "reasoning-gym ChainSum": "benchmark/ecosystem-smollm2/chain-sum",
    "BabyAI GoToLocal": "benchmark/ecosystem-smollm2/babyai-go-to-local",
}

# experiments.compare folders of SmolLM2 arms over seeds, (env name, folder under docs/results): one row per
# arm, each against the warm start on its seeds and against the first arm, placed after the env's other rows.
COMPARISONS: list[tuple[str, str]] = [
    ("FrozenLake", "compare/gigpo-FrozenLake-smollm2"),
    ("Sokoban", "compare/gigpo-Sokoban-smollm2"),
    ("Math", "compare/entropy-guard-Math-smollm2"),
]

REPLAY_BEGIN = (
    "<!-- replay-table: written by python -m experiments.results_table from docs/results/; edit those -->"
)
REPLAY_END = "<!-- /replay-table -->"
REPLAY_HEADER = [
    "| task | source: model, measure | on-policy | standard PER | FreshPER | FreshPER, polynomial decay | "
    "FreshPER minus on-policy; minus PER | details |",
    "|---|---|---|---|---|---|---|---|",
]
# The replay study, task by task of FreshPER's Table 1: (the paper's task, our env and model, our
# experiments.compare results and report under docs/results, or why there are none).
REPLAY_STUDY: list[tuple[str, str, str, str, str]] = [
    (
        "NQ Search (LLM)",
        "NQSearch, SmolLM2 (15)",
        "compare/replay-NQSearch-smollm2/results.json",
        "compare/replay-NQSearch-smollm2/comparison.md",
        "",
    ),
    (
        "Sokoban Simple (LLM)",
        "Sokoban, SmolLM2 (60)",
        "",
        "",
        "not run: RL does not improve SmolLM2 on Sokoban (the table above): replay has nothing to speed up",
    ),
    ("FrozenLake (LLM)", "FrozenLake, tiny LM (400)", "compare-FrozenLake.json", "compare-FrozenLake.md", ""),
    (
        "FrozenLake (VLM)",
        "FrozenLakeVision, tiny VLM (300)",
        "compare/replay-FrozenLakeVision-tiny/results.json",
        "compare/replay-FrozenLakeVision-tiny/comparison.md",
        "",
    ),
]
# The tau sweeps of the replay study: (the paper's task, our env and model, the experiments.sweep folder under
# docs/results whose summary.json gives the grid points). docs/replay.md#sweeping-tau has the command.
TAU_SWEEPS: list[tuple[str, str, str]] = [
    ("NQ Search (LLM)", "NQSearch, SmolLM2 (15)", "sweeps/tau-NQSearch-smollm2"),
]
SWEEP_HEADER = [
    "| task | freshrl: model | tau | eps_high | seeds | final validation success | peak validation success "
    "| minutes per trial | details |",
    "|---|---|---|---|---|---|---|---|---|",
]


def load(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def pct(value: float) -> str:
    """0.273 -> ``27.3%``."""
    return f"{100 * value:.1f}%"


def rate(metrics: dict[str, Any]) -> str:
    """Success with its 95% interval: ``27.3% (20.4-35.6%)``."""
    low, high = 100 * metrics["success_ci95_low"], 100 * metrics["success_ci95_high"]
    return f"{pct(metrics['success'])} ({low:.1f}-{high:.1f}%)"


def points(value: float) -> str:
    """A difference of success rates in percentage points: ``+8.6 points``."""
    return f"{value:+.1f} points"


def overlap(before: dict[str, Any], after: dict[str, Any]) -> str:
    return "intervals overlap" if intervals_overlap(before, after) else "intervals separated"


def test_of(summary: dict[str, Any]) -> str:
    """The two-proportion test experiments.train records (``change``), where the summary has it."""
    change = summary.get("change")
    return "" if change is None else f" (two-proportion p = {change['p_value']:.2g})"


def trained_row(name: str, folder: str) -> list[str]:
    """The row of an ``experiments.evaluate --train`` report of one env: its first and last evaluations, and
    the two-proportion test between them (the same validation tasks; the test ignores that pairing, so it is
    conservative)."""
    report = load(f"{folder}/report.json")
    (entry,) = report["envs"].values()
    start, end = entry["curve"][0], entry["curve"][-1]
    episodes = {"num_episodes": report["tasks"] * report["samples"]}  # curve points do not keep the count
    change = success_change({**start, **episodes}, {**end, **episodes})
    gain, p_value = 100 * change["difference"], change["p_value"]
    test = f"{points(gain)}, {overlap(start, end)} (two-proportion p = {p_value:.2g})"
    verdict = "**yes**" if gain > 0 and p_value < 0.05 else "not shown" if gain > 0 else "**no**"
    return [
        name,
        f"SmolLM2 ({entry['settings']['warm_start_steps']})",
        rate(start),
        f"{rate(end)} after {end['iteration']} iterations",
        f"{verdict}: {test}",
        f"[report](docs/results/{folder}/report.md)",
    ]


def over_seeds(figure: dict[str, Any]) -> str:
    """A mean over seeds with its 95% t interval: ``27.3% ± 4.1``."""
    half = "" if figure["ci95"] is None else f" ± {100 * figure['ci95']:.1f}"
    return f"{pct(figure['mean'])}{half}"


def compared_rows(name: str, folder: str) -> list[list[str]]:
    """The rows of an ``experiments.compare`` of arms over seeds: per arm, held-out success at the start and
    after training (means over seeds with 95% t intervals), the change on each seed with the paired t-test
    over seeds, and Welch's test against the first arm."""
    from scipy import stats

    results = load(f"{folder}/results.json")
    ((env, cells),) = results["aggregate"].items()
    reference = results["reference"]
    rows = []
    for arm, cell in cells.items():
        runs = sorted(
            (r for r in results["runs"] if r["env"] == env and r["arm"] == arm), key=lambda r: r["seed"]
        )
        gains = [r["final"] - r["initial"] for r in runs]
        paired = stats.ttest_rel([r["final"] for r in runs], [r["initial"] for r in runs]).pvalue
        paired_p = "n/a" if paired != paired else f"{paired:.2g}"  # NaN: every seed changed by the same
        every = all(gain > 0 for gain in gains)
        verdict = (
            "**yes**" if every and paired_p != "n/a" and paired < 0.05 else "not shown" if every else "**no**"
        )
        each = ", ".join(f"{100 * gain:+.1f}" for gain in gains)
        test = f"per seed {each} points (paired p = {paired_p})"
        against = cell.get("vs_reference")
        if against:
            test += f"; against {reference}: Welch p = {against['final']['p_value']:.2g}"
        iterations = runs[0]["curve"][-1]["iteration"]
        settings = runs[0]["settings"]
        env_config = ", ".join(f"{key}={value}" for key, value in settings.get("env_config", {}).items())
        rows.append(
            [
                name,
                f"SmolLM2 ({settings['warm_start_steps']}), {len(runs)} seeds, `{arm}`"
                + (f"; env `{env_config}`" if env_config else ""),
                over_seeds(cell["initial"]),
                f"{over_seeds(cell['final'])} after {iterations} iterations "
                f"(peak {over_seeds(cell['peak'])})",
                f"{verdict}: {test}",
                f"[comparison](docs/results/{folder}/comparison.md)",
            ]
        )
    return rows


def rows() -> list[list[str]]:
    """The table's rows (cells without the pipes)."""
    job = load("default_job/summary.json")
    compared = load("compare-FrozenLake.json")["aggregate"]["freshrl/FrozenLake-v0"]
    tiny = load("tiny_warm_starts/results.json")["envs"]
    smol = load("smollm2_rl/results.json")["runs"]

    before, after = job["before"], job["after"]
    gain = points(100 * (after["success"] - before["success"]))
    default_job = [
        "FrozenLake",
        # None: the env's default steps (its summary's model path, warm-<env>-steps<N>-..., names them too).
        f"tiny LM ({job['warm_start_steps'] or WARM_START_STEPS[job['env']]})",
        rate(before),
        f"{rate(after)} after {job['iterations']} iterations (`make demo`, {job['evaluation_num_tasks']} "
        "tasks)",
        f"{gain}, {overlap(before, after)}{test_of(job)}",
        f"[default job]({HISTORY}#the-default-job-make-demo)",
    ]

    peaks = [mode["peak"]["mean"] for mode in compared.values()]
    finals = [mode["final"]["mean"] for mode in compared.values()]
    start = next(iter(compared.values()))["initial"]["mean"]
    seeds = len(next(iter(compared.values()))["seeds"])
    at_peak = round(100 * (sum(peaks) / len(peaks) - start))
    modes = [
        "FrozenLake",
        f"tiny LM ({tiny['freshrl/FrozenLake-v0']['warm_start_steps']}), {seeds} seeds per replay mode",
        f"{pct(start)} (128 tasks)",
        f"peak {100 * min(peaks):.1f}-{pct(max(peaks))}, final {100 * min(finals):.1f}-{pct(max(finals))} "
        f"(means over {seeds} seeds, 30 iterations)",
        f"yes, ~{at_peak:+d} points at peak, for every replay mode alike",
        "[compare-FrozenLake.md](docs/results/compare-FrozenLake.md)",
    ]

    def tiny_row(env: str, name: str) -> list[str]:
        entry = tiny[env]
        model = f"{entry['model']} ({entry['warm_start_steps']})"
        return [name, model, rate(entry["warm_started"]), "not measured", "-", TINY_WARM_STARTS]

    lake, lake_1 = smol["FrozenLake"], smol["FrozenLake, seed 1"]
    sokoban, sokoban_hot = smol["Sokoban"], smol["Sokoban, RL temperature 1.2"]
    math, math_16 = smol["Math"], smol["Math, 20-step warm start, groups of 16"]
    math_hot = smol["Math, 20-step warm start, groups of 16, RL temperature 1.2"]
    peak = math_hot["evaluations"][0]
    math_hot_1 = smol["Math, 20-step warm start, groups of 16, RL temperature 1.2, seed 1"]
    search = smol["NQSearch"]
    table_rows = [
        default_job,
        modes,
        [
            "FrozenLake",
            f"SmolLM2 ({lake['warm_start_steps']})",
            rate(lake["start"]),
            f"{rate(lake['after'])} after {lake['after']['iteration']} iterations",
            f"**yes**: {points(lake['stated']['gain_points'])}, {overlap(lake['start'], lake['after'])}; "
            f"seed 1 {lake_1['stated']['gain_points']:+.1f} (Fisher exact p = "
            f"{lake_1['stated']['fisher_exact_p']})",
            SMOLLM2_RUNS,
        ],
        tiny_row("freshrl/FrozenLakeVision-v0", "FrozenLakeVision"),
        tiny_row("freshrl/Sokoban-v0", "Sokoban"),
        [
            "Sokoban",
            f"SmolLM2 ({sokoban['warm_start_steps']})",
            rate(sokoban["start"]),
            f"{rate(sokoban['after'])} after {sokoban['after']['iteration']} iterations; "
            f"{pct(sokoban_hot['after']['success'])} at RL temperature 1.2",
            "**no**",
            SMOLLM2_RUNS,
        ],
        tiny_row("freshrl/Math-v0", "Math"),
        [
            "Math",
            f"SmolLM2 ({math['warm_start_steps']}), {len(math['seeds'])} seeds",
            f"{pct(math['start']['success'])} ({math['start']['note']})",
            f"{rate(math['after'])} after {math['after']['iteration']} iterations, both seeds",
            "**no**",
            f"{SMOLLM2_RUNS}, [backfill](docs/results/compare/smollm2-math-backfill/comparison.md)",
        ],
        [
            "Math",
            f"SmolLM2 ({math_16['warm_start_steps']}), groups of 16",
            rate(math_16["start"]),
            f"{rate(math_16['after'])} after {math_16['after']['iteration']}; at RL temperature 1.2, "
            f"{pct(peak['success'])} after {peak['iteration']} then "
            f"{pct(math_hot['after']['success'])} after {math_hot['after']['iteration']} (seed 1: "
            f"{pct(math_hot_1['start']['success'])} -> {pct(math_hot_1['after']['success'])})",
            "**no**: no setting tried gives a gain that holds",
            SMOLLM2_RUNS,
        ],
        tiny_row("freshrl/NQSearch-v0", "NQSearch"),
        [
            "NQSearch",
            f"SmolLM2 ({search['warm_start_steps']})",
            rate(search["start"]),
            f"{rate(search['after'])} after {search['after']['iteration']} iterations",
            f"at the edge: {points(search['stated']['gain_points'])} on one seed, Fisher exact p = "
            f"{search['stated']['fisher_exact_p']}, {overlap(search['start'], search['after'])}",
            SMOLLM2_RUNS,
        ],
        *(trained_row(name, folder) for name, folder in ECOSYSTEM.items()),
    ]
    for name, folder in COMPARISONS:
        after = max((k + 1 for k, row in enumerate(table_rows) if row[0] == name), default=len(table_rows))
        table_rows[after:after] = compared_rows(name, folder)
    return table_rows


def replay_rows() -> list[list[str]]:
    """FreshPER's Table 1 and ours, task by task: the paper's peak figures, then our peak and final
    validation success per replay mode (means over seeds with 95% t intervals) with Welch's test of FreshPER
    against on-policy and against PER, or why the task is not measured."""
    table_rows = []
    for task, ours, results_file, report, not_run in REPLAY_STUDY:
        metric, *paper = PAPER_TABLE_1[task]
        on_policy, per, fresh = paper
        table_rows.append(
            [
                task,
                f"FreshPER paper: Qwen2.5-class, REINFORCE++; {metric}, peak",
                *(f"{value:.3f}" for value in paper),
                "-",
                f"{fresh - on_policy:+.3f}; {fresh - per:+.3f} (no spread published)",
                "FreshPER paper, Table 1",
            ]
        )
        if not results_file:
            table_rows.append([task, f"freshrl: {ours}", not_run, "", "", "", "", ""])
            continue
        results = load(results_file)
        (cells,) = results["aggregate"].values()
        seeds = sorted({len(cell["seeds"]) for cell in cells.values()})
        counted = f"{seeds[0]} seeds" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]} seeds per mode"
        # Every mode starts from the same model; its success before training, over every run.
        runs = sum(len(cell["seeds"]) for cell in cells.values())
        start = sum(cell["initial"]["mean"] * len(cell["seeds"]) for cell in cells.values()) / runs
        missing = results.get("missing", [])
        if missing:
            done = results["planned_runs"] - len(missing)
            counted += f", partial: {done} of {results['planned_runs']} runs"
        for key in ("peak", "final"):
            table_rows.append(
                [
                    task,
                    f"freshrl: {ours}, {counted}; validation success from {start:.3f}, {key}",
                    *(_over_seeds_cell(cells.get(mode, {}).get(key), seeds[-1]) for mode in REPLAY_MODES),
                    "; ".join(_welch(cells, key, other) for other in ("on_policy", "per")),
                    f"[comparison](docs/results/{report})",
                ]
            )
    return table_rows


def sweep_rows() -> list[list[str]]:
    """Each tau sweep's grid points (mean over seeds with the 95% t interval, the best point in bold) from
    its ``summary.json``, or a row saying it is not run yet."""
    from experiments.common.sweep_points import tau_label

    table_rows = []
    for task, ours, folder in TAU_SWEEPS:
        summary_file = RESULTS / folder / "summary.json"
        if not summary_file.exists():
            table_rows.append([task, ours, "not run yet", "", "", "", "", "", ""])
            continue
        summary = load(f"{folder}/summary.json")
        model = f"{ours}, {summary['iterations']} iterations a trial" if "iterations" in summary else ours
        if summary.get("missing"):
            done = summary["planned_trials"] - len(summary["missing"])
            model += f", partial: {done} of {summary['planned_trials']} trials"
        if not summary["points"]:
            table_rows.append([task, model, "started: no trial finished yet", "", "", "", "", "", ""])
            continue
        best = summary.get("best_point")
        for point in summary["points"]:
            # summary.json writes tau = inf (no decay) as null: strict JSON has no infinity.
            tau = tau_label(math.inf if point["tau"] is None else float(point["tau"]))
            marked = f"**{tau} (best)**" if point == best else tau
            minutes = point.get("minutes_per_trial")
            table_rows.append(
                [
                    task,
                    model,
                    marked,
                    f"{point['eps_high']:g}",
                    str(len(point["seeds"])),
                    _over_seeds_cell(point["final"], len(point["seeds"])),
                    _over_seeds_cell(point["peak"], len(point["seeds"])),
                    "n/a" if minutes is None or minutes != minutes else f"{minutes:.1f}",
                    f"[sweep](docs/results/{folder}/summary.md)",
                ]
            )
    return table_rows


def _over_seeds_cell(figure: dict[str, Any] | None, seeds: int) -> str:
    """``0.656 ± 0.051`` (and its seeds where fewer than the most any mode has); empty when not run."""
    if figure is None:
        return ""
    half = "" if figure.get("ci95") is None else f" ± {figure['ci95']:.3f}"
    fewer = f" (n={figure['n']})" if figure["n"] < seeds else ""
    return f"{figure['mean']:.3f}{half}{fewer}"


def _welch(cells: dict[str, Any], key: str, other: str) -> str:
    """FreshPER minus ``other`` on ``key`` with Welch's p over seeds (from the means, stds and seeds)."""
    from scipy import stats

    if "freshper" not in cells or other not in cells:
        return "n/a"
    fresh, them = cells["freshper"][key], cells[other][key]
    difference = f"{fresh['mean'] - them['mean']:+.3f}"
    if min(fresh["n"], them["n"]) < 2:
        return f"{difference} (p n/a, one seed)"
    test = stats.ttest_ind_from_stats(
        fresh["mean"], fresh["std"], fresh["n"], them["mean"], them["std"], them["n"], equal_var=False
    )
    p_value = 1.0 if test.pvalue != test.pvalue else test.pvalue  # NaN: no spread and no difference
    return f"{difference} (Welch p = {p_value:.2g})"


def table() -> str:
    """The per-env block as README.md holds it, the markers included."""
    lines = [BEGIN, *HEADER, *("| " + " | ".join(row) + " |" for row in rows()), END]
    return "\n".join(lines)


def replay_table() -> str:
    """The replay block as README.md holds it, the markers included."""
    lines = [
        REPLAY_BEGIN,
        *REPLAY_HEADER,
        *("| " + " | ".join(row) + " |" for row in replay_rows()),
        "",
        "The tau sweeps (`experiments.sweep`; held-out success after the last iteration, mean over seeds "
        "± 95% t interval; tau `no decay` is PER's priorities):",
        "",
        *SWEEP_HEADER,
        *("| " + " | ".join(row) + " |" for row in sweep_rows()),
        REPLAY_END,
    ]
    return "\n".join(lines)


def with_table(readme: str) -> str:
    """``readme`` with the blocks between the markers replaced by :func:`table` and :func:`replay_table`.
    ValueError when a block's markers are not there once each, in order."""
    for begin, end, block in ((BEGIN, END, table), (REPLAY_BEGIN, REPLAY_END, replay_table)):
        start, stop = readme.find(begin), readme.find(end)
        if readme.count(begin) != 1 or readme.count(end) != 1 or stop < start:
            raise ValueError(f"README.md must hold the lines {begin!r} and {end!r} once each, in that order")
        readme = readme[:start] + block() + readme[stop + len(end) :]
    return readme


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md's table is not up to date")
    args = parser.parse_args(argv)
    current = README.read_text()
    try:
        updated = with_table(current)
    except ValueError as error:
        parser.error(str(error))
    if updated == current:
        print(f"{README.name}: the results table is up to date")
        return 0
    if args.check:
        print(f"{README.name}: the results table differs from docs/results/; run {PROG}")
        return 1
    README.write_text(updated)
    print(f"{README.name}: rewrote the results table from docs/results/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
