"""The README's learning-lab table, its per-env RL table, its replay table and its speed block, written from
the results files: ``python -m experiments.results_table``.

Rewrites only the blocks between :data:`LAB_BEGIN` and :data:`LAB_END`, :data:`BEGIN` and :data:`END`,
:data:`REPLAY_BEGIN` and :data:`REPLAY_END`, and the speed block's markers (``experiments/common/
speed_table.py``, from the benchmark records) in README.md (``--check``: exits 1, changing nothing, when a
block differs from what the files give; tests/experiments/test_results_table.py runs it).
Every figure comes from a results file under docs/results/ (docs/results/README.md): the default job's
``default_job/summary.json``, the replay-mode comparison's ``compare-FrozenLake.json``, the tiny warm starts'
``tiny_warm_starts/results.json``, the SmolLM2 runs' ``smollm2_rl/results.json`` and the ecosystem envs'
``experiments.evaluate --train`` reports (:data:`ECOSYSTEM`), the comparisons over seeds
(:data:`COMPARISONS`, :data:`REPLAY_STUDY`) and FreshPER's Table 1 (``experiments/common/freshper_paper.py``);
the learning lab's entries (``lab/<entry>/summary.json``, one row each, ``experiments.lab``); the words (env,
model, what the row shows, the links) are written here, one row each.

Statistics (``experiments/common/significance.py``): each table's tests form named families (:class:`Family`),
Holm-adjusted within each; a cell gives the raw and the adjusted p, and its words (**yes**, separated) follow
the adjusted one.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from algorithms.replay import REPLAY_MODES
from algorithms.warm_start import WARM_START_STEPS
from experiments.common import lab_report
from experiments.common.freshper_paper import PAPER_TABLE_1
from experiments.common.results_json import REPOSITORY
from experiments.common.significance import (
    ALPHA,
    UNPAIRED,
    Significance,
    holm,
    mean_over_seeds,
    paired_seed_test,
    paired_t_test,
    success_change,
    welch_test,
)
from experiments.common.speed_table import BEGIN as SPEED_BEGIN
from experiments.common.speed_table import END as SPEED_END
from experiments.common.speed_table import speed_table

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
NO_PROVENANCE = "recorded before provenance"
# Envs of the ecosystem libraries (envs/ecosystem/) trained with SmolLM2: the row's env name -> the folder of
# its ``experiments.evaluate --train`` report under docs/results/.
ECOSYSTEM = {
    "reasoning-gym ChainSum": "benchmark/ecosystem-smollm2/chain-sum",
    "BabyAI GoToLocal": "benchmark/ecosystem-smollm2/babyai-go-to-local",
}
# An env id's namespace -> the library its rows are named with ("babyai/GoToLocal-v0" is "BabyAI GoToLocal",
# the name of ECOSYSTEM's rows); freshrl's own envs go by their bare name.
LIBRARY_NAMES = {"babyai": "BabyAI", "reasoning_gym": "reasoning-gym", "textarena": "textarena"}

# experiments.compare folders of SmolLM2 arms over seeds, (env name, folder under docs/results, the arms
# shown, None for all): one row per arm, each against the warm start on its seeds and against the comparison's
# reference arm where that is shown too, placed after the env's other rows.
COMPARISONS: list[tuple[str, str, tuple[str, ...] | None]] = [
    ("FrozenLake", "compare/gigpo-FrozenLake-smollm2", None),
    ("Sokoban", "compare/gigpo-Sokoban-smollm2", None),
    ("Math", "compare/entropy-guard-Math-smollm2", None),
    # The replay comparison's on-policy arm: NQSearch's gain over 4 seeds (the modes against each other are
    # the replay table's).
    ("NQSearch", "compare/replay-NQSearch-smollm2", ("on_policy",)),
]

LAB_BEGIN = (
    "<!-- lab-table: written by python -m experiments.results_table from docs/results/lab/; edit those -->"
)
LAB_END = "<!-- /lab-table -->"
LAB_HEADER = [
    "| entry | env setting | model (warm-start steps) | seeds | start | after | blind floor | "
    "gain (95% interval by seed; by task) | gains with power? | details |",
    "|---|---|---|---|---|---|---|---|---|---|",
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
    (
        "FrozenLake (LLM)",
        "FrozenLake, tiny LM (400), fast drift (lr 4e-4)",
        "sweeps/tau-frozen_lake-fast_drift",
    ),
]
# The pre-registered replay study (experiments.replay_study): one row per lab entry x regime recorded under
# docs/results/replay_study, the tests Holm-adjusted over the regime's entries (the study's family).
STUDY_FOLDER = "replay_study"
STUDY_HEADER = [
    "| regime | lab entry | seeds; budget | start | on-policy | standard PER | FreshPER "
    "| FreshPER, polynomial decay | the pre-registered tests | details |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
SWEEP_HEADER = [
    "| task | freshrl: model | tau | eps_high | seeds | AUC | final validation success "
    "| peak validation success | clipped by Clip-Higher | minutes per trial | details |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]
NOT_SWEPT = ["", "", "", "", "", "", "", ""]  # the cells after a sweep row's status

# A table cell: text, or text that needs its family's adjusted p-values, so it is written once every test
# of the table has joined its family.
Cell = str | Callable[[], str]


@dataclass
class Family:
    """A named family of tests whose p-values are adjusted together with Holm's step-down procedure."""

    name: str
    tests: list[Significance] = field(default_factory=list)

    def add(self, test: Significance) -> Significance:
        self.tests.append(test)
        return test

    def adjusted(self, test: Significance) -> float | None:
        """``test``'s Holm-adjusted p within the family (None where its p is None)."""
        index = next(k for k, member in enumerate(self.tests) if member is test)
        return holm([member["p_value"] for member in self.tests])[index]

    def separated(self, test: Significance) -> bool:
        adjusted = self.adjusted(test)
        return adjusted is not None and adjusted < ALPHA

    def p_text(self, test: Significance) -> str:
        """``p = 0.013, Holm 0.16``."""
        if test["p_value"] is None:
            return "p n/a"
        return f"p = {test['p_value']:.2g}, Holm {self.adjusted(test):.2g}"

    def line(self) -> str:
        """The family under its table: its name, its size m (tests with a p-value) and the adjustment."""
        m = sum(1 for test in self.tests if test["p_value"] is not None)
        return f"{self.name}: m = {m} tests, Holm-adjusted"


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


def provenance_note(record: dict[str, Any]) -> str:
    """``; recorded before provenance`` for a results file whose provenance names no commit, else empty."""
    return "" if (record.get("provenance") or {}).get("commit") else f"; {NO_PROVENANCE}"


def named(test: Significance, samples_per_task: int = 1) -> str:
    """The test and its unit: ``paired t-test over 3 seeds``. The unpaired test over episodes of tasks
    sampled k > 1 times says that the row's Wilson intervals treat those samples as independent."""
    unit = test["unit"] if test["n"] == 1 else f"{test['unit']}s"
    said = f"{test['test']} over {test['n']} {unit}"
    if test["test"] == UNPAIRED and samples_per_task > 1:
        said += f"; intervals unclustered ({samples_per_task} samples a task)"
    return said


def gain_words(family: Family, test: Significance) -> str:
    """A gain over the start in words, from the adjusted p: **yes**, **falls** or not separated."""
    if not family.separated(test):
        return "not separated"
    return "**yes**" if test["difference"] > 0 else "**falls**"


def gain(family: Family, test: Significance, samples_per_task: int = 1) -> Callable[[], str]:
    """``**yes**: +11.9 points, <test> over <n> <units>, p = ..., Holm ...``, the test joining ``family``."""
    family.add(test)
    return lambda: (
        f"{gain_words(family, test)}: {points(100 * test['difference'])}, "
        f"{named(test, samples_per_task)}, {family.p_text(test)}"
    )


def evaluation_change(before: dict[str, Any], after: dict[str, Any], episodes: int) -> Significance:
    """The before/after test of two evaluations of ``episodes`` episodes each (records that keep no count).
    Success is taken as the whole number of episodes it rounds to: transcribed records keep it to 3
    decimals, and the difference is then the one the episodes give (0.562 -> 0.688 is 72 -> 88 of 128)."""
    whole = [
        {**e, "num_episodes": episodes, "success": round(e["success"] * episodes) / episodes}
        for e in (before, after)
    ]
    return success_change(*whole)


def recorded_change(summary: dict[str, Any]) -> Significance:
    """The test ``experiments.train`` recorded (``change``), naming the test and unit older records lack
    (they recorded the unpaired two-proportion test over episodes), or the test computed from the two
    evaluations where the summary records none."""
    before, after = summary["before"], summary["after"]
    change = summary.get("change") or success_change(before, after)
    return Significance(
        test=change.get("test", UNPAIRED),
        unit=change.get("unit", "episode"),
        n=change.get("n", before["num_episodes"] + after["num_episodes"]),
        difference=change.get("difference", after["success"] - before["success"]),
        p_value=change["p_value"],
        detectable=change.get("detectable"),
    )


def like_sample(figure: dict[str, Any]) -> list[float]:
    """``n`` values with the recorded mean and standard deviation of a figure over seeds, for records that
    keep only those (``compare-FrozenLake.json``): the t-tests and detectable differences depend on a sample
    only through its mean, standard deviation and size, so they come out as from the seeds themselves."""
    n = figure["n"]
    z = np.arange(n) - (n - 1) / 2
    return list(figure["mean"] + figure["std"] * z / np.std(z, ddof=1))


def trained_row(name: str, folder: str, gains: Family) -> list[Cell]:
    """The row of an ``experiments.evaluate --train`` report of one env: its first and last evaluations, and
    the test between them (``significance.success_change``)."""
    report = load(f"{folder}/report.json")
    (entry,) = report["envs"].values()
    start, end = entry["curve"][0], entry["curve"][-1]
    test = evaluation_change(start, end, report["tasks"] * report["samples"])
    return [
        name,
        f"SmolLM2 ({entry['settings']['warm_start_steps']})",
        rate(start),
        f"{rate(end)} after {end['iteration']} iterations",
        gain(gains, test, report["samples"]),
        f"[report](docs/results/{folder}/report.md){provenance_note(report)}",
    ]


def over_seeds(figure: dict[str, Any]) -> str:
    """A mean over seeds with its 95% t interval: ``27.3% ± 4.1``."""
    half = "" if figure["ci95"] is None else f" ± {100 * figure['ci95']:.1f}"
    return f"{pct(figure['mean'])}{half}"


def by_seed(runs: list[dict[str, Any]], key: str) -> dict[int, float]:
    return {run["seed"]: run[key] for run in runs}


def arm_label(arm: str) -> str:
    """An arm as the command sets it: ``advantage=gigpo``; a replay mode is an arm of ``replay_mode``."""
    return arm if "=" in arm else f"replay_mode={arm}"


def compared_rows(
    name: str, folder: str, shown: tuple[str, ...] | None, gains: Family, arms: Family
) -> list[list[Cell]]:
    """The rows of an ``experiments.compare`` of arms over seeds: per arm, held-out success at the start,
    after training and at its peak (means over seeds with 95% t intervals), the change on each seed with the
    paired t-test over seeds (family ``gains``), and the arm against the reference arm at the end, paired by
    seed where both ran the same seeds (family ``arms``)."""
    results = load(f"{folder}/results.json")
    ((env, cells),) = results["aggregate"].items()
    reference = results["reference"]
    every_run = [r for r in results["runs"] if r["env"] == env]
    rows: list[list[Cell]] = []
    for arm in cells:
        if shown is not None and arm not in shown:
            continue
        runs = sorted((r for r in every_run if r["arm"] == arm), key=lambda r: r["seed"])
        figures = {key: mean_over_seeds([r[key] for r in runs]) for key in ("initial", "final", "peak")}
        change = gains.add(paired_seed_test(by_seed(runs, "final"), by_seed(runs, "initial")))
        against = None
        if arm != reference and (shown is None or reference in shown):
            reference_runs = [r for r in every_run if r["arm"] == reference]
            against = arms.add(paired_seed_test(by_seed(runs, "final"), by_seed(reference_runs, "final")))
        iterations = runs[0]["curve"][-1]["iteration"]
        settings = runs[0]["settings"]
        env_config = ", ".join(f"{key}={value}" for key, value in settings.get("env_config", {}).items())
        rows.append(
            [
                name,
                f"SmolLM2 ({settings['warm_start_steps']}), {len(runs)} seeds, `{arm_label(arm)}`"
                + (f"; env `{env_config}`" if env_config else ""),
                over_seeds(figures["initial"]),
                f"{over_seeds(figures['final'])} after {iterations} iterations "
                f"(peak {over_seeds(figures['peak'])})",
                _compared_cell(runs, change, gains, reference, against, arms),
                f"[comparison](docs/results/{folder}/comparison.md){provenance_note(results)}",
            ]
        )
    return rows


def _compared_cell(
    runs: list[dict[str, Any]],
    change: Significance,
    gains: Family,
    reference: str,
    against: Significance | None,
    arms: Family,
) -> Callable[[], str]:
    def cell() -> str:
        each = ", ".join(f"{100 * (r['final'] - r['initial']):+.1f}" for r in runs)
        said = f"{gain_words(gains, change)}: per seed {each} points; {named(change)}, {gains.p_text(change)}"
        if against is not None:
            words = "separated" if arms.separated(against) else "not separated"
            said += (
                f"; against {arm_label(reference)} at the end: {points(100 * against['difference'])}, "
                f"{named(against)}, {arms.p_text(against)}: {words}"
            )
        return said

    return cell


def modes_row(gains: Family) -> list[Cell]:
    """The 5-seed replay-mode comparison on FrozenLake (means and standard deviations only): each mode's
    final success against the one recorded start (the per-seed starts are not kept), peak beside it; the
    modes against each other are the replay table's (:func:`mode_test`), whose detectable differences say
    how large a difference between them is not excluded."""
    record = load("compare-FrozenLake.json")
    compared = record["aggregate"]["freshrl/FrozenLake-v0"]
    tiny = load("tiny_warm_starts/results.json")["envs"]["freshrl/FrozenLake-v0"]
    start = next(iter(compared.values()))["initial"]["mean"]
    seeds = len(next(iter(compared.values()))["seeds"])
    peaks = [mode["peak"]["mean"] for mode in compared.values()]
    finals = [mode["final"]["mean"] for mode in compared.values()]
    tests = {
        mode: gains.add(paired_t_test([start] * seeds, like_sample(cell["final"]), unit="seed"))
        for mode, cell in compared.items()
    }
    between = [
        test
        for key in ("peak", "final")
        for other in ("on_policy", "per")
        if (test := mode_test(record, compared, key, other)) is not None
    ]
    # Holm's adjustment never lowers a p-value: raw p-values all at or above alpha stay unseparated.
    apart = any(test["p_value"] is not None and test["p_value"] < ALPHA for test in between)
    detectable = [test["detectable"] for test in between if test["detectable"] is not None]
    against = (
        "the modes against each other: the replay table below"
        if apart or not detectable
        else "the modes are not separated from each other (the replay table below; differences up to "
        f"±{min(detectable):.2f}-{max(detectable):.2f} not excluded)"
    )

    def cell() -> str:
        each = ", ".join(
            f"`{mode}` {points(100 * test['difference'])} ({gains.p_text(test)}: {gain_words(gains, test)})"
            for mode, test in tests.items()
        )
        return (
            f"at the end: {each}; one-sample t-test over {seeds} seeds against the one recorded start (the "
            f"per-seed starts are not kept); at peak {100 * (min(peaks) - start):+.1f} to "
            f"{points(100 * (max(peaks) - start))}; {against}"
        )

    return [
        "FrozenLake",
        f"tiny LM ({tiny['warm_start_steps']}), {seeds} seeds per replay mode",
        f"{pct(start)} (128 tasks)",
        f"final {100 * min(finals):.1f}-{pct(max(finals))}, peak {100 * min(peaks):.1f}-{pct(max(peaks))} "
        f"(means over {seeds} seeds, 30 iterations)",
        cell,
        f"[compare-FrozenLake.md](docs/results/compare-FrozenLake.md){provenance_note(record)}",
    ]


def tiny_row(tiny: dict[str, Any], env: str, name: str) -> list[Cell]:
    """A tiny model's warm start (no RL measured), saying when it was measured on tasks shared with
    training (before the splits became content-based)."""
    entry = tiny["envs"][env]
    details = TINY_WARM_STARTS + provenance_note(tiny)
    if not entry["leak_free"]:
        details += "; measured before the content-based splits"
    model = f"{entry['model']} ({entry['warm_start_steps']})"
    return [name, model, rate(entry["warm_started"]), "not measured", "-", details]


def rows() -> tuple[list[list[str]], list[Family]]:
    """The per-env table's rows (cells without the pipes) and its test families."""
    gains = Family("Gain over the start (each row's change in held-out success)")
    arms = Family("Arm against arm (an arm against its comparison's first arm, at the end)")
    job = load("default_job/summary.json")
    tiny = load("tiny_warm_starts/results.json")
    smollm2 = load("smollm2_rl/results.json")
    smol, k = smollm2["runs"], smollm2["evaluation"]["samples_per_task"]
    episodes = smollm2["evaluation"]["tasks"] * k
    smol_details = SMOLLM2_RUNS + provenance_note(smollm2)

    def smol_gain(run: dict[str, Any]) -> Callable[[], str]:
        return gain(gains, evaluation_change(run["start"], run["after"], episodes), k)

    job_gain = gain(gains, recorded_change(job), job["evaluation_samples_per_task"])
    default_job: list[Cell] = [
        "FrozenLake",
        # None: the env's default steps (its summary's model path, warm-<env>-steps<N>-..., names them too).
        f"tiny LM ({job['warm_start_steps'] or WARM_START_STEPS[job['env']]})",
        rate(job["before"]),
        f"{rate(job['after'])} after {job['iterations']} iterations (`make demo`, "
        f"{job['evaluation_num_tasks']} tasks)",
        job_gain,
        f"[default job]({HISTORY}#the-default-job-make-demo){provenance_note(job)}",
    ]

    lake, lake_1 = smol["FrozenLake"], smol["FrozenLake, seed 1"]
    lake_gain, lake_1_gain = smol_gain(lake), smol_gain(lake_1)
    sokoban, sokoban_hot = smol["Sokoban"], smol["Sokoban, RL temperature 1.2"]
    sokoban_gain, sokoban_hot_gain = smol_gain(sokoban), smol_gain(sokoban_hot)
    math_60, math_16 = smol["Math"], smol["Math, 20-step warm start, groups of 16"]
    backfill = load("compare/smollm2-math-backfill/results.json")
    math_runs = [run for run in backfill["runs"] if run.get("arm", run.get("mode")) == "freshper"]
    math_60_gain = gains.add(paired_seed_test(by_seed(math_runs, "final"), by_seed(math_runs, "initial")))
    math_hot = smol["Math, 20-step warm start, groups of 16, RL temperature 1.2"]
    peak = max(math_hot["evaluations"], key=lambda evaluation: evaluation["success"])
    math_hot_1 = smol["Math, 20-step warm start, groups of 16, RL temperature 1.2, seed 1"]
    math_16_gain, math_hot_gain = smol_gain(math_16), smol_gain(math_hot)
    math_hot_1_gain = smol_gain(math_hot_1)
    search = smol["NQSearch"]
    search_gain = smol_gain(search)
    table_rows: list[list[Cell]] = [
        default_job,
        modes_row(gains),
        [
            "FrozenLake",
            f"SmolLM2 ({lake['warm_start_steps']})",
            rate(lake["start"]),
            f"{rate(lake['after'])} after {lake['after']['iteration']} iterations",
            lambda: (
                f"{lake_gain()}; seed 1 ({pct(lake_1['start']['success'])} -> "
                f"{pct(lake_1['after']['success'])}): {lake_1_gain()}"
            ),
            smol_details,
        ],
        tiny_row(tiny, "freshrl/FrozenLakeVision-v0", "FrozenLakeVision"),
        tiny_row(tiny, "freshrl/Sokoban-v0", "Sokoban"),
        [
            "Sokoban",
            f"SmolLM2 ({sokoban['warm_start_steps']})",
            rate(sokoban["start"]),
            f"{rate(sokoban['after'])} after {sokoban['after']['iteration']} iterations; "
            f"{pct(sokoban_hot['after']['success'])} at RL temperature 1.2",
            lambda: f"{sokoban_gain()}; at RL temperature 1.2: {sokoban_hot_gain()}",
            smol_details,
        ],
        tiny_row(tiny, "freshrl/Math-v0", "Math"),
        [
            "Math",
            f"SmolLM2 ({math_60['warm_start_steps']}), {len(math_60['seeds'])} seeds",
            f"{pct(math_60['start']['success'])} ({math_60['start']['note']})",
            f"{rate(math_60['after'])} after {math_60['after']['iteration']} iterations, both seeds",
            lambda: (
                f"{gain_words(gains, math_60_gain)}: {points(100 * math_60_gain['difference'])}, "
                f"{named(math_60_gain)}, {gains.p_text(math_60_gain)}"
            ),
            f"{SMOLLM2_RUNS}, [backfill](docs/results/compare/smollm2-math-backfill/comparison.md)"
            + (provenance_note(smollm2) or provenance_note(backfill)),
        ],
        [
            "Math",
            f"SmolLM2 ({math_16['warm_start_steps']}), groups of 16",
            rate(math_16["start"]),
            f"{rate(math_16['after'])} after {math_16['after']['iteration']}; at RL temperature 1.2, "
            f"{pct(math_hot['after']['success'])} after {math_hot['after']['iteration']} (peak "
            f"{pct(peak['success'])} after {peak['iteration']}; seed 1: "
            f"{pct(math_hot_1['start']['success'])} -> {pct(math_hot_1['after']['success'])})",
            lambda: (
                f"{math_16_gain()}; at RL temperature 1.2, at the end: {math_hot_gain()}; seed 1: "
                f"{math_hot_1_gain()}"
            ),
            smol_details,
        ],
        tiny_row(tiny, "freshrl/NQSearch-v0", "NQSearch"),
        [
            "NQSearch",
            f"SmolLM2 ({search['warm_start_steps']})",
            rate(search["start"]),
            f"{rate(search['after'])} after {search['after']['iteration']} iterations",
            search_gain,
            smol_details,
        ],
        *(trained_row(name, folder, gains) for name, folder in ECOSYSTEM.items()),
    ]
    for name, folder, shown in COMPARISONS:
        after = max((k + 1 for k, row in enumerate(table_rows) if row[0] == name), default=len(table_rows))
        table_rows[after:after] = compared_rows(name, folder, shown, gains, arms)
    for name, row in lab_env_rows(gains):  # each lab entry first among its env's rows
        first = next((k for k, existing in enumerate(table_rows) if existing[0] == name), len(table_rows))
        table_rows.insert(first, row)
    return [written(row) for row in table_rows], [gains, arms]


def lab_env_rows(gains: Family) -> list[tuple[str, list[Cell]]]:
    """The learning lab's entries as rows of the per-env table, (env name, row): the gain over the start
    tested by seed (the paired t-test over the entry's seeds), joining ``gains``, beside its intervals. Quick
    entries (``*_quick``, the test suite's checks) measure no env and are left to the lab's table."""
    found = []
    for summary in lab_summaries():
        if summary["entry"].endswith("_quick"):
            continue
        name = env_row_name(summary["env"])
        cells = _lab_cells(summary)
        seed_gain = gain(gains, summary["gain_by_seed"])
        row: list[Cell] = [
            name,
            f"{cells['model']}, {cells['seeds']} seeds, lab entry {cells['entry']}; env {cells['setting']}",
            cells["start"],
            cells["after"],
            lambda seed_gain=seed_gain, intervals=cells["intervals"]: (
                f"{seed_gain()}; 95% intervals by seed and by task: {intervals}"
            ),
            cells["details"],
        ]
        found.append((name, row))
    return found


def env_row_name(env_id: str) -> str:
    """The per-env table's name of ``env_id``: "FrozenLake" for freshrl/FrozenLake-v0, "BabyAI GoToLocal"
    for babyai/GoToLocal-v0."""
    namespace, _, name = env_id.rpartition("/")
    name = name.removesuffix("-v0")
    return f"{LIBRARY_NAMES[namespace]} {name}" if namespace in LIBRARY_NAMES else name


def written(row: list[Cell]) -> list[str]:
    """A row's cells as text, once every test of its table has joined its family."""
    return [cell() if callable(cell) else cell for cell in row]


def mode_test(results: dict[str, Any], cells: dict[str, Any], key: str, other: str) -> Significance | None:
    """FreshPER minus mode ``other`` on ``key`` (peak or final) over seeds: paired by seed from the runs
    (Welch's test where their seeds differ), or Welch's test from the means and standard deviations of a
    record that keeps only those; None where either mode did not run."""
    if "freshper" not in cells or other not in cells:
        return None
    runs = results.get("runs")
    if runs:
        fresh = [run for run in runs if run["arm"] == "freshper"]
        them = [run for run in runs if run["arm"] == other]
        return paired_seed_test(by_seed(fresh, key), by_seed(them, key))
    return welch_test(like_sample(cells["freshper"][key]), like_sample(cells[other][key]))


def replay_rows() -> tuple[list[list[str]], Family]:
    """FreshPER's Table 1 and ours, task by task: the paper's peak figures, then our peak and final
    validation success per replay mode (means over seeds with 95% t intervals) with the test of FreshPER
    against on-policy and against PER (one family, Holm-adjusted), or why the task is not measured."""
    family = Family("FreshPER against on-policy and against PER, peak and final, every task")
    table_rows: list[list[Cell]] = []
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
            tests = [mode_test(results, cells, key, other) for other in ("on_policy", "per")]
            table_rows.append(
                [
                    task,
                    f"freshrl: {ours}, {counted}; validation success from {start:.3f}, {key}",
                    *(
                        _over_seeds_cell(_mode_figure(results, cells, mode, key), seeds[-1])
                        for mode in REPLAY_MODES
                    ),
                    _mode_tests_cell(family, tests),
                    f"[comparison](docs/results/{report}){provenance_note(results)}",
                ]
            )
    return [written(row) for row in table_rows], family


def _mode_figure(
    results: dict[str, Any], cells: dict[str, Any], mode: str, key: str
) -> dict[str, Any] | None:
    """A mode's ``key`` over seeds: :func:`mean_over_seeds` of its runs, or the record's aggregate where it
    keeps no runs; None where the mode did not run."""
    if mode not in cells:
        return None
    runs = [run[key] for run in results.get("runs", []) if run["arm"] == mode]
    return mean_over_seeds(runs) if runs else cells[mode][key]


def _mode_tests_cell(family: Family, tests: list[Significance | None]) -> Callable[[], str]:
    for test in tests:
        if test is not None:
            family.add(test)

    def one(test: Significance | None) -> str:
        if test is None:
            return "n/a"
        words = "separated" if family.separated(test) else "not separated"
        return f"{test['difference']:+.3f} ({named(test)}, {family.p_text(test)}: {words})"

    return lambda: "; ".join(one(test) for test in tests)


def sweep_rows() -> tuple[list[list[str]], list[str]]:
    """Each tau sweep's grid points (mean over seeds with the 95% t interval) from its ``summary.json``, or a
    row saying it is not run yet; and what the sweep can say: whether any points' intervals are apart, and
    which eps_high values of a tau and seed gave identical evaluations (then not independent trials)."""
    from experiments.common.sweep_points import tau_label

    table_rows, notes = [], []
    for task, ours, folder in TAU_SWEEPS:
        summary_file = RESULTS / folder / "summary.json"
        if not summary_file.exists():
            table_rows.append([task, ours, "not run yet", *NOT_SWEPT])
            continue
        summary = load(f"{folder}/summary.json")
        model = f"{ours}, {summary['iterations']} iterations a trial" if "iterations" in summary else ours
        if summary.get("missing"):
            done = summary["planned_trials"] - len(summary["missing"])
            model += f", partial: {done} of {summary['planned_trials']} trials"
        if not summary["points"]:
            table_rows.append([task, model, "started: no trial finished yet", *NOT_SWEPT])
            continue
        for point in summary["points"]:
            minutes = point.get("minutes_per_trial")
            table_rows.append(
                [
                    task,
                    model,
                    _tau(point["tau"], tau_label),
                    f"{point['eps_high']:g}",
                    str(len(point["seeds"])),
                    _over_seeds_cell(point.get("auc"), len(point["seeds"])) or "n/a",
                    _over_seeds_cell(point["final"], len(point["seeds"])),
                    _over_seeds_cell(point["peak"], len(point["seeds"])),
                    "n/a" if point.get("clipfrac_high") is None else f"{100 * point['clipfrac_high']:.2f}%",
                    "n/a" if minutes is None or minutes != minutes else f"{minutes:.1f}",
                    f"[sweep](docs/results/{folder}/summary.md){provenance_note(summary)}",
                ]
            )
        notes.append(_sweep_note(task, summary, tau_label))
    return table_rows, notes


def _tau(tau: float | None, tau_label: Callable[[float], str]) -> str:
    # summary.json writes tau = inf (no decay) as null: strict JSON has no infinity.
    return tau_label(math.inf if tau is None else float(tau))


def _sweep_note(task: str, summary: dict[str, Any], tau_label: Callable[[float], str]) -> str:
    """``NQ Search (LLM): nothing separates the points (...)``, and the eps_high values of one tau and seed
    whose evaluations came out identical."""
    finals = [point["final"] for point in summary["points"]]
    apart = any(a["mean"] - (a["ci95"] or 0) > b["mean"] + (b["ci95"] or 0) for a in finals for b in finals)
    said = (
        f"{task}: no test is run between the points, and some final intervals do not overlap"
        if apart
        else f"{task}: nothing separates the points: every point's final 95% interval overlaps every "
        "other's, so none is marked best"
    )
    by_run: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for trial in summary.get("trials", []):
        if trial.get("status") == "ok":
            key = (_tau(trial["tau"], tau_label), trial["seed"])
            by_run.setdefault(key, []).append(
                (trial["peak_validation_success"], trial["final_validation_success"])
            )
    pairs = {key: evaluations for key, evaluations in by_run.items() if len(evaluations) > 1}
    same = [key for key, evaluations in pairs.items() if len(set(evaluations)) == 1]
    if same:
        which = "; ".join(f"{'' if tau == 'no decay' else 'tau '}{tau} seed {seed}" for tau, seed in same)
        said += (
            f". {len(same)} of the {len(pairs)} eps_high sets of one tau and seed gave identical evaluations "
            f"({which}): eps_high hardly acts, so the trials are not independent and the grid measures the "
            f"{len({tau for tau, _ in by_run})} tau values over {len({seed for _, seed in by_run})} seeds"
        )
    return said


def _over_seeds_cell(figure: dict[str, Any] | None, seeds: int) -> str:
    """``0.656 ± 0.051`` (and its seeds where fewer than the most any mode has); empty when not run."""
    if figure is None:
        return ""
    half = "" if figure.get("ci95") is None else f" ± {figure['ci95']:.3f}"
    fewer = f" (n={figure['n']})" if figure["n"] < seeds else ""
    return f"{figure['mean']:.3f}{half}{fewer}"


def _families(families: list[Family]) -> list[str]:
    return [
        "",
        "Test families, each adjusted with Holm's step-down procedure; a cell gives the raw p and the "
        "adjusted one, and its words follow the adjusted p (**yes**, **falls** or separated only below "
        "0.05):",
        "",
        *(f"- {family.line()}" for family in families),
    ]


def lab_rows() -> list[list[str]]:
    """One row per learning-lab entry with a record (``docs/results/lab/<entry>/summary.json``,
    ``experiments.lab``): its setting, start, end, and gain with both intervals."""
    table_rows = []
    for summary in lab_summaries():
        cells = _lab_cells(summary)
        table_rows.append(
            [
                cells["entry"],
                f"{summary['env']}: {cells['setting']}",
                cells["model"],
                cells["seeds"],
                cells["start"],
                cells["after"],
                cells["floor"],
                f"{points(100 * summary['gain'])} ({cells['intervals']})",
                "**yes**" if summary["gains_with_power"] else "not yet",
                cells["details"],
            ]
        )
    return table_rows


# How the tables name a model the project builds offline (models/names.py), as the SmolLM2 rows do.
MODEL_LABELS = {"smollm2": "SmolLM2"}


def _lab_cells(summary: dict[str, Any]) -> dict[str, str]:
    """What both tables say of a lab entry: its name, env setting, model, seeds, start, end, the gain's
    intervals (by seed; by task) and the link to its report."""
    tiny = "tiny VLM" if "Vision" in summary["env"] else "tiny LM"
    steps = summary["warm_start_steps"]
    if summary["model"] is None:
        steps = WARM_START_STEPS.get(summary["env"]) if steps is None else steps
    by_seed, by_task = summary["gain_by_seed"], summary["gain_by_task"]
    return {
        "entry": f"`{summary['entry']}`",
        "setting": ", ".join(f"{key}={value}" for key, value in summary["env_config"].items()) or "defaults",
        "model": f"{MODEL_LABELS.get(summary['model'], summary['model']) or tiny} ({steps or 0})",
        "seeds": str(len(summary["seeds"])),
        "start": over_seeds(summary["before"]),
        "after": f"{over_seeds(summary['after'])} after {summary['iterations'][-1]} iterations",
        "intervals": "; ".join([_interval(by_seed)] + ([_interval(by_task)] if by_task else [])),
        "details": f"[report](docs/results/lab/{summary['entry']}/README.md)",
        "floor": _floor(summary),
    }


def _floor(summary: dict[str, Any]) -> str:
    """The entry's blind floor, ``12.7% ± 1.6 (start above, end above)``, or n/a (docs/learning_lab.md)."""
    floor = summary.get("blind_floor")
    if floor is None:
        return "n/a"
    start, end = lab_report.floor_side(summary, "before"), lab_report.floor_side(summary, "after")
    return f"{100 * floor['success']:.1f}% ± {100 * (floor['ci95'] or 0):.1f} (start {start}, end {end})"


def lab_summaries() -> list[dict[str, Any]]:
    """The learning lab's records (``docs/results/lab/<entry>/summary.json``), by entry name."""
    return [load(str(path.relative_to(RESULTS))) for path in sorted((RESULTS / "lab").glob("*/summary.json"))]


def _interval(test: Significance) -> str:
    """A gain's 95% interval in points, ``+5.1 to +18.2``, or n/a."""
    low, high = test.get("difference_ci95_low"), test.get("difference_ci95_high")
    return "n/a" if low is None else f"{100 * low:+.1f} to {100 * high:+.1f}"


def lab_table() -> str:
    """The learning lab's block as README.md holds it, the markers included."""
    body = ("| " + " | ".join(row) + " |" for row in lab_rows())
    return "\n".join([LAB_BEGIN, *LAB_HEADER, *body, LAB_END])


def table() -> str:
    """The per-env block as README.md holds it, the markers included."""
    table_rows, families = rows()
    body = ("| " + " | ".join(row) + " |" for row in table_rows)
    lines = [BEGIN, *HEADER, *body, *_families(families), END]
    return "\n".join(lines)


def study_rows() -> list[list[str]]:
    """The replay study's entries x regimes: each mode's AUC (mean over seeds ± 95% t interval, in points of
    success) and each pre-registered test with its outcome, Holm-adjusted over the regime's entries as
    ``python -m experiments.replay_study family`` adjusts them."""
    from experiments.common import replay_study_report

    summaries = [
        json.loads(path.read_text()) for path in sorted((RESULTS / STUDY_FOLDER).glob("*/summary.json"))
    ]
    table_rows = []
    for regime in replay_study_report.PREREGISTERED_REGIMES:
        # An entry whose seeds have not yet run every mode has no figure to show.
        recorded = [summary for summary in summaries if summary["regime"] == regime and summary["seeds"]]
        if not recorded:
            continue
        family = replay_study_report.family(recorded)
        for summary in recorded:
            tests = [test for test in family["tests"] if test["entry"] == summary["entry"]]
            seeds = f"{len(summary['seeds'])} seeds"
            if summary.get("missing"):
                missing = len(summary["missing"])
                seeds += f" (partial: {missing} run{'s' if missing > 1 else ''} missing)"
            table_rows.append(
                [
                    regime.replace("_", "-"),
                    f"`{summary['entry']}`",
                    f"{seeds}; {summary['budget']:g} episodes",
                    f"{100 * summary['modes']['on_policy']['initial']['mean']:.1f}%",
                    *(_auc_cell(summary["modes"].get(mode)) for mode in replay_study_report.MODES),
                    "; ".join(_study_test(test) for test in tests),
                    f"[report](docs/results/{STUDY_FOLDER}/{summary['entry']}-{regime}/README.md)",
                ]
            )
    return table_rows


def _auc_cell(mode: dict[str, Any] | None) -> str:
    """``29.8 ± 1.6``: a mode's AUC over seeds, in points; empty where the mode has no run."""
    if not mode or mode.get("auc") is None:
        return ""
    auc = mode["auc"]
    half = "" if auc.get("ci95") is None else f" ± {100 * auc['ci95']:.1f}"
    return f"{100 * auc['mean']:.1f}{half}"


def _study_test(test: dict[str, Any]) -> str:
    """``H1 FreshPER > on-policy: -0.7 points (Holm p 0.57 by seed, 0.22 by task; detectable 2.2, in
    proportion 2.6): **powered null**``."""
    seed, task = test["by_seed"], test["by_task"]
    return (
        f"{test['hypothesis']} {test['claim']}: {100 * test['difference']:+.1f} points (Holm p "
        f"{seed['p_holm']:.2g} by seed, {task['p_holm']:.2g} by task; detectable "
        f"{100 * test['detectable']:.1f}, in proportion {100 * test['proportional_effect']:.1f}): "
        f"**{test['outcome']}**"
    )


def replay_table() -> str:
    """The replay block as README.md holds it, the markers included."""
    table_rows, family = replay_rows()
    swept, notes = sweep_rows()
    studied = study_rows()
    lines = [
        REPLAY_BEGIN,
        "The pre-registered study (AUC: held-out success averaged over one budget of training episodes, in "
        "points; a test is claimed only where the seeds and the tasks both separate the modes after Holm "
        "over the regime's entries; detectable: the difference 80% power finds; in proportion: the paper's "
        "relative gain applied to on-policy's own AUC gain):",
        "",
        *STUDY_HEADER,
        *("| " + " | ".join(row) + " |" for row in studied),
        "",
        "The earlier comparisons, short and underpowered, beside FreshPER's Table 1:",
        "",
        *REPLAY_HEADER,
        *("| " + " | ".join(row) + " |" for row in table_rows),
        *_families([family]),
        "",
        "The tau sweeps (`experiments.sweep`; AUC: held-out success over one budget of training episodes, "
        "from the start; final: after the last iteration; means over seeds ± 95% t interval; tau `no decay` "
        "is PER's priorities; clipped: the share of tokens Clip-Higher's bound cut; sweeps run before the "
        "start was measured have no AUC):",
        "",
        *SWEEP_HEADER,
        *("| " + " | ".join(row) + " |" for row in swept),
        *(["", *(f"{note}." for note in notes)] if notes else []),
        REPLAY_END,
    ]
    return "\n".join(lines)


def with_table(readme: str) -> str:
    """``readme`` with the blocks between the markers replaced by :func:`lab_table`, :func:`table`,
    :func:`replay_table` and :func:`speed_table`.
    ValueError when a block's markers are not there once each, in order."""
    blocks = (
        (LAB_BEGIN, LAB_END, lab_table),
        (BEGIN, END, table),
        (REPLAY_BEGIN, REPLAY_END, replay_table),
        (SPEED_BEGIN, SPEED_END, speed_table),
    )
    for begin, end, block in blocks:
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
