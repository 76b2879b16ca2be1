"""Every benchmark parses its arguments and checks its optional imports before any work.

Runs each benchmark's ``main(["--check-setup"])``, which stops after the parsing and the check: the benchmarks
themselves are not run here. Every module of benchmarks/ is a benchmark but the shared helpers in HELPERS.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

import benchmarks
from benchmarks.requirements import (
    BENCH_SETUP,
    ENGINE_SETUP,
    MissingRequirements,
    missing_modules,
    parse_and_check,
)

# Modules the benchmarks import, with no main() of their own: the package, the argument parsing and setup
# check (requirements), the measurement helpers (measure), the FLOP counting (flops).
HELPERS = {"__init__", "requirements", "measure", "flops"}
BENCHMARKS = sorted(
    path.stem for path in Path(benchmarks.__file__).parent.glob("*.py") if path.stem not in HELPERS
)


@pytest.fixture(autouse=True)
def environment_kept():
    """A benchmark's main sets process-wide variables for its own run (vLLM's log level to ERROR, say); they
    must not reach later tests, nor the commands those start in subprocesses."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def benchmark(name: str):
    return importlib.import_module(f"benchmarks.{name}")


def test_every_benchmark_is_found():
    assert {"dapo_step", "env_throughput", "replay_buffer", "rollout_throughput"} <= set(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(HELPERS - {"__init__"}))
def test_a_helper_is_a_module_of_benchmarks_without_a_main(name):
    assert not hasattr(benchmark(name), "main")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_check_setup_parses_the_arguments_checks_the_imports_and_stops(name, capsys):
    module = benchmark(name)
    missing = missing_modules(module.REQUIRES)
    with pytest.raises(SystemExit) as stopped:
        module.main(["--check-setup"])
    if missing:  # e.g. a clone without `make bench`: the error says how to install what is missing
        assert isinstance(stopped.value, MissingRequirements)
        assert all(name in str(stopped.value) for name in missing)
    else:
        assert stopped.value.code == 0
        assert "optional imports present" in capsys.readouterr().out


@pytest.mark.parametrize("name", BENCHMARKS)
def test_an_unknown_argument_is_refused(name):
    with pytest.raises(SystemExit) as stopped:
        benchmark(name).main(["--check-setup", "--no-such-option"])
    assert stopped.value.code == 2


@pytest.mark.parametrize("name", BENCHMARKS)
def test_a_missing_optional_import_stops_the_benchmark_with_the_install_command(name, monkeypatch):
    module = benchmark(name)
    monkeypatch.setattr(module, "REQUIRES", (*module.REQUIRES, "freshrl_not_installed"))
    with pytest.raises(MissingRequirements) as stopped:
        module.main(["--check-setup"])
    message = str(stopped.value)
    assert "freshrl_not_installed" in message and "No module named" in message
    assert BENCH_SETUP in message
    assert stopped.value.code != 0


def test_a_missing_engine_points_to_the_engine_setup(monkeypatch):
    real_import = importlib.import_module

    def no_vllm(module, *args):
        if module == "vllm":
            raise ModuleNotFoundError("No module named 'vllm'")
        return real_import(module, *args)

    monkeypatch.setattr(importlib, "import_module", no_vllm)
    with pytest.raises(MissingRequirements) as stopped:
        parse_and_check(argparse.ArgumentParser(prog="bench"), [], ("vllm",))
    assert ENGINE_SETUP in str(stopped.value) and BENCH_SETUP not in str(stopped.value)


def test_the_check_runs_before_the_arguments_are_returned():
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--n", type=int, default=1)
    assert parse_and_check(parser, ["--n", "3"], ()).n == 3
    with pytest.raises(MissingRequirements):
        parse_and_check(argparse.ArgumentParser(prog="bench"), [], ("freshrl_not_installed",))


def test_the_gym_sokoban_baseline_is_the_package_itself():
    pytest.importorskip("gym_sokoban.envs.room_utils", reason="the bench extra (make bench) is not installed")
    from benchmarks.env_throughput import gym_sokoban_level

    structure, state = gym_sokoban_level((6, 6), num_boxes=1)
    assert structure.shape == state.shape == (6, 6)
    # gym-sokoban's codes: 2 target, 4 box off target, 5 player; one of each for one box, walls all round.
    assert np.count_nonzero(structure == 2) == 1
    assert np.count_nonzero(state == 4) + np.count_nonzero(state == 3) == 1
    assert np.count_nonzero(state == 5) == 1
    assert not structure[0].any() and not structure[-1].any()


def test_the_replay_benchmark_records_its_agreement_with_provenance(tmp_path):
    benchmark("replay_buffer").main(["--quick", "--no-rllib", "--budget", "0.01", "--output", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["provenance"]["command"].startswith("python -m benchmarks.replay_buffer --quick")
    assert 0.0 <= results["agreement_max_relative_difference"] < 1e-12
    names = ("direct", "ours/freshper", "ours/per", "ours/freshper_poly")
    assert set(results["seconds"]) == {f"{n} {name}" for n in (1000, 10000) for name in names}


def test_learner_step_passes_its_arguments_on_to_each_arm_without_the_driver_options():
    from benchmarks.learner_step import without_options

    argv = ["--learn", "b.pkl", "--lora-vs-full", "16", "--repeats=3", "--set", "lr=1e-5"]
    argv += ["--result-json", "x"]
    assert without_options(argv, {"--lora-vs-full": 1, "--repeats": 1, "--result-json": 1}) == [
        "--learn", "b.pkl", "--set", "lr=1e-5",
    ]  # fmt: skip


def test_learner_step_lora_vs_full_needs_a_saved_batch(capsys):
    with pytest.raises(SystemExit):
        benchmark("learner_step").main(["--lora-vs-full", "16"])
    assert "add --learn BATCH" in capsys.readouterr().err


def test_learner_step_lora_vs_full_rows_take_each_arms_fastest_update_against_full():
    from benchmarks.learner_step import lora_vs_full_rows

    record = {"trainable_parameters": 10, "peak_rss_gib": 1.0, "dtypes": {"model_dtype": "float32"}}
    records = {
        "full": [{**record, "update_s": [4.0]}, {**record, "update_s": [2.0], "peak_rss_gib": 3.0}],
        "LoRA r=8": [{**record, "update_s": [5.0], "trainable_parameters": 2}, {**record, "update_s": [3.0]}],
    }
    rows = lora_vs_full_rows(records, {"full": 0, "LoRA r=8": 8}, tokens=600)
    assert rows["full"]["fastest_update_s"] == 2.0 and rows["full"]["peak_rss_gib"] == 3.0
    assert rows["full"]["update_s"] == [4.0, 2.0] and rows["full"]["tokens_per_s"] == 300.0
    assert rows["LoRA r=8"]["time_vs_full"] == 1.5 and rows["LoRA r=8"]["trainable_parameters"] == 2
