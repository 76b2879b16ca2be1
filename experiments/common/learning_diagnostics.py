"""What a comparison's runs say about why a policy learnt or collapsed, beside their success: the policy's
token entropy (does the update concentrate it?), pass@k on the held-out tasks (does the set of tasks it can
solve at all narrow?), the share of sampled groups with mixed outcomes (how much of a rollout trains) and,
with GiGPO, how often turns share a state (docs/credit_assignment.md).

A run is what ``experiments.compare`` saves: ``training`` (flat metrics, one per iteration) and ``curve``
(evaluations, each with its ``metrics``). Every figure is a mean over a cell's seeds; None where no run
logged it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments.common.training_metrics import measured

# Iterations averaged at each end of a run's entropy curve: one iteration's entropy is noisy (4 prompts).
ENTROPY_WINDOW = 2
GIGPO_METRICS = ("gigpo/shared_turn_fraction", "gigpo/step_group_size_mean", "gigpo/step_advantage_std")


def _mean(values: Sequence[float | None]) -> float | None:
    measured = [value for value in values if value is not None]
    return float(np.mean(measured)) if measured else None


def entropy_curve(run: Mapping[str, Any]) -> list[float | None]:
    """The run's mean token entropy on the batches it trained on, per iteration (None: nothing trained)."""
    return [measured(flat, "train/entropy") for flat in run.get("training", [])]


def pass_at_k_key(runs: Sequence[Mapping[str, Any]]) -> str | None:
    """The largest k the runs' evaluations report pass@k for ("pass@4"), None if none does."""
    ks = {
        int(key.split("@")[1])
        for run in runs
        for point in run.get("curve", [])
        for key in point.get("metrics", {})
        if key.startswith("pass@")
    }
    return f"pass@{max(ks)}" if ks else None


def diagnostics(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{env: {arm: :func:`cell_diagnostics`}} of a comparison's runs."""
    return {
        env: {
            arm: cell_diagnostics([run for run in runs if run["env"] == env and run["arm"] == arm])
            for arm in dict.fromkeys(run["arm"] for run in runs if run["env"] == env)
        }
        for env in dict.fromkeys(run["env"] for run in runs)
    }


def cell_diagnostics(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The diagnostics of one (env, arm) cell's runs, each a mean over its seeds."""
    curves = [entropy_curve(run) for run in runs]
    key = pass_at_k_key(runs)

    def at(point: Mapping[str, Any]) -> float | None:
        return point.get("metrics", {}).get(key) if key else None

    rows = [flat for run in runs for flat in run.get("training", [])]
    sampled = sum(measured(flat, "rollout/groups_sampled") or 0.0 for flat in rows)
    kept = sum(measured(flat, "rollout/groups_kept") or 0.0 for flat in rows)
    return {
        "entropy_first": _mean([_mean(curve[:ENTROPY_WINDOW]) for curve in curves]),
        "entropy_last": _mean([_mean(curve[-ENTROPY_WINDOW:]) for curve in curves]),
        "pass_k": key,
        "pass_k_initial": _mean([at(run["curve"][0]) for run in runs if run.get("curve")]),
        "pass_k_final": _mean([at(run["curve"][-1]) for run in runs if run.get("curve")]),
        "informative_share": kept / sampled if sampled else None,
        **{
            name: _mean([_mean([measured(flat, name) for flat in run.get("training", [])]) for run in runs])
            for name in GIGPO_METRICS
        },
    }


def markdown_lines(
    diagnostics: Mapping[str, Mapping[str, Mapping[str, Any]]], names: Mapping[str, str], noun: str
) -> list[str]:
    """The diagnostics table of a comparison: {env: {arm: cell_diagnostics}} with each arm's display name."""
    cells = [(env, arm, cell) for env, arms in diagnostics.items() for arm, cell in arms.items()]
    gigpo = any(cell[GIGPO_METRICS[0]] is not None for _, _, cell in cells)
    columns = ["entropy, first -> last iterations", "pass@k, start -> final", "informative groups"]
    if gigpo:
        columns += ["turns sharing a state", "step-group size", "step-advantage std"]
    rows = [
        "## Learning diagnostics (mean over seeds)",
        "",
        "Entropy: the mean token entropy of the batches trained on, over the first and the last "
        f"{ENTROPY_WINDOW} iterations. pass@k: the share of held-out tasks solved by at least one of k "
        "samples, before training and at the end. Informative groups: the share of sampled groups with mixed "
        "outcomes, the ones that train. With GiGPO: the share of turns whose state another turn of the group "
        "starts from, the turns per step group and the spread of the step advantages "
        "(docs/credit_assignment.md).",
        "",
        f"| task | {noun} | " + " | ".join(columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for env, arm, cell in cells:
        shown = [
            f"{_number(cell['entropy_first'])} -> {_number(cell['entropy_last'])}",
            f"{cell['pass_k']} {_number(cell['pass_k_initial'])} -> {_number(cell['pass_k_final'])}",
            _number(cell["informative_share"]),
        ]
        if gigpo:
            shown += [_number(cell[name]) for name in GIGPO_METRICS]
        rows.append(f"| {env} | {names.get(arm, arm)} | " + " | ".join(shown) + " |")
    return [*rows, ""]


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _mean_curve(curves: Sequence[Sequence[float | None]]) -> tuple[list[int], list[float]]:
    """The indices where some curve has a value, and the mean of those values there."""
    length = max((len(curve) for curve in curves), default=0)
    means = [_mean([curve[i] for curve in curves if i < len(curve)]) for i in range(length)]
    kept = [i for i, mean in enumerate(means) if mean is not None]
    return kept, [means[i] for i in kept]


def plot(runs: Sequence[Mapping[str, Any]], output: Path, names: Mapping[str, str]) -> list[Path]:
    """One PNG per env: training entropy per iteration and held-out pass@k per evaluation, mean over each
    arm's seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.common.plots import style_iteration_axis

    paths = []
    for env in dict.fromkeys(run["env"] for run in runs):
        fig, (entropy_ax, pass_ax) = plt.subplots(1, 2, figsize=(10, 4))
        key = pass_at_k_key([run for run in runs if run["env"] == env]) or "pass@k"
        for arm in dict.fromkeys(run["arm"] for run in runs if run["env"] == env):
            cell = [run for run in runs if run["env"] == env and run["arm"] == arm]
            label = names.get(arm, arm)
            indices, entropy = _mean_curve([entropy_curve(run) for run in cell])
            (line,) = entropy_ax.plot([i + 1 for i in indices], entropy, label=label)
            passes = [[point.get("metrics", {}).get(key) for point in run["curve"]] for run in cell]
            indices, mean_pass = _mean_curve(passes)
            iterations = [cell[0]["curve"][i]["iteration"] for i in indices]
            pass_ax.plot(iterations, mean_pass, marker="o", markersize=3, color=line.get_color(), label=label)
        entropy_ax.set_title(f"{env}: token entropy of the trained batches", fontsize=10)
        pass_ax.set_title(f"{env}: held-out {key}", fontsize=10)
        style_iteration_axis(entropy_ax, "entropy (nats)")
        style_iteration_axis(pass_ax, key)
        pass_ax.set_ylim(-0.02, 1.02)
        fig.tight_layout()
        path = output / f"diagnostics-{env.split('/')[-1]}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
