"""``python -m experiments.compare``: outputs, the Table 1 layout, and skipping finished runs on rerun."""

from __future__ import annotations

import json

import pytest

from experiments import compare


def test_compare_writes_table_curves_json_and_skips_finished_runs(tmp_path, tiny_workload, ray_session):
    argv = ["--modes", "on_policy", "freshper", "--seeds", "1", "--iterations", "1", "--tau", "20"]
    argv += [*tiny_workload, "--output", str(tmp_path)]
    first = compare.main(argv)

    runs = sorted((tmp_path / "runs").glob("*.json"))
    assert [p.name for p in runs] == [
        "FrozenLake-v0__freshper__seed0.json",
        "FrozenLake-v0__on_policy__seed0.json",
    ]
    assert sorted(first["ran"]) == runs and first["skipped"] == []
    for path in runs:
        run = json.loads(path.read_text())
        assert [point["iteration"] for point in run["curve"]] == [0, 1]
        assert all(point["episodes"] == 4 for point in run["curve"])
        assert len(run["training"]) == 1 and run["training"][0]["training_iteration"] == 1
        assert run["peak"] == run["curve"][1]["success"]
        assert run["dtypes"]["model_dtype"] == run["dtypes"]["engine_dtype"] == "float32"  # the tiny scale's
    assert json.loads(runs[0].read_text())["tau"] == 20.0

    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["aggregate"]["freshrl/FrozenLake-v0"]) == {"on_policy", "freshper"}
    assert len(results["runs"]) == 2
    assert results["provenance"]["command"].startswith("python -m experiments.compare ")
    assert results["provenance"]["machine"]["cores"] >= 1
    table = (tmp_path / "comparison.md").read_text()
    assert "| task | on-policy | FreshPER |" in table
    assert "| freshrl/FrozenLake-v0 | " in table and ", n=1)" in table
    assert "| FrozenLake (LLM) | success | 0.297 | 0.281 | 0.305 | freshrl/FrozenLake-v0 |" in table
    assert (tmp_path / "curves-FrozenLake-v0.png").read_bytes().startswith(b"\x89PNG")

    # Rerun with the same output: nothing is trained again, the outputs are rebuilt from the saved runs.
    stamps = {path: path.stat().st_mtime_ns for path in runs}
    second = compare.main(argv)
    assert second["ran"] == [] and sorted(second["skipped"]) == runs
    assert {path: path.stat().st_mtime_ns for path in runs} == stamps
    assert second["aggregate"] == first["aggregate"]

    # A saved run made with other settings is never mixed in.
    with pytest.raises(SystemExit, match="use another --output"):
        compare.main([*argv, "--eval-every", "2"])


def synthetic_run(mode: str, seed: int, curve: list[float]) -> dict:
    return {
        "env": "freshrl/FrozenLake-v0",
        "mode": mode,
        "seed": seed,
        "tau": 20.0,
        "curve": [{"iteration": i, "success": s, "episodes": 4} for i, s in enumerate(curve)],
        "initial": curve[0],
        "peak": max(curve[1:]),
        "final": curve[-1],
        "wall_s": 1.0,
        "settings": {"model_path": None},
    }


def test_aggregate_mean_std_and_range_over_seeds():
    runs = [
        synthetic_run("per", 0, [0.0, 0.5, 0.25]),
        synthetic_run("per", 1, [0.0, 0.25, 0.75]),
        synthetic_run("freshper", 0, [0.0, 1.0, 0.0]),
    ]
    table = compare.aggregate(runs)["freshrl/FrozenLake-v0"]
    # 95% t interval over 2 seeds: t_0.975(1) x std / sqrt(2) = 12.7062 x 0.125.
    assert table["per"]["peak"] == {
        "mean": 0.625,
        "std": pytest.approx(0.1767767),
        "n": 2,
        "ci95": pytest.approx(1.588276),
    }
    assert table["per"]["final"]["mean"] == 0.5
    assert table["per"]["curve"] == {
        "iteration": [0, 1, 2],
        "mean": [0.0, 0.375, 0.5],
        "min": [0.0, 0.25, 0.25],
        "max": [0.0, 0.5, 0.75],
    }
    assert table["freshper"]["peak"]["mean"] == 1.0 and table["freshper"]["peak"]["n"] == 1
    args = compare.parse_args(["--modes", "per", "freshper", "--seeds", "2"])
    text = compare.markdown(args, compare.aggregate(runs), runs, "python -m experiments.compare")
    assert "| freshrl/FrozenLake-v0 | 0.625 ± 1.588 (std 0.177, n=2) | 1.000 ± n/a (std 0.000, n=1) |" in text
    assert text.startswith("# standard PER vs FreshPER (DAPO, tiny scale)\n")  # the arms compared


def test_freshper_is_tested_against_each_mode_with_its_power():
    fresh = [synthetic_run("freshper", k, [0.2, p, p]) for k, p in enumerate([0.40, 0.45, 0.50])]
    on_policy = [synthetic_run("on_policy", k, [0.2, p, p]) for k, p in enumerate([0.20, 0.25, 0.30])]
    for run in fresh:
        run["training"] = [{"replay/is_weight_mean": 0.5, "replay/success_fraction": 0.4}, {}]
    table = compare.aggregate([*fresh, *on_policy])["freshrl/FrozenLake-v0"]
    test = table["on_policy"]["vs_freshper"]["peak"]
    assert test["difference"] == pytest.approx(0.2)
    # Welch: se = sqrt(2 x 0.0025 / 3), t = 0.2 / se = 4.899 on 4 degrees of freedom.
    assert test["p_value"] == pytest.approx(0.00805, abs=2e-4)
    assert 0 < test["detectable"] < 0.2
    assert "vs_freshper" not in table["freshper"]
    assert table["freshper"]["replay"]["replay/is_weight_mean"] == 0.5
    assert table["on_policy"]["replay"]["replay/is_weight_mean"] is None
    args = compare.parse_args(["--modes", "on_policy", "freshper", "--seeds", "3"])
    text = compare.markdown(args, compare.aggregate([*fresh, *on_policy]), [*fresh, *on_policy], "cmd")
    assert "| freshrl/FrozenLake-v0 | on-policy | peak | +0.200 | 0.008 |" in text
    assert "| freshrl/FrozenLake-v0 | FreshPER | 0.500 |" in text  # the replay table, is_weight_mean first


def test_runs_that_trained_nothing_are_flagged():
    untrained = {
        **synthetic_run("per", 0, [0.0, 0.0]),
        "training": [{}, {}],
        "iterations_without_training": 2,
    }
    runs = [untrained, synthetic_run("per", 1, [0.0, 0.5])]
    args = compare.parse_args(["--modes", "per", "--seeds", "2"])
    text = compare.markdown(args, compare.aggregate(runs), runs, "python -m experiments.compare")
    assert "most iterations trained nothing (0 informative groups) in: FrozenLake-v0 per seed 0." in text
    assert "seed 1" not in text.split("trained nothing")[1].split("\n")[0]


def test_replay_metrics_of_runs_loaded_from_disk_skip_iterations_that_did_not_log_them():
    """A saved run's JSON writes a NaN (an iteration without a replay batch) as null; an interrupted
    comparison resumed from its saved runs must aggregate them as the runs in memory."""
    run = synthetic_run("freshper", 0, [0.0, 0.5])
    run["training"] = [{"replay/is_weight_mean": None}, {"replay/is_weight_mean": 0.5}, {}]
    in_memory = dict(run, training=[{"replay/is_weight_mean": float("nan")}, *run["training"][1:]])
    for runs in ([run], [in_memory]):
        table = compare.aggregate(runs)["freshrl/FrozenLake-v0"]
        assert table["freshper"]["replay"]["replay/is_weight_mean"] == 0.5


def test_a_report_says_when_its_runs_come_from_more_than_one_commit():
    args = compare.parse_args(["--modes", "per", "--seeds", "3"])
    runs = [synthetic_run("per", k, [0.0, 0.5]) for k in range(3)]
    for run, commit, dirty in zip(runs, ["a" * 40, "a" * 40, "b" * 40], [False, False, True], strict=True):
        run.update(commit=commit, dirty=dirty)
    text = compare.markdown(args, compare.aggregate(runs), runs, "cmd")
    assert "more than one state of the code: 2 at aaaaaaa, 1 at bbbbbbb with uncommitted changes." in text
    runs[2].update(commit="a" * 40, dirty=False)
    text = compare.markdown(args, compare.aggregate(runs), runs, "cmd")
    assert "more than one state of the code" not in text
