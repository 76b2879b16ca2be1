"""Training curves: DAPO's monitoring panels (its figure 7) and the success rate."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [
    ("rollout/response_length_mean", "mean response length"),
    ("rollout/reward_mean", "reward"),
    ("train/entropy", "entropy"),
    ("train/mean_token_prob", "mean token probability"),
    ("rollout/success", "success rate"),
]


def plot_training_curves(
    rows: list[dict[str, float]],
    path: Path,
    validation: dict[int, float] | None = None,
    warning: str | None = None,
) -> None:
    """One panel per metric over training iterations; metrics are matched by name suffix. ``validation``
    ({iteration: success}, e.g. before and after training) is drawn on the success panel; ``warning`` (e.g.
    that most iterations trained nothing) is the figure's title, in red."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3.2))
    for ax, (suffix, title) in zip(axes, PANELS, strict=True):
        values = [next((v for k, v in row.items() if k.endswith(suffix)), float("nan")) for row in rows]
        ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label="training rollouts")
        if suffix == "rollout/success" and validation:
            points = sorted(validation.items())
            ax.plot(*zip(*points, strict=True), marker="s", linestyle="--", label="validation")
            ax.legend(fontsize=8)
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    if warning:
        fig.suptitle(warning, color="red")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def style_iteration_axis(ax, ylabel: str) -> None:
    """An axis over training iterations as the comparisons draw it: integer ticks, a light grid, a legend."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("training iteration")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
