"""The diagnostics a comparison reports beside success (experiments/common/learning_diagnostics.py): entropy,
pass@k, informative groups and GiGPO's step groups, worked out by hand on synthetic runs."""

from __future__ import annotations

import pytest

from experiments.common import learning_diagnostics as diag


def run(arm, seed, entropy, passes, gigpo=None):
    training = [
        {"learners/train/entropy": e, "rollout/groups_sampled": 8, "rollout/groups_kept": 2} for e in entropy
    ]
    for flat in training:
        flat.update(gigpo or {})
    curve = [
        {"iteration": 5 * i, "success": p / 2, "metrics": {"pass@2": p / 2, "pass@4": p}}
        for i, p in enumerate(passes)
    ]
    return {"env": "freshrl/Sokoban-v0", "arm": arm, "seed": seed, "training": training, "curve": curve}


def test_a_cell_s_figures_by_hand():
    runs = [
        run("episode", 0, [0.4, 0.2, None, 0.1, 0.1], [0.2, 0.1]),
        run("episode", 1, [0.6, 0.4, 0.3], [0.4, 0.3]),
    ]
    cell = diag.cell_diagnostics(runs)
    # First two iterations: (0.4 + 0.2) / 2 = 0.3 and 0.5; last two: 0.1 (None skipped) and (0.4 + 0.3) / 2.
    assert cell["entropy_first"] == pytest.approx(0.4)
    assert cell["entropy_last"] == pytest.approx((0.1 + 0.35) / 2)
    assert cell["pass_k"] == "pass@4"  # the largest k evaluated
    assert cell["pass_k_initial"] == pytest.approx(0.3) and cell["pass_k_final"] == pytest.approx(0.2)
    assert cell["informative_share"] == pytest.approx(0.25)  # 2 of 8 groups, every iteration
    assert cell["gigpo/shared_turn_fraction"] is None


def test_gigpo_columns_appear_when_an_arm_logged_them():
    shared = {
        "gigpo/shared_turn_fraction": 0.5,
        "gigpo/step_group_size_mean": 3.0,
        "gigpo/step_advantage_std": 0.8,
    }
    runs = [run("episode", 0, [0.3, 0.2], [0.2, 0.4]), run("gigpo", 0, [0.3, 0.3], [0.2, 0.6], shared)]
    lines = diag.markdown_lines(diag.diagnostics(runs), {"gigpo": "advantage=gigpo"}, "arm")
    text = "\n".join(lines)
    assert "| turns sharing a state | step-group size | step-advantage std |" in text
    assert (
        "| freshrl/Sokoban-v0 | advantage=gigpo | 0.300 -> 0.300 | pass@4 0.200 -> 0.600 | 0.250 | 0.500 "
        "| 3.000 | 0.800 |" in text
    )
    assert (
        "| freshrl/Sokoban-v0 | episode | 0.250 -> 0.250 | pass@4 0.200 -> 0.400 | 0.250 | n/a | n/a | n/a |"
        in text
    )
    without = "\n".join(diag.markdown_lines(diag.diagnostics(runs[:1]), {}, "arm"))
    assert "turns sharing a state" not in without


def test_the_plot_is_written_per_env(tmp_path):
    runs = [run("episode", seed, [0.3, 0.2, 0.25], [0.2, 0.4]) for seed in range(2)]
    (path,) = diag.plot(runs, tmp_path, {})
    assert path.name == "diagnostics-Sokoban-v0.png" and path.read_bytes().startswith(b"\x89PNG")
