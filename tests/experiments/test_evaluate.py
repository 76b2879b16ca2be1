"""``python -m experiments.evaluate``: the report on synthetic metrics, the command line, and the real path
on a tiny workload (2 envs, 2 tasks, 2 samples; one training iteration; a train run's checkpoint): the
command in its own process, with what its console shows and its run.log keeps."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import evaluate, train
from experiments.common.evaluation_report import env_table, markdown, pass_keys, write_report
from experiments.common.quiet_logs import LOG_FILE_NAME, VERBOSE
from experiments.common.results_json import git_state
from models.tiny import tiny_lm_path, tiny_vlm_path

TINY_WORKLOAD = {
    "prompts_per_iteration": 2,
    "group_size": 2,
    "max_response_tokens": 12,
    "overlong_cache_len": 4,
    "max_generation_batches": 1,
    "minibatch_size": 4,
    "engine_kv_cache_gib": 0.5,
}
REPO = Path(__file__).resolve().parents[2]
SETS = [arg for key, value in TINY_WORKLOAD.items() for arg in ("--set", f"{key}={value}")]


def metrics(success: float, low: float, high: float, samples: int = 4) -> dict:
    return {
        "success": success,
        "success_ci95_low": low,
        "success_ci95_high": high,
        **{f"pass@{k}": min(1.0, success * k) for k in (1, 2, samples)},
        "return_mean": success - 0.1,
        "format_valid_rate": 0.875,
        "turns_mean": 3.25,
        "response_length_mean": 41.5,
        "mixed_task_rate": 0.25,
        "num_tasks": 8,
        "num_episodes": 8 * samples,
        "samples_per_task": samples,
        "split": "validation",
    }


def synthetic_report(curves: bool) -> dict:
    def entry(env_id: str, m: dict) -> dict:
        curve = [
            {"iteration": 0, "success": 0.1, "success_ci95_low": 0.02, "success_ci95_high": 0.3},
            {"iteration": 2, "success": m["success"], "success_ci95_low": 0.2, "success_ci95_high": 0.6},
        ]
        training = [{"iteration": 1, "rollout_success": 0.2}, {"iteration": 2, "rollout_success": None}]
        return {
            "env_id": env_id,
            "model": "/models/tiny-qwen2",
            "seconds": 12.0,
            "metrics": m,
            "curve": curve if curves else [],
            "training": training if curves else [],
        }

    return {
        "provenance": {
            "command": "python -m experiments.evaluate --tasks 8 --samples 4",
            "commit": "abc1234",
            "dirty": True,
            "date": "2026-12-01T10:00:00Z",
            "machine": {
                "cores": 2,
                "architecture": "x86_64",
                "cpu_model": "Some CPU",
                "cpu_flags": ["avx2", "fma"],
                "allocator": "glibc malloc",
                "gpu": None,
            },
        },
        "split": "validation",
        "tasks": 8,
        "samples": 4,
        "train_iterations": 2 if curves else 0,
        "seconds": 30.0,
        "envs": {
            "FrozenLake": entry("freshrl/FrozenLake-v0", metrics(0.375, 0.25, 0.52)),
            "Math": entry("freshrl/Math-v0", metrics(0.0, 0.0, 0.11)),
        },
    }


def test_pass_keys_sort_by_k():
    assert pass_keys({"pass@16": 1, "pass@2": 1, "pass@1": 1, "success": 0}) == [
        "pass@1",
        "pass@2",
        "pass@16",
    ]


def test_an_env_table_has_success_with_its_interval_pass_at_k_return_format_turns_and_length():
    text = "\n".join(env_table(metrics(0.375, 0.25, 0.52)))
    assert "| success (95% CI: Wilson over episodes, unclustered) | 0.375 [0.250, 0.520] |" in text
    # The interval names its method and unit: over task means where a task had several samples.
    clustered = {**metrics(0.375, 0.25, 0.52), "success_ci95_method": "task-clustered t"}
    assert "| success (95% CI: task-clustered t, over tasks) |" in "\n".join(env_table(clustered))
    assert "| pass@1 |" in text and "| pass@4 |" in text
    assert "| mean return | 0.275 |" in text
    assert "| format-valid turns | 87.5% |" in text
    assert "| turns per episode | 3.25 |" in text
    assert "| response tokens per episode | 41.5 |" in text
    assert "| episodes | 32 |" in text


def test_the_report_says_what_made_it_and_has_a_table_per_env(tmp_path):
    report = synthetic_report(curves=False)
    paths = write_report(report, tmp_path)
    assert [p.name for p in paths] == ["report.md", "report.json", "report.png"]
    text = (tmp_path / "report.md").read_text()
    made = report["provenance"]
    assert f"`{made['command']}`" in text and made["date"] in text
    assert "commit abc1234 (with uncommitted changes)" in text
    assert "2 cores (Some CPU; avx2, fma), glibc malloc, no GPU" in text
    assert "## FrozenLake (`freshrl/FrozenLake-v0`)" in text and "## Math (`freshrl/Math-v0`)" in text
    assert "| FrozenLake | `tiny-qwen2` | 0.375 [0.250, 0.520] | 1.000 |" in text  # pass@4
    assert "learning" not in text.lower()
    assert json.loads((tmp_path / "report.json").read_text()) == report
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")


def test_with_training_the_report_has_learning_curves(tmp_path):
    report = synthetic_report(curves=True)
    write_report(report, tmp_path)
    assert (
        "Validation success by training iteration: 0: 0.100, 2: 0.375."
        in (tmp_path / "report.md").read_text()
    )
    with_curves = (tmp_path / "report.png").stat().st_size
    write_report(synthetic_report(curves=False), tmp_path / "flat")
    assert with_curves > (tmp_path / "flat" / "report.png").stat().st_size  # the second panel
    assert json.loads((tmp_path / "report.json").read_text())["envs"]["Math"]["training"][1] == {
        "iteration": 2,
        "rollout_success": None,
    }


def test_markdown_says_no_training_or_how_much():
    assert "no training" in markdown(synthetic_report(curves=False))
    assert "2 DAPO iterations per env" in markdown(synthetic_report(curves=True))


# ------------------------------------------------------------------------------------------- command line
def test_envs_are_suite_names_in_any_case_or_ids_and_default_to_the_suite():
    assert evaluate.parse_args([]).env_ids == list(evaluate.SUITE.values())
    args = evaluate.parse_args(["--envs", "frozenlake, MATH,freshrl/SokobanHard-v0,Math"])
    assert args.env_ids == ["freshrl/FrozenLake-v0", "freshrl/Math-v0", "freshrl/SokobanHard-v0"]
    assert evaluate.report_name("freshrl/SokobanHard-v0") == "SokobanHard-v0"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--envs", "Chess"], "unknown env 'Chess'; use one of FrozenLake"),
        (["--tasks", "0"], "--tasks must be >= 1, got 0"),
        (["--samples", "0"], "--samples must be >= 1"),
        (["--split", "train"], "invalid choice: 'train'"),
        (["--train", "-1"], "--train must be >= 0"),
        (["--checkpoint", "/nonexistent"], "no summary.json"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        evaluate.parse_args(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_a_vision_env_gets_the_vision_model_and_text_envs_the_model():
    args = evaluate.parse_args(
        ["--model", str(tiny_lm_path()), "--vision-model", str(tiny_vlm_path()),
         "--tasks", "3", "--samples", "2", "--set", "lr=1e-5"]
    )  # fmt: skip
    text = evaluate.env_settings(args, "freshrl/Math-v0")
    vision = evaluate.env_settings(args, "freshrl/FrozenLakeVision-v0")
    assert text.model == str(tiny_lm_path()) and vision.model == str(tiny_vlm_path())
    evaluation = ("evaluation_num_tasks", "evaluation_samples_per_task", "evaluation_interval")
    assert [text.overrides[key] for key in evaluation] == [3, 2, None]
    assert text.overrides["lr"] == 1e-5 and vision.env == "freshrl/FrozenLakeVision-v0"
    defaults = evaluate.env_settings(evaluate.parse_args([]), "freshrl/FrozenLakeVision-v0")
    assert defaults.model is None  # the tiny VLM's warm start (run_config.starting_model)


# ------------------------------------------------------------------------------------------- the real path
# Lines the libraries print before a run's first result (docs/training.md, experiments/common/quiet_logs.py):
# none may reach the console of an entry point.
CONSOLE_NOISE = (
    "Started a local Ray instance",
    "on the new API stack",
    "RLModuleConfig",
    "Triton",
    "CUDA_HOME",
    "NUMA binding",
    "reduce_op",
    "Loading safetensors checkpoint shards",
    "Enforce eager set",
    "LD_PRELOAD",
    "torch.set_num_threads",
    "Trainable.setup took",
    "gputil",
)


def test_the_evaluate_command_writes_its_report_shows_its_own_lines_and_logs_the_rest(tmp_path):
    """The real command as a user runs it, in its own process (its process-wide log settings, its own Ray,
    the engine): the report, a console without the libraries' known-harmless lines, and those in run.log."""
    out = tmp_path / "bench"
    argv = ["--envs", "FrozenLake,Math", "--tasks", "2", "--samples", "2", "--model", str(tiny_lm_path()),
            "--train", "1", "--eval-every", "1", *SETS, "--output", str(out)]  # fmt: skip
    environ = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", VERBOSE)}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "experiments.evaluate", *argv],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    console = done.stdout + done.stderr
    assert done.returncode == 0, console
    assert "FrozenLake: success" in console and "Math: success" in console
    for name in ("FrozenLake", "Math"):  # each evaluation of the training, as it comes
        assert f"{name}, before training: validation success" in console
        assert f"{name}, iteration 1/1: validation success" in console
    assert [line for line in CONSOLE_NOISE if line in console] == []
    logged = (out / LOG_FILE_NAME).read_text()
    for line in ("Started a local Ray instance", "on the new API stack", "Enforce eager set"):
        assert line in logged

    saved = json.loads((out / "report.json").read_text())
    assert list(saved["envs"]) == ["FrozenLake", "Math"]
    assert saved["provenance"]["command"] == shlex.join(["python", "-m", "experiments.evaluate", *argv])
    assert saved["provenance"]["commit"] == git_state()[0]
    for entry in saved["envs"].values():
        m = entry["metrics"]
        assert (m["num_tasks"], m["samples_per_task"], m["num_episodes"], m["split"]) == (
            2,
            2,
            4,
            "validation",
        )
        assert 0.0 <= m["success_ci95_low"] <= m["success"] <= m["success_ci95_high"] <= 1.0
        assert m["pass@1"] <= m["pass@2"]
        assert [p["iteration"] for p in entry["curve"]] == [0, 1]  # before training, and RLlib's after it
        assert entry["curve"][-1]["success"] == m["success"]
        assert [p["iteration"] for p in entry["training"]] == [1]
        assert entry["model"] == str(tiny_lm_path())
        settings = entry["settings"]  # what the run was: the env's settings, then the command line
        assert (settings["env"], settings["iterations"]) == (entry["env_id"], 1)
        assert settings["overrides"]["evaluation_num_tasks"] == 2
        assert entry["dtypes"]["model_dtype"] == entry["dtypes"]["engine_dtype"] == "float32"
    text = (out / "report.md").read_text()
    assert saved["provenance"]["command"] in text and "## Math (`freshrl/Math-v0`)" in text
    assert (out / "report.png").read_bytes().startswith(b"\x89PNG")


def test_the_evaluation_evaluates_a_train_runs_checkpoint_on_its_env(tmp_path, ray_session):
    run = tmp_path / "run"
    train.main(["--iterations", "1", "--eval-tasks", "3", "--model", str(tiny_lm_path()), *SETS,
                "--output", str(run)])  # fmt: skip
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--checkpoint", str(run), "--envs", "Math"])
    report = evaluate.main(
        ["--checkpoint", str(run), "--tasks", "2", "--samples", "1", "--output", str(tmp_path)]
    )
    assert list(report["envs"]) == ["FrozenLake"]
    entry = report["envs"]["FrozenLake"]
    assert entry["model"] == str(tiny_lm_path()) and entry["metrics"]["num_episodes"] == 2
