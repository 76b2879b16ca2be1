"""``python -m experiments.compare``: outputs, the Table 1 layout, skipping finished runs on rerun, and arms
of any key (``--arms``)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from algorithms.replay import REPLAY_MODES
from experiments import compare
from experiments.common import comparison_runs
from experiments.common.comparison_arms import parse_arms
from experiments.common.comparison_report import aggregate, markdown
from experiments.common.runs_made_by import machines_sentence


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
        assert run["arm"] == path.name.split("__")[1] and run["peak_rss_gib"] > 0  # this process's, sampled
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
    assert "| freshrl/FrozenLake-v0 | FreshPER | " in table.split("## Cost per mode")[1]
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


def synthetic_run(arm: str, seed: int, curve: list[float]) -> dict:
    return {
        "env": "freshrl/FrozenLake-v0",
        "arm": arm,
        "seed": seed,
        "replay_mode": "freshper",
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
    table = aggregate(runs, "freshper")["freshrl/FrozenLake-v0"]
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
    text = markdown(args, aggregate(runs, "freshper"), runs, "python -m experiments.compare")
    assert "| freshrl/FrozenLake-v0 | 0.625 ± 1.588 (std 0.177, n=2) | 1.000 ± n/a (std 0.000, n=1) |" in text
    assert text.startswith("# standard PER vs FreshPER (DAPO, tiny scale)\n")  # the arms compared


def test_freshper_is_tested_against_each_mode_with_its_power():
    fresh = [synthetic_run("freshper", k, [0.2, p, p]) for k, p in enumerate([0.40, 0.45, 0.50])]
    on_policy = [synthetic_run("on_policy", k, [0.2, p, p]) for k, p in enumerate([0.20, 0.30, 0.25])]
    for run in fresh:
        run["training"] = [{"replay/is_weight_mean": 0.5, "replay/success_fraction": 0.4}, {}]
    table = aggregate([*fresh, *on_policy], "freshper")["freshrl/FrozenLake-v0"]
    test = table["on_policy"]["vs_reference"]["peak"]
    # The same seeds 0-2 in both arms: paired by seed. Differences 0.20, 0.15, 0.25: mean 0.2, sd 0.05,
    # t = 0.2 / (0.05 / sqrt 3) = 6.928 on 2 degrees of freedom, whose survival function is
    # 1/2 - t / (2 sqrt(t^2 + 2)) = 0.010102.
    assert (test["test"], test["unit"], test["n"]) == ("paired t-test", "seed", 3)
    assert test["difference"] == pytest.approx(0.2)
    assert test["p_value"] == pytest.approx(2 * (0.5 - 6.928203 / (2 * math.sqrt(6.928203**2 + 2))), abs=1e-6)
    # (t_0.975(2) + t_0.8(2)) x 0.05 / sqrt 3, from the t table: (4.302653 + 1.060660) x 0.028868.
    assert test["detectable"] == pytest.approx((4.302653 + 1.060660) * 0.05 / math.sqrt(3), abs=1e-5)
    # Holm over the table's two tests (peak and final, equal here): 2 x p for both.
    assert test["p_holm"] == pytest.approx(2 * test["p_value"])
    assert "vs_reference" not in table["freshper"]
    assert table["freshper"]["replay"]["replay/is_weight_mean"] == 0.5
    assert table["on_policy"]["replay"]["replay/is_weight_mean"] is None
    args = compare.parse_args(["--modes", "on_policy", "freshper", "--seeds", "3"])
    runs = [*fresh, *on_policy]
    text = markdown(args, aggregate(runs, "freshper"), runs, "cmd")
    assert "## FreshPER against each mode (paired t-test over seeds)" in text
    assert "Difference = FreshPER minus the mode; the unit is the seed" in text
    assert (
        "| freshrl/FrozenLake-v0 | on-policy | peak | +0.200 | paired t-test | 0.020 | 0.040 | 0.155 |"
        in text
    )
    assert "| freshrl/FrozenLake-v0 | FreshPER | 0.500 |" in text  # the replay table, is_weight_mean first


def test_arms_on_other_seeds_get_welchs_test_and_holm_spans_the_whole_table():
    from scipy import stats

    fresh = [synthetic_run("freshper", k, [0.2, p, p]) for k, p in enumerate([0.40, 0.45, 0.50])]
    on_policy = [synthetic_run("on_policy", k, [0.2, p, p]) for k, p in enumerate([0.20, 0.30, 0.25])]
    per = [synthetic_run("per", k, [0.2, p, p]) for k, p in enumerate([0.30, 0.20])]  # seed 2 missing
    table = aggregate([*fresh, *on_policy, *per], "freshper")["freshrl/FrozenLake-v0"]
    welch = table["per"]["vs_reference"]["final"]
    assert (welch["test"], welch["unit"], welch["n"]) == ("Welch's t-test", "seed", 5)
    reference = stats.ttest_ind([0.40, 0.45, 0.50], [0.30, 0.20], equal_var=False).pvalue
    assert welch["p_value"] == pytest.approx(reference)
    # Holm over the 4 tests (2 arms x peak, final; peak = final here): p_paired < p_welch, so the two paired
    # ones get 4 x p_paired, the two Welch ones max(4 x p_paired, 2 x p_welch, 1 x p_welch).
    paired = table["on_policy"]["vs_reference"]["peak"]["p_value"]
    assert paired < welch["p_value"]
    assert table["on_policy"]["vs_reference"]["final"]["p_holm"] == pytest.approx(4 * paired)
    assert welch["p_holm"] == pytest.approx(max(4 * paired, 2 * welch["p_value"]))


def test_the_replay_table_reports_how_fast_replayed_data_went_stale():
    runs = [synthetic_run("freshper", seed, [0.1, 0.2]) for seed in range(2)]
    for run in runs:  # a replay batch's KL above the fresh one's is 0.05 per iteration of age
        run["training"] = [
            {"replay/is_weight_mean": 0.5, "replay/batch_mean_age": age, "train/approx_kl_replay": 0.05 * age}
            for age in (1.0, 2.0)
        ]
    table = aggregate(runs, "freshper")
    fitted = table["freshrl/FrozenLake-v0"]["freshper"]["drift"]
    assert fitted["kl_per_age"] == pytest.approx(0.05) and fitted["tau"] == pytest.approx(20)
    text = markdown(compare.parse_args(["--modes", "freshper", "--seeds", "2"]), table, runs, "cmd")
    assert "| kl_per_age | tau_from_drift |" in text and "| 0.050 | 20.000 |" in text


def test_runs_that_trained_nothing_are_flagged():
    untrained = {
        **synthetic_run("per", 0, [0.0, 0.0]),
        "training": [{}, {}],
        "iterations_without_training": 2,
    }
    runs = [untrained, synthetic_run("per", 1, [0.0, 0.5])]
    args = compare.parse_args(["--modes", "per", "--seeds", "2"])
    text = markdown(args, aggregate(runs, "freshper"), runs, "python -m experiments.compare")
    assert "most iterations trained nothing (0 informative groups) in: FrozenLake-v0 per seed 0." in text
    assert "seed 1" not in text.split("trained nothing")[1].split("\n")[0]


def test_replay_metrics_of_runs_loaded_from_disk_skip_iterations_that_did_not_log_them():
    """A saved run's JSON writes a NaN (an iteration without a replay batch) as null; an interrupted
    comparison resumed from its saved runs must aggregate them as the runs in memory."""
    run = synthetic_run("freshper", 0, [0.0, 0.5])
    run["training"] = [{"replay/is_weight_mean": None}, {"replay/is_weight_mean": 0.5}, {}]
    in_memory = dict(run, training=[{"replay/is_weight_mean": float("nan")}, *run["training"][1:]])
    for runs in ([run], [in_memory]):
        table = aggregate(runs, "freshper")["freshrl/FrozenLake-v0"]
        assert table["freshper"]["replay"]["replay/is_weight_mean"] == 0.5


def test_a_report_says_when_its_runs_come_from_more_than_one_commit_or_uncommitted_changes():
    args = compare.parse_args(["--modes", "per", "--seeds", "3"])
    runs = [synthetic_run("per", k, [0.0, 0.5]) for k in range(3)]

    def sentence(commits: list[str], dirty: list[bool]) -> str:
        for run, commit, changed in zip(runs, commits, dirty, strict=True):
            run.update(commit=commit, dirty=changed)
        text = markdown(args, aggregate(runs, "freshper"), runs, "cmd")
        return text.split("Total run time")[1].split(" min.", 1)[1].split("\n")[0]

    several = sentence(["a" * 40, "a" * 40, "b" * 40], [False, False, True])
    assert "more than one commit: 2 at aaaaaaa, 1 at bbbbbbb with uncommitted changes." in several
    one_dirty = sentence(["a" * 40] * 3, [True] * 3)
    assert "at one commit, aaaaaaa, all of them with uncommitted changes" in one_dirty
    assert "more than one" not in one_dirty
    partly = sentence(["a" * 40] * 3, [False, True, False])
    assert "at one commit, aaaaaaa, 1 of the 3 with uncommitted changes" in partly
    assert sentence(["a" * 40] * 3, [False] * 3) == ""


# ---------------------------------------------------------------------------------------------------------
# --arms: any DAPOConfig or run key.
def test_arms_values_are_read_as_set_reads_them():
    args = compare.parse_args(["--arms", "lora_rank=0,16"])
    assert [(arm.label, arm.keys) for arm in args.arms] == [("lora_rank=0", {"lora_rank": 0}),
                                                            ("lora_rank=16", {"lora_rank": 16})]  # fmt: skip
    assert args.reference == "lora_rank=0" and not args.replay_arms
    assert [arm.keys for arm in parse_arms("replay_backfill=true,false")] == [
        {"replay_backfill": True},
        {"replay_backfill": False},
    ]
    assert [arm.keys for arm in parse_arms("advantage_estimator=episode, gigpo")] == [
        {"advantage_estimator": "episode"},
        {"advantage_estimator": "gigpo"},
    ]
    # Commas inside a YAML list do not split arms.
    assert [arm.keys for arm in parse_arms("adam_betas=[0.9, 0.99],[0.9, 0.999]")] == [
        {"adam_betas": [0.9, 0.99]},
        {"adam_betas": [0.9, 0.999]},
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--arms", "lora_rank=16"], "at least 2 values"),
        (["--arms", "lora_rank=16,16"], "'lora_rank=16' and 'lora_rank=16' are the same arm"),
        (
            ["--arms", "replay_backfill=true,True"],
            "'replay_backfill=true' and 'replay_backfill=True' are the same",
        ),
        (
            ["--arms", "lora_rank=0,16", "--arms", "lr=1e-5,1e-4,1e-3"],
            "one value per arm, paired by position",
        ),
        (["--arms", "lora_rank=0,16", "--arms", "lora_rank=8,4"], "lora_rank=... is given twice"),
        (["--arms", "lora_rank=0,16", "--arms", "lr=1e-5,1e-5"], None),
        (["--arms", "lora_rnk=0,16"], "unknown DAPOConfig key 'lora_rnk' \\(did you mean lora_rank"),
        (["--arms", "lora_rank=0,16", "--modes", "per"], "--arms and --modes exclude each other"),
        (["--arms", "lora_rank"], "--arms takes KEY=V1,V2"),
        (["--arms", "seed=0,1"], "use --seeds"),
        (["--arms", "tau=4,8", "--tau", "2"], "drop it from --set"),
    ],
)
def test_bad_arms_are_errors_naming_the_fix(argv, message, capsys):
    if message is None:  # a key may repeat a value, as long as the arms differ
        compare.parse_args(argv)
        return
    with pytest.raises(SystemExit):
        compare.parse_args(argv)
    assert re.search(message, capsys.readouterr().err)


def test_repeated_arms_set_several_keys_per_arm_paired_by_position():
    args = compare.parse_args(["--arms", "lora_rank=0,16", "--arms", "lr=2e-5,2e-4"])
    assert [(arm.label, arm.keys) for arm in args.arms] == [
        ("lora_rank=0, lr=2e-5", {"lora_rank": 0, "lr": 2e-5}),
        ("lora_rank=16, lr=2e-4", {"lora_rank": 16, "lr": 2e-4}),
    ]
    assert [arm.file_stem for arm in args.arms] == ["lora_rank-0+lr-2e-5", "lora_rank-16+lr-2e-4"]
    assert args.reference == "lora_rank=0, lr=2e-5"
    env = args.envs[0]
    assert comparison_runs.run_settings(args, env, args.arms[1]).overrides["lr"] == 2e-4


def test_a_bad_arm_value_is_the_config_validators_error():
    with pytest.raises(SystemExit, match="lora_rank must be an integer >= 0"):
        compare.parse_args(["--arms", "lora_rank=0,-1"])


def test_each_arm_run_carries_its_key_and_has_its_own_file():
    env = "freshrl/FrozenLake-v0"
    args = compare.parse_args(["--arms", "lora_rank=0,16"])
    first, second = (comparison_runs.run_settings(args, env, arm, seed=1) for arm in args.arms)
    assert first.overrides["lora_rank"] == 0 and second.overrides["lora_rank"] == 16
    assert first.overrides["seed"] == second.overrides["seed"] == 1
    paths = [comparison_runs.run_path(Path("out"), env, arm, 0) for arm in args.arms]
    assert [path.name for path in paths] == [
        "FrozenLake-v0__lora_rank-0__seed0.json",
        "FrozenLake-v0__lora_rank-16__seed0.json",
    ]
    # A run key goes to its field of the run's settings.
    args = compare.parse_args(["--arms", "iterations=2,4"])
    assert [comparison_runs.run_settings(args, env, arm).iterations for arm in args.arms] == [2, 4]
    # Values that are not file-safe as typed still get distinct, safe names.
    names = [arm.file_stem for arm in parse_arms("adam_betas=[0.9, 0.99],[0.9,0.999]")]
    names += [arm.file_stem for arm in parse_arms("advantage=a b,a_b,a/b")]  # one slug, a_b
    assert len(set(names)) == 5 and all(re.fullmatch(r"[A-Za-z0-9._+-]+", name) for name in names)


def test_replay_mode_runs_keep_their_settings_and_file_names():
    """Committed comparisons resume: a replay mode's run file and settings are as they always were."""
    env = "freshrl/FrozenLake-v0"
    args = compare.parse_args(["--modes", "per", "freshper+backfill"])
    assert args.replay_arms and args.reference == "freshper"
    per, backfill = args.arms
    assert comparison_runs.run_path(Path("out"), env, backfill, 1) == Path(
        "out/runs/FrozenLake-v0__freshper+backfill__seed1.json"
    )
    assert comparison_runs.run_path(Path("out"), env, per, 0).name == "FrozenLake-v0__per__seed0.json"
    settings = comparison_runs.run_settings(args, env, backfill, seed=1)
    assert {k: settings.overrides[k] for k in ("seed", "replay_mode", "replay_backfill")} == {
        "seed": 1,
        "replay_mode": "freshper",
        "replay_backfill": True,
    }
    assert [arm.label for arm in compare.parse_args([]).arms] == list(REPLAY_MODES)


def test_a_run_saved_when_arms_were_modes_loads_as_its_arm(tmp_path):
    saved = synthetic_run("per", 0, [0.0, 0.5])
    saved["mode"] = saved.pop("arm")  # as runs were saved before --arms
    path = tmp_path / "FrozenLake-v0__per__seed0.json"
    path.write_text(json.dumps(saved))
    run = comparison_runs.load_finished(path, saved["settings"])
    assert run["arm"] == "per" and "mode" not in run


def test_generic_arms_report_tests_the_first_arm_and_shows_the_cost():
    args = compare.parse_args(["--arms", "lora_rank=0,16", "--seeds", "2"])
    runs = []
    for arm, peaks, walls, rss in [("lora_rank=0", [0.6, 0.7], [60, 180], [1.5, 2.5]),
                                   ("lora_rank=16", [0.4, 0.5], [60, 60], [1.0, 1.0])]:  # fmt: skip
        for seed, (peak, wall, gib) in enumerate(zip(peaks, walls, rss, strict=True)):
            runs.append({**synthetic_run(arm, seed, [0.2, peak, peak]), "wall_s": wall, "peak_rss_gib": gib})
    table = aggregate(runs, args.reference)
    cells = table["freshrl/FrozenLake-v0"]
    assert "vs_reference" not in cells["lora_rank=0"]
    assert cells["lora_rank=16"]["vs_reference"]["peak"]["difference"] == pytest.approx(0.2)
    assert cells["lora_rank=0"]["cost"]["peak_rss_gib"] == {
        "mean": 2.0,
        "min": 1.5,
        "max": 2.5,
        "n": 2,
        "of": 2,
    }
    text = markdown(args, table, runs, "cmd")
    assert text.startswith("# lora_rank=0 vs lora_rank=16 (DAPO, tiny scale)\n")
    assert "## lora_rank=0 against each arm (paired t-test over seeds)" in text
    assert "Difference = lora_rank=0 minus the arm; the unit is the seed" in text
    assert "| freshrl/FrozenLake-v0 | lora_rank=16 | peak | +0.200 |" in text
    assert "| task | lora_rank=0 | lora_rank=16 |" in text
    assert "## Cost per arm (mean over seeds; range)" in text
    assert "| freshrl/FrozenLake-v0 | lora_rank=0 | 2.0 (1.0-3.0) | 2.00 (1.50-2.50) |" in text
    assert "| freshrl/FrozenLake-v0 | lora_rank=16 | 1.0 (1.0-1.0) | 1.00 (1.00-1.00) |" in text
    assert "Replay mode freshper (tau = 20" in text
    assert "FreshPER paper, Table 1" not in text and "FrozenLake (LLM)" not in text
    assert "Replay batches" not in text  # no arm logged replay metrics


def test_replay_modes_report_keeps_the_paper_table_and_shows_the_cost():
    args = compare.parse_args(["--modes", "per", "freshper", "--seeds", "1"])
    runs = [
        synthetic_run("per", 0, [0.0, 0.5]),
        {**synthetic_run("freshper", 0, [0.0, 0.5]), "peak_rss_gib": 3.0},
    ]
    text = markdown(args, aggregate(runs, args.reference), runs, "cmd")
    assert text.startswith("# standard PER vs FreshPER (DAPO, tiny scale)\n")
    assert "| FrozenLake (LLM) | success | 0.297 | 0.281 | 0.305 | freshrl/FrozenLake-v0 |" in text
    assert "## Cost per mode" in text
    assert "| freshrl/FrozenLake-v0 | standard PER | 0.0 (0.0-0.0) | n/a |" in text  # saved before peak RSS
    assert "| freshrl/FrozenLake-v0 | FreshPER | 0.0 (0.0-0.0) | 3.00 (3.00-3.00) |" in text


def test_an_interrupted_comparison_keeps_the_report_of_its_finished_runs(
    tmp_path, tiny_workload, monkeypatch
):
    argv = ["--modes", "on_policy", "freshper", "--seeds", "1", "--iterations", "1", *tiny_workload]
    argv += ["--output", str(tmp_path)]
    trained = []

    def train(run, config, settings, arm):  # the first run finishes, the second is interrupted
        if trained:
            raise KeyboardInterrupt
        trained.append(arm)
        return {**synthetic_run(arm, config.seed, [0.1, 0.3]), "settings": settings, "replay_mode": arm}

    monkeypatch.setattr(comparison_runs, "start_ray", lambda **kwargs: None)
    monkeypatch.setattr(comparison_runs, "train_and_evaluate", train)
    with pytest.raises(KeyboardInterrupt):
        compare.main(argv)
    report = (tmp_path / "comparison.md").read_text()
    partial = "**Partial: 1 of 2 runs finished.** Missing: FrozenLake-v0 freshper seed 0."
    assert partial in report and "| freshrl/FrozenLake-v0 | 0.300 ± n/a (std 0.000, n=1) |" in report
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["planned_runs"] == 2 and len(results["runs"]) == 1
    assert results["missing"] == [{"env": "freshrl/FrozenLake-v0", "arm": "freshper", "seed": 0}]

    # The report of what is saved, training nothing; it names the command that trains the runs.
    def untrainable(*args):
        pytest.fail("--report-only trained")

    monkeypatch.setattr(comparison_runs, "train_and_evaluate", untrainable)
    only = compare.main([*argv, "--report-only"])
    assert only["ran"] == [] and [p.name for p in only["skipped"]] == ["FrozenLake-v0__on_policy__seed0.json"]
    report = (tmp_path / "comparison.md").read_text()
    assert partial in report and "--report-only" not in report
    assert json.loads((tmp_path / "results.json").read_text())["provenance"]["report_only"] is True

    # Resumed, the comparison trains only the missing run and its report is whole.
    trained.clear()
    monkeypatch.setattr(comparison_runs, "train_and_evaluate", train)
    resumed = compare.main(argv)
    assert trained == ["freshper"] and len(resumed["ran"]) == 1 and len(resumed["skipped"]) == 1
    report = (tmp_path / "comparison.md").read_text()
    assert "Partial" not in report and "| on-policy | peak | +0.000 |" in report
    assert json.loads((tmp_path / "results.json").read_text())["missing"] == []


def test_report_only_needs_the_runs_of_a_comparison(tmp_path, capsys):
    with pytest.raises(SystemExit):
        compare.parse_args(["--report-only"])
    assert (
        "--report-only reads the runs of an earlier comparison: give its --output" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit, match="found no finished run of this comparison"):
        compare.main(["--report-only", "--output", str(tmp_path)])


def test_the_papers_effect_in_proportion_by_hand():
    from experiments.common.freshper_paper import proportional_effect

    # NQ Search: FreshPER 0.742 against on-policy 0.508 (+46.06%) and PER 0.336 (+120.8%), on our gains.
    assert proportional_effect("freshrl/NQSearch-v0", "on_policy", 0.13) == pytest.approx(
        (0.742 / 0.508 - 1) * 0.13
    )
    per = proportional_effect("freshrl/NQSearch-v0", "per", 0.10)
    assert per == pytest.approx((0.742 / 0.336 - 1) * 0.10)
    # Sokoban's score has no meaningful ratio; FreshPER against itself, and an env the paper lacks: none.
    assert proportional_effect("freshrl/Sokoban-v0", "on_policy", 0.1) is None
    assert proportional_effect("freshrl/NQSearch-v0", "freshper", 0.1) is None
    assert proportional_effect("freshrl/NQSearchTools-v0", "on_policy", 0.1) is None


def test_a_settings_file_names_the_env_compared(capsys):
    settings = "experiments/settings/lab/sokoban_short.yaml"
    args = compare.parse_args(["--settings", settings, "--modes", "on_policy"])
    assert args.envs == ["freshrl/Sokoban-v0"] and args.run.iterations == 40  # the file's, not the quick 3
    assert args.arm_configs[0].env_config["max_solution_length"] == 4
    with pytest.raises(SystemExit):
        compare.parse_args(["--settings", settings, "--envs", "freshrl/Sokoban-v0", "freshrl/Math-v0"])
    assert "--settings describes one env's runs" in capsys.readouterr().err


def test_a_report_names_the_cpus_its_runs_ran_on_and_counts_those_saved_before_runs_recorded_one():
    """Runs are deterministic on one CPU kind and move across kinds: a study resumed on another machine must
    say which runs ran where, since the report's own provenance names only the machine that wrote it."""
    xeon = {"cpu_model": "Intel Xeon", "cpu_generation": "family 6 model 143", "cpu_flags": ["amx_bf16"]}
    epyc = {"cpu_model": "AMD EPYC", "cpu_generation": "family 26 model 2", "cpu_flags": ["avx512_bf16"]}
    runs = [synthetic_run("per", k, [0.0, 0.5]) for k in range(3)]
    assert machines_sentence(runs) == ""  # none recorded: nothing claimed
    for run in runs:
        run["machine"] = epyc
    assert machines_sentence(runs) == " The runs ran on AMD EPYC, family 26 model 2 (avx512_bf16)."
    runs[0]["machine"] = xeon
    del runs[1]["machine"]
    assert machines_sentence(runs) == (
        " The runs' CPUs: 1 on Intel Xeon, family 6 model 143 (amx_bf16); 1 on AMD EPYC, family 26 model 2"
        " (avx512_bf16); 1 saved before runs recorded their CPU."
    )
