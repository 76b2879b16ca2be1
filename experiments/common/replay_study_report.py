"""The replay study's report (``experiments.replay_study``; docs/replay.md, "The replay study:
pre-registration"): for one learning-lab entry in one regime, the four replay modes' runs over the same
seeds, each mode's episode AUC (the primary metric, ``experiments/common/replay_auc.py``), final and peak
success with their 95% t intervals over seeds, the pre-registered tests and the replay's health.

Each hypothesis is tested twice: by seed (the paired t-test over seeds of the two modes' AUCs) and by task
(each validation task's AUC averaged over the seeds, the paired t-test over tasks), two-sided at alpha 0.05,
and claimed only where both tests separate the modes in the same direction. A regime's family is H1-H3 over
every entry recorded for it (:func:`family`): Holm-adjusted per unit, so that a claim, which needs both
units, is made falsely with probability at most alpha. A comparison that separates nothing is a powered
null where the difference both tests detect at 80% power is below the effect the paper's relative gain would
make here (:data:`PROPORTIONAL_SHARE` x on-policy's gain), else underpowered, not "no effect".
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.common import comparison_report
from experiments.common.comparison_arms import MODE_LABELS
from experiments.common.freshper_paper import PAPER_TABLE_1
from experiments.common.replay_auc import budget, episode_curve, run_auc, task_auc
from experiments.common.runs_made_by import made_by
from experiments.common.significance import ALPHA, holm, mean_over_seeds, measured_range, paired_t_test

MODES = ("on_policy", "per", "freshper", "freshper_poly")
# The pre-registration's regimes, each its own family; any other (the entry's own settings, "lab") is
# reported as exploratory.
PREREGISTERED_REGIMES = ("rollout_limited", "fast_drift")
# The paper's relative effect: FreshPER's Table 1 NQ Search row, 0.742 against on-policy's 0.508, +46%
# (docs/replay.md; the figure experiments/common/freshper_paper.py derives per task). Read as a share of
# on-policy's own gain: if FreshPER gained 1.46x what on-policy gains at every point of the curve, its AUC
# would exceed on-policy's by exactly this share of on-policy's AUC gain over the start (the AUC is linear).
_NQ_ON_POLICY, _NQ_FRESHPER = PAPER_TABLE_1["NQ Search (LLM)"][1], PAPER_TABLE_1["NQ Search (LLM)"][3]
PROPORTIONAL_SHARE = _NQ_FRESHPER / _NQ_ON_POLICY - 1


@dataclass(frozen=True)
class Hypothesis:
    """A test of two modes' AUCs: ``higher`` predicted above ``lower`` (for the exploratory test, the
    order of the difference only), in ``regimes`` (None: every regime)."""

    name: str
    higher: str
    lower: str
    confirmatory: bool
    regimes: tuple[str, ...] | None = None

    @property
    def claim(self) -> str:
        relation = ">" if self.confirmatory else "vs"
        return f"{MODE_LABELS[self.higher]} {relation} {MODE_LABELS[self.lower]}"


HYPOTHESES = (
    Hypothesis("H1", "freshper", "on_policy", confirmatory=True),
    Hypothesis("H2", "freshper", "per", confirmatory=True),  # the decay matters
    # Stale replay hurts without decay: PER < on-policy, where the policy drifts fast.
    Hypothesis("H3", "on_policy", "per", confirmatory=True, regimes=("fast_drift",)),
    Hypothesis("exploratory", "freshper_poly", "freshper", confirmatory=False),
)


def hypotheses(regime: str) -> list[Hypothesis]:
    """The tests of ``regime``: H1, H2, H3 in the fast-drift regime, and the exploratory one."""
    return [h for h in HYPOTHESES if h.regimes is None or regime in h.regimes]


# ------------------------------------------------------------------------------------------ figures
def summarize(entry: str, regime: str, runs: Sequence[Mapping[str, Any]], group_size: int) -> dict[str, Any]:
    """The study's figures of one entry x regime from its finished ``runs`` (compare's saved runs, arms the
    four :data:`MODES`), over the seeds every mode finished (pairs stay pairs; the others are listed as
    ``incomplete_seeds``). JSON-able."""
    by_mode = {mode: {run["seed"]: run for run in runs if run["arm"] == mode} for mode in MODES}
    seeds = sorted(set.intersection(*(set(cell) for cell in by_mode.values())))
    summary: dict[str, Any] = {
        "entry": entry,
        "regime": regime,
        "preregistered": regime in PREREGISTERED_REGIMES,
        "env": runs[0]["env"] if runs else None,
        "group_size": group_size,
        "seeds": seeds,
        "incomplete_seeds": sorted({run["seed"] for run in runs} - set(seeds)),
        # The report's provenance is the command that wrote it; the runs may come from several sessions.
        "made_by": made_by(list(runs)).strip(),
        "budget": None,
        "modes": {},
        "tests": [],
    }
    if not seeds:
        return summary
    cells = {mode: [by_mode[mode][seed] for seed in seeds] for mode in MODES}
    episodes_budget = budget([run for cell in cells.values() for run in cell], group_size)
    health = comparison_report.aggregate([run for cell in cells.values() for run in cell], "freshper")
    health = health[summary["env"]]
    tasks = {mode: _task_auc_over_seeds(cell, group_size, episodes_budget) for mode, cell in cells.items()}
    if len({tuple(sorted(by_task)) for by_task in tasks.values()}) > 1:
        raise ValueError(f"{entry} {regime}: the modes evaluated different validation tasks")
    aucs = {mode: [run_auc(run, group_size, episodes_budget) for run in cell] for mode, cell in cells.items()}
    for mode, cell in cells.items():
        curves = [episode_curve(run, group_size) for run in cell]
        summary["modes"][mode] = {
            "auc_by_seed": aucs[mode],
            "auc": mean_over_seeds(aucs[mode]),
            **{key: mean_over_seeds([run[key] for run in cell]) for key in ("final", "peak", "initial")},
            "final_episodes": measured_range([episodes[-1] for episodes, _ in curves]),
            "curves": [
                {"seed": seed, "episodes": episodes, "success": success}
                for seed, (episodes, success) in zip(seeds, curves, strict=True)
            ],
            "replay": health[mode]["replay"],
            "drift": health[mode]["drift"],
        }
    starts = [run["initial"] for run in cells["on_policy"]]
    gain = float(np.mean(aucs["on_policy"]) - np.mean(starts))
    summary.update(
        budget=episodes_budget,
        on_policy_auc_gain=gain,
        on_policy_final_gain=float(np.mean([run["final"] for run in cells["on_policy"]]) - np.mean(starts)),
        proportional_effect=PROPORTIONAL_SHARE * gain,
    )
    summary["tests"] = [compare_modes(h, aucs, tasks, PROPORTIONAL_SHARE * gain) for h in hypotheses(regime)]
    apply_holm(summary["tests"])
    return summary


def _task_auc_over_seeds(
    cell: Sequence[Mapping[str, Any]], group_size: int, episodes_budget: float
) -> dict[int, float]:
    """Each task's AUC averaged over the cell's seeds: the unit of the test by task (a task's samples and
    seeds are one cluster)."""
    per_run = [task_auc(run, group_size, episodes_budget) for run in cell]
    if any(sorted(rates) != sorted(per_run[0]) for rates in per_run):
        raise ValueError("the seeds of a mode evaluated different validation tasks")
    return {task: float(np.mean([rates[task] for rates in per_run])) for task in per_run[0]}


def compare_modes(
    hypothesis: Hypothesis,
    aucs: Mapping[str, Sequence[float]],
    tasks: Mapping[str, Mapping[int, float]],
    effect: float,
) -> dict[str, Any]:
    """One hypothesis's two tests on AUC (difference = ``higher`` minus ``lower``; ``aucs``: each mode's
    AUC by seed, in the same seed order; ``tasks``: each mode's task AUCs averaged over seeds), with the
    difference both detect at 80% power (the larger of the two) set beside the proportional ``effect``."""
    order = sorted(tasks[hypothesis.lower])
    by_seed = paired_t_test(aucs[hypothesis.lower], aucs[hypothesis.higher], unit="seed")
    by_task = paired_t_test(
        [tasks[hypothesis.lower][task] for task in order],
        [tasks[hypothesis.higher][task] for task in order],
        unit="task (AUC averaged over seeds)",
    )
    detectables = [by_seed["detectable"], by_task["detectable"]]
    detectable = None if None in detectables else max(detectables)
    return {
        "hypothesis": hypothesis.name,
        "claim": hypothesis.claim,
        "higher": hypothesis.higher,
        "lower": hypothesis.lower,
        "confirmatory": hypothesis.confirmatory,
        "difference": by_seed["difference"],
        "by_seed": by_seed,
        "by_task": by_task,
        "detectable": detectable,
        "proportional_effect": effect,
        # A null answers the question only where both tests would have seen the paper's effect.
        "powered": detectable is not None and effect > 0 and detectable < effect,
    }


def apply_holm(tests: Sequence[dict[str, Any]]) -> None:
    """Holm-adjusts the confirmatory ``tests`` as one family, by seed and by task apart (``p_holm`` in each),
    and sets every test's ``outcome``; the exploratory test keeps its raw p-values (``p_holm`` None)."""
    family = [test for test in tests if test["confirmatory"]]
    for unit in ("by_seed", "by_task"):
        adjusted = holm([test[unit]["p_value"] for test in family])
        for test, p in zip(family, adjusted, strict=True):
            test[unit]["p_holm"] = p
        for test in tests:
            if not test["confirmatory"]:
                test[unit]["p_holm"] = None
    for test in tests:
        test["outcome"] = outcome(test)


def outcome(test: Mapping[str, Any]) -> str:
    """What a test says: "supported" (both units separate the modes in the predicted direction, after
    Holm), "opposite direction", for the exploratory test "separated: <mode> higher"; otherwise "powered
    null" or "underpowered", noting a unit that separated alone (no claim: the units disagree)."""
    p_key = "p_holm" if test["confirmatory"] else "p_value"
    units = {"seed": test["by_seed"], "task": test["by_task"]}
    separated = [name for name, t in units.items() if t[p_key] is not None and t[p_key] < ALPHA]
    signs = {np.sign(t["difference"]) for t in units.values()}
    if len(separated) == 2 and len(signs) == 1 and 0 not in signs:
        above = test["higher"] if test["difference"] > 0 else test["lower"]
        if not test["confirmatory"]:
            return f"separated: {MODE_LABELS[above]} higher"
        return "supported" if test["difference"] > 0 else "opposite direction"
    verdict = "powered null" if test["powered"] else "underpowered"
    if len(separated) == 1:
        return f"{verdict} (separated by {separated[0]} only: no claim)"
    return verdict


def family(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A regime's family: the confirmatory tests of every entry's summary (:func:`summarize`, one regime),
    Holm-adjusted together, by seed and by task apart, with their outcomes. ValueError for summaries of
    several regimes (each regime is its own family)."""
    regimes = {summary["regime"] for summary in summaries}
    if len(regimes) != 1:
        raise ValueError(f"a family is one regime's entries; got regimes {sorted(regimes)}")
    tests = [
        {"entry": summary["entry"], **copy.deepcopy(test)}
        for summary in summaries
        for test in summary["tests"]
        if test["confirmatory"]
    ]
    apply_holm(tests)
    regime = regimes.pop()
    return {
        "regime": regime,
        "preregistered": regime in PREREGISTERED_REGIMES,
        "alpha": ALPHA,
        "entries": [summary["entry"] for summary in summaries],
        # Entries whose record still lacks runs: their tests are over the seeds finished so far.
        "partial": [summary["entry"] for summary in summaries if summary.get("missing")],
        "tests": tests,
    }


# ------------------------------------------------------------------------------------------ markdown
def markdown(summary: Mapping[str, Any], record: Mapping[str, Any], settings_file: str) -> str:
    """The record's README.md: the modes' figures, the tests, the replay health and the commands.
    ``summary`` is :func:`summarize`'s with what the command adds: ``regime_keys``, ``missing`` (runs not
    finished: {mode, seed}), ``iterations`` and ``iterations_reason``."""
    machine = record["machine"]
    lines = [
        f"# Replay study: {summary['entry']}, {summary['regime']} regime ({summary['env']})",
        "",
        f"Made by `{record['command']}` at commit {record['commit']}"
        f"{' (with uncommitted changes)' if record.get('dirty') else ''} on {record['date']}, "
        f"{machine['cores']} cores, {machine['cpu_model']}. Settings: `{settings_file}` with the regime's "
        f'keys {_keys(summary.get("regime_keys", {}))}. Pre-registration: docs/replay.md, "The replay study: '
        'pre-registration".' + (f" {summary['made_by']}" if summary.get("made_by") else ""),
        "",
    ]
    if not summary["preregistered"]:
        lines += [
            f"**Exploratory**: {summary['regime']} is not one of the pre-registered regimes "
            f"({', '.join(PREREGISTERED_REGIMES)}); nothing here is a test of the study's hypotheses.",
            "",
        ]
    if summary.get("missing"):
        lines += [
            f"**Partial: {len(summary['missing'])} runs missing** ({_runs(summary['missing'])}). The figures "
            "are over the seeds every mode finished; rerun the command to continue (finished runs are kept).",
            "",
        ]
    if not summary["seeds"]:
        return "\n".join([*lines, "No seed has finished in every mode yet: nothing to compare.", ""])
    lines += [
        f"Seeds {', '.join(map(str, summary['seeds']))} (every mode); group size {summary['group_size']}. "
        f"**Budget B = {summary['budget']:.0f} training episodes**, the smallest final count among the runs "
        "(every group dynamic sampling generated, discarded ones included; evaluation episodes excluded). "
        "AUC = the mean held-out success over the first B episodes, the curve linear between evaluations.",
        "",
        "| mode | AUC (primary) | final success | peak success | episodes at the end |",
        "|---|---|---|---|---|",
    ]
    for mode, cell in summary["modes"].items():
        low, mean, high = (cell["final_episodes"][key] for key in ("min", "mean", "max"))
        lines.append(
            f"| {MODE_LABELS[mode]} | {_interval(cell['auc'])} | {_interval(cell['final'])} | "
            f"{_interval(cell['peak'])} | {mean:.0f} ({low:.0f}-{high:.0f}) |"
        )
    start = summary["modes"]["on_policy"]["initial"]["mean"]
    lines += [
        "",
        "Mean over seeds ± the 95% t interval's half-width. Peak: the best evaluation of the run. "
        f"Validation success before training {start:.3f}; on-policy's AUC gain over it "
        f"{_points(summary['on_policy_auc_gain'])} (final gain {_points(summary['on_policy_final_gain'])}), "
        f"so the proportional effect is {PROPORTIONAL_SHARE:.2f} x that = "
        f"{_points(summary['proportional_effect'])}.",
        "",
        *tests_table(summary["tests"], "this entry's H1-H3"),
        "The study's claims are the regime's family table's, which adjusts over every entry of the regime: "
        f"`python -m experiments.replay_study family --regime {summary['regime']}`.",
        "",
        *health_lines(summary["modes"]),
        "![curves](curves.png) Each run's held-out success against its training episodes; the dotted line "
        "is B.",
        "",
        f"{summary['iterations']} iterations a run ({summary['iterations_reason']}). Re-run (finished runs "
        f"are kept, missing ones trained): `python -m experiments.replay_study run {summary['entry']} "
        f"--regime {summary['regime']}`.",
        "",
    ]
    return "\n".join(lines)


def tests_table(
    tests: Sequence[Mapping[str, Any]], family_name: str, entry_column: bool = False
) -> list[str]:
    """The table of tests: difference, each unit's p (raw, Holm), detectable, proportional effect,
    outcome."""
    head = "| entry " if entry_column else ""
    lines = [
        "## Tests on AUC",
        "",
        f"Difference = the first mode minus the second, in points (AUC x 100). Two-sided paired t-tests at "
        f"alpha {ALPHA}: by seed, and by task (each task's AUC averaged over the seeds). Holm: adjusted over "
        f"{family_name}, by seed and by task apart; the exploratory test is not adjusted. A claim needs both "
        "units separated in the same direction. Detectable: the larger of the two units' differences "
        "detected at 80% power from the spread of the paired differences; a null whose detectable is below "
        "the proportional effect is a powered null, else underpowered.",
        "",
        f"{head}| test | claim | difference | by seed: p (Holm) | by task: p (Holm) | detectable | "
        "proportional effect | outcome |",
        ("|---" if entry_column else "") + "|---|---|---|---|---|---|---|---|",
    ]
    for test in tests:
        entry = f"| {test['entry']} " if entry_column else ""
        name = test["hypothesis"] if test["confirmatory"] else "exploratory"
        lines.append(
            f"{entry}| {name} | {test['claim']} | {_points(test['difference'])} | {_p(test['by_seed'])} | "
            f"{_p(test['by_task'])} | {_points(test['detectable'])} | {_points(test['proportional_effect'])} "
            f"| {test['outcome']} |"
        )
    return [*lines, ""]


def health_lines(modes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The replay batches per replaying mode (comparison_report's metrics) and the drift's fit."""
    metrics = comparison_report.REPLAY_METRICS
    lines = [
        "## Replay health (mean over iterations, then seeds)",
        "",
        "kl_per_age: the per-token KL of a replay batch above the fresh batch's per iteration of age; "
        "tau_from_drift = 1 / kl_per_age (experiments/common/replay_drift.py).",
        "",
        "| mode | " + " | ".join(key.split("/")[-1] for key in metrics) + " | kl_per_age | tau_from_drift |",
        "|---|" + "---|" * (len(metrics) + 2),
    ]
    for mode, cell in modes.items():
        if mode == "on_policy":
            continue
        drift = cell["drift"] or {}
        shown = [_number(cell["replay"].get(key)) for key in metrics]
        shown += [_number(drift.get("kl_per_age")), _number(drift.get("tau"))]
        lines.append(f"| {MODE_LABELS[mode]} | " + " | ".join(shown) + " |")
    return [*lines, ""]


def family_markdown(table: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """The regime's family table (:func:`family`)."""
    lines = [
        f"# Replay study: the {table['regime']} regime's family",
        "",
        f"Made by `{record['command']}` at commit {record['commit']} on {record['date']}. H1-H3 over every "
        f"entry recorded for the regime ({', '.join(table['entries'])}), Holm-adjusted together, by seed "
        "and by task apart: the study's claims for this regime are this table's.",
        "",
    ]
    if not table["preregistered"]:
        lines += [f"**Exploratory**: {table['regime']} is not one of the pre-registered regimes.", ""]
    if table["partial"]:
        lines += [
            f"**Partial**: {', '.join(table['partial'])} still lack runs; their tests are over the seeds "
            "finished so far.",
            "",
        ]
    return "\n".join([*lines, *tests_table(table["tests"], "every entry's H1-H3", entry_column=True)])


def plot(summary: Mapping[str, Any], path: Path) -> Path:
    """Each run's held-out success against its cumulative training episodes, one colour per mode, with the
    budget B."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for index, (mode, cell) in enumerate(summary["modes"].items()):
        for number, curve in enumerate(cell["curves"]):
            label = MODE_LABELS[mode] if number == 0 else None
            ax.plot(curve["episodes"], curve["success"], color=f"C{index}", alpha=0.6, label=label)
    ax.axvline(summary["budget"], color="grey", linestyle=":")
    ax.set_title(f"{summary['entry']}, {summary['regime']}: held-out success", fontsize=10)
    ax.set_xlabel("training episodes")
    ax.set_ylabel("validation success")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _interval(figure: Mapping[str, Any]) -> str:
    half = figure["ci95"]
    return f"{figure['mean']:.3f}" + ("" if half is None else f" ± {half:.3f}")


def _points(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _p(test: Mapping[str, Any]) -> str:
    raw, adjusted = test["p_value"], test.get("p_holm")
    shown = "n/a" if raw is None else f"{raw:.2g}"
    return shown if adjusted is None else f"{shown} ({adjusted:.2g})"


def _keys(keys: Mapping[str, Any]) -> str:
    return ", ".join(f"`{key}={value}`" for key, value in keys.items()) or "(none)"


def _runs(missing: Sequence[Mapping[str, Any]]) -> str:
    return "; ".join(f"{MODE_LABELS[run['mode']]} seed {run['seed']}" for run in missing)
