"""The one provenance record of a results file: command, commit, dirty tree, UTC date, machine, dtypes."""

from __future__ import annotations

import os
import re
import subprocess

from experiments.common.results_json import REPOSITORY, git_state, provenance, value_at


def test_provenance_records_the_command_commit_date_and_machine():
    record = provenance("python -m experiments.check_envs", ["--output", "a folder"])
    assert record["command"] == "python -m experiments.check_envs --output 'a folder'"
    head = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert record["commit"] == (head.stdout.strip() or None)
    assert isinstance(record["dirty"], bool) or record["commit"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", record["date"])
    machine = record["machine"]
    assert machine["cores"] == os.cpu_count() and machine["cpu_model"] and machine["allocator"]
    assert set(machine["cpu_flags"]) <= {"avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                                         "amx_bf16", "asimd", "sve"}  # fmt: skip
    generation = machine["cpu_generation"]
    assert generation is None or re.fullmatch(r"family \d+ model \d+", generation)
    assert "dtypes" not in record  # only with a run's config


def test_value_at_follows_dotted_keys_into_dicts_and_lists():
    results = {"envs": {"freshrl/FrozenLake-v0": {"curve": [{"success": 0.5}]}}}
    assert value_at(results, "envs.freshrl/FrozenLake-v0.curve.0.success") == 0.5
    try:
        value_at(results, "envs.Math")
    except KeyError as error:
        assert "'Math'" in str(error)
    else:
        raise AssertionError("a missing key must raise")


def test_a_run_writing_its_own_results_does_not_make_the_tree_dirty(tmp_path):
    def git(*arguments):
        subprocess.run(["git", "-C", str(tmp_path), *arguments], check=True, capture_output=True)

    (tmp_path / "docs" / "results" / "compare").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "compare" / "run.log").write_text("first run\n")
    (tmp_path / "train.py").write_text("lr = 2e-5\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "runs")
    assert git_state(tmp_path)[1] is False
    (tmp_path / "docs" / "results" / "compare" / "run.log").write_text("first run\nresumed\n")
    assert git_state(tmp_path)[1] is False  # a resumed comparison appending to its tracked log
    (tmp_path / "train.py").write_text("lr = 1e-4\n")
    assert git_state(tmp_path)[1] is True  # code
