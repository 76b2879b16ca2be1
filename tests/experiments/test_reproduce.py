"""experiments.reproduce: the quick claim re-runs through the real entry point, a changed record is reported
as differing, ``--list`` gives each record's state and cost, and a record goes stale only on commits that
touched the files its command imports (or its listed inputs) since its record."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess

import pytest
import yaml

from experiments import reproduce
from experiments.common.claims import (
    REGISTRY,
    Claim,
    ClaimsError,
    cpu_dependent_lines,
    differences,
    load_claims,
    observed,
    unclustered,
    value_at,
)
from experiments.common.import_graph import ImportGraph
from experiments.common.record_staleness import parse_log, recorded_commit, state, touching_commits
from experiments.common.results_json import REPOSITORY


def test_the_quick_claim_reproduces_through_the_entry_point(capsys):
    assert reproduce.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] env-contract-frozenlake" in out
    assert "    | [1/1] freshrl/FrozenLake-v0: checking the contract" in out  # the command's own output
    verdicts = out.split("Verdicts:")[1]
    # Reproduced; stale too when a commit since its record touched the envs it imports.
    assert re.search(
        r"\n  env-contract-frozenlake +reproduced(; its record is stale \(re-record it\))?\n", verdicts
    )
    assert re.search(r"\n  default-job +not re-run", verdicts)


def test_a_changed_record_is_reported_as_differing_with_a_nonzero_exit(tmp_path, capsys):
    claim = load_claims()["env-contract-frozenlake"]
    record = json.loads(claim.results_path.read_text())
    record["envs"]["freshrl/FrozenLake-v0"]["oracle"] = "skipped: no oracle"
    (tmp_path / "results.json").write_text(json.dumps(record))
    entry = yaml.safe_load(REGISTRY.read_text())["env-contract-frozenlake"]
    registry = tmp_path / "claims.yaml"
    registry.write_text(
        yaml.safe_dump({"env-contract-frozenlake": {**entry, "results": str(tmp_path / "results.json")}})
    )

    assert reproduce.main(["--registry", str(registry), "--claims", "env-contract-frozenlake"]) == 1
    verdict = capsys.readouterr().out.split("Verdicts:")[1]
    assert re.search(r"env-contract-frozenlake +differs: envs.freshrl/FrozenLake-v0: recorded \{", verdict)
    assert "'oracle': 'skipped: no oracle'" in verdict and "'oracle': 'ok'" in verdict


def test_an_interval_claim_reproduces_inside_the_recorded_interval_only():
    claim = dataclasses.replace(
        load_claims()["default-job"], keys=["before.success", "after.success"], cpu_dependent=[]
    )
    record = {key: {"success": 0.273, "success_ci95_low": 0.204, "success_ci95_high": 0.356}
              for key in ("before", "after")}  # fmt: skip
    recorded = observed(claim, record)
    inside = {"before.success": (0.35, 0.0, 0.0), "after.success": (0.204, 0.0, 0.0)}
    assert differences(claim, recorded, inside) == []
    outside = {**inside, "after.success": (0.15, 0.0, 0.0)}
    assert differences(claim, recorded, outside) == [
        "after.success: recorded 0.273 (95% CI 0.204-0.356), today 0.150"
    ]


def test_every_registered_claim_names_a_record_that_holds_its_keys_and_paths_that_exist():
    claims = load_claims()
    assert {"env-contract", "replay-buffer-agreement", "smollm2-zero-shot-frozenlake", "default-job"} <= set(
        claims
    )
    assert [name for name, claim in claims.items() if claim.quick] == ["env-contract-frozenlake"]
    for claim in claims.values():
        assert observed(claim, json.loads(claim.results_path.read_text())), claim.name
        assert all((REPOSITORY / path).exists() for path in claim.depends_on), claim.name


def test_a_registry_entry_with_an_unknown_key_is_refused_with_the_keys_there_are(tmp_path):
    entry = yaml.safe_load(REGISTRY.read_text())["env-contract"]
    registry = tmp_path / "claims.yaml"
    registry.write_text(yaml.safe_dump({"bad": {**entry, "tolerence": 0.1}}))
    with pytest.raises(ClaimsError, match=r"claim 'bad': unknown keys \['tolerence'\].*'tolerance'"):
        load_claims(registry)
    registry.write_text(yaml.safe_dump({"bad": {**entry, "compare": "roughly"}}))
    with pytest.raises(ClaimsError, match="compare must be one of"):
        load_claims(registry)


def git(root, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *arguments], capture_output=True, text=True, check=True
    ).stdout


def commit(root, path: str, text: str) -> str:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)
    git(root, "add", path)
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"change {path}")
    return git(root, "rev-parse", "HEAD").strip()


def test_touching_commits_names_the_files_each_commit_touched_since_the_record(tmp_path, tmp_path_factory):
    git(tmp_path, "init", "-q")
    recorded = commit(tmp_path, "src/code.py", "a = 1\n")
    assert touching_commits(recorded, ["src/code.py"], tmp_path) == {}
    second = commit(tmp_path, "src/code.py", "a = 2\n")
    commit(tmp_path, "notes/page.txt", "text\n")
    fourth = commit(tmp_path, "src/other.py", "b = 1\n")
    assert touching_commits(recorded, ["src/code.py", "src/other.py"], tmp_path) == {
        fourth: ["src/other.py"],
        second: ["src/code.py"],
    }
    assert touching_commits("0" * 40, ["src/code.py"], tmp_path) is None  # a commit this clone does not have
    assert touching_commits(recorded, ["src/code.py"], tmp_path_factory.mktemp("not-a-checkout")) is None


def test_a_git_log_is_read_as_commits_and_the_files_they_touched():
    log = "\0aaa\n\nsrc/a.py\nsrc/b.py\n\0bbb\n\n\0ccc\n\nsrc/a.py\n"
    assert parse_log(log) == {"aaa": ["src/a.py", "src/b.py"], "bbb": [], "ccc": ["src/a.py"]}
    assert parse_log("") == {}


PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/entry.py": "\n".join(
        [
            "from typing import TYPE_CHECKING",
            "from pkg import helper",
            "if TYPE_CHECKING:",
            "    from pkg.annotations_only import Hint",
            "def main():",
            "    from .lazy import run  # a lazy import runs too",
            "    return run(), 'pkg.plugins.board:Board'",
        ]
    ),
    "pkg/helper.py": "import numpy\n",
    "pkg/lazy.py": "def run():\n    return 1\n",
    "pkg/annotations_only.py": "Hint = int\n",
    "pkg/unrelated.py": "import pkg.helper\n",
    "pkg/plugins/__init__.py": "",
    "pkg/plugins/board.py": "class Board: ...\n",
    "data/settings.yaml": "a: 1\n",
}


def test_the_import_graph_follows_lazy_relative_and_entry_point_imports_but_not_type_checking_ones(tmp_path):
    for path, text in PACKAGE.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    files = ImportGraph(tmp_path).command_files(
        "python -m pkg.entry --settings data/settings.yaml --output {output}"
    )
    assert sorted(path.as_posix() for path in files) == [
        "data/settings.yaml",
        "pkg/__init__.py",
        "pkg/entry.py",
        "pkg/helper.py",
        "pkg/lazy.py",
        "pkg/plugins/__init__.py",
        "pkg/plugins/board.py",
    ]


def test_a_record_goes_stale_on_a_commit_to_a_module_its_command_imports_not_on_one_beside_it(tmp_path):
    git(tmp_path, "init", "-q")
    for path, text in PACKAGE.items():
        recorded = commit(tmp_path, path, text)
    command = "python -m pkg.entry --output {output}"
    record = {"provenance": {"commit": recorded}}

    def now() -> str:
        paths = sorted(path.as_posix() for path in ImportGraph(tmp_path).command_files(command))
        return state(record, paths, tmp_path).label

    assert now() == "current"
    commit(tmp_path, "pkg/unrelated.py", "import pkg.helper  # only a comment changed\n")
    commit(tmp_path, "pkg/annotations_only.py", "Hint = float\n")
    commit(tmp_path, "data/settings.yaml", "a: 2\n")  # not named by this command
    assert now() == "current"
    commit(tmp_path, "pkg/lazy.py", "def run():\n    return 2\n")
    assert now() == "stale (1 commit touched pkg/lazy.py)"
    commit(tmp_path, "pkg/plugins/board.py", "class Board: pass\n")
    commit(tmp_path, "pkg/lazy.py", "def run():\n    return 3\n")
    assert now() == "stale (3 commits touched pkg/lazy.py, pkg/plugins/board.py)"
    assert state(None, [], tmp_path).label == "missing"
    assert state({"provenance": {"commit": None}}, [], tmp_path).label == "recorded before provenance"


def test_list_gives_each_record_s_state_and_cost_and_flags_unclustered_intervals(tmp_path, capsys):
    entry = yaml.safe_load(REGISTRY.read_text())["smollm2-zero-shot-frozenlake"]
    metrics = {"success": 0.1, "success_ci95_low": 0.05, "success_ci95_high": 0.2}
    transcribed = {"provenance": {"commit": None}, "samples": 4, "envs": {"FrozenLake": {"metrics": metrics}}}
    clustered = {**transcribed, "envs": {"FrozenLake": {"metrics": {**metrics, "task_successes": [1, 0]}}}}
    (tmp_path / "transcribed.json").write_text(json.dumps(transcribed))
    (tmp_path / "clustered.json").write_text(json.dumps(clustered))
    registry = tmp_path / "claims.yaml"
    claims = {
        name: {**entry, "results": str(tmp_path / f"{name}.json"), "takes": f"about {minutes} minutes"}
        for name, minutes in (("transcribed", 3), ("clustered", 4), ("gone", 5))
    }
    registry.write_text(yaml.safe_dump(claims))

    assert reproduce.main(["--list", "--registry", str(registry)]) == 0
    out = capsys.readouterr().out
    flag = "intervals unclustered (4 episodes per task, no per-task outcomes)"
    assert f"\ntranscribed: recorded before provenance; {flag}; takes about 3 minutes\n" in out
    assert "\nclustered: recorded before provenance; takes about 4 minutes\n" in out
    assert "\ngone: missing; takes about 5 minutes\n" in out
    assert "Verdicts" not in out  # nothing run


def test_every_claim_of_the_registry_has_a_state_a_cost_and_code_to_follow():
    claims = load_claims()
    graph = ImportGraph()
    for claim in claims.values():
        files = claim.files(graph)
        module = claim.command.split()[2].replace(".", "/") + ".py"
        assert module in files and "experiments/common/results_json.py" in files, claim.name
        assert claim.takes.startswith("about"), claim.name
    # The transcribed records and those written before provenance say so, not "current".
    for name in (
        "replay-modes-frozenlake",
        "smollm2-rl-frozenlake",
        "tiny-warm-start-math",
        "smollm2-math-backfill",
    ):
        claim = claims[name]
        assert state(json.loads(claim.results_path.read_text()), []).label == "recorded before provenance"


def test_a_name_holding_dots_is_read_whole_and_an_over_seeds_claim_reproduces_inside_the_t_interval():
    record = {
        "runs": {"Sokoban, RL temperature 1.2": {"after": {"success": 0.023}}},
        "curve": [{"mean": 0.5}],
    }
    assert value_at(record, "runs.Sokoban, RL temperature 1.2.after.success") == 0.023
    assert value_at(record, "curve.0.mean") == 0.5
    with pytest.raises(KeyError, match="no 'Sokoban, RL temperature 2'"):
        value_at(record, "runs.Sokoban, RL temperature 2.after")
    claim = load_claims()["gigpo-frozenlake-smollm2"]
    key = claim.recorded_keys[0]
    claim = dataclasses.replace(claim, keys=[key])
    recorded = {key: (0.30, 0.05)}
    assert differences(claim, recorded, {key: (0.34, None)}) == []
    assert differences(claim, recorded, {key: (0.36, None)}) == [
        f"{key}: recorded 0.300 ± 0.050 over seeds, today 0.360"
    ]
    # No spread recorded (one seed): only the same mean reproduces.
    assert differences(claim, {key: (0.30, None)}, {key: (0.31, None)}) != []


def test_a_transcribed_record_s_keys_are_read_where_the_command_writes_them(tmp_path, capsys):
    metrics = {"success": 0.05, "success_ci95_low": 0.0, "success_ci95_high": 0.1}
    record = {
        "runs": {"Sokoban, RL temperature 1.2": {"start": metrics}},
        "evaluation": {"samples_per_task": 4},
    }
    (tmp_path / "record.json").write_text(json.dumps(record))

    def registry(today: float) -> str:
        written = {"success": today, "success_ci95_low": 0.0, "success_ci95_high": 1.0}
        write = f"json.dump({{'before': {written}}}, open(sys.argv[1] + '/summary.json', 'w'))"
        claim = {
            "what": "a transcribed run",
            "results": str(tmp_path / "record.json"),
            "keys": {"runs.Sokoban, RL temperature 1.2.start.success": "before.success"},
            "command": f'python -c "import json, sys; {write}" {{output}}',
            "writes": "summary.json",
            "compare": "interval",
            "takes": "about 1 s",
        }
        (tmp_path / "claims.yaml").write_text(yaml.safe_dump({"transcribed": claim}))
        return str(tmp_path / "claims.yaml")

    assert unclustered(load_claims(registry(0.08))["transcribed"], record) == 4  # the record's evaluation's k
    assert reproduce.main(["--registry", registry(0.08)]) == 0
    assert re.search(r"\n  transcribed +reproduced\n", capsys.readouterr().out.split("Verdicts:")[1])
    assert reproduce.main(["--registry", registry(0.2)]) == 1
    verdicts = capsys.readouterr().out.split("Verdicts:")[1]
    assert "recorded 0.050 (95% CI 0.000-0.100), today 0.200" in verdicts


def test_the_recorded_commit_is_the_provenance_s_or_an_older_report_s_top_level_one():
    assert recorded_commit({"provenance": {"commit": "abc"}}) == "abc"
    assert recorded_commit({"commit": "10456f5 (with uncommitted changes)"}) == "10456f5"
    assert recorded_commit({"provenance": {"commit": None}}) is None


def test_cpu_dependent_figures_are_reported_but_never_a_difference():
    claim = Claim(
        name="gain",
        what="a gain whose start depends on the CPU kind",
        results="docs/results/default_job/summary.json",
        keys=["before.success", "change.difference"],
        command="python -m experiments.train --output {output}",
        writes="summary.json",
        compare="interval",
        takes="minutes",
        cpu_dependent=["before.success"],
    )
    recorded = {"before.success": (0.336, 0.296, 0.378), "change.difference": (0.104, 0.054, 0.153)}
    # Another CPU kind: the start far outside its interval, the gain inside its own.
    today = {"before.success": (0.246, 0.211, 0.285), "change.difference": (0.119, 0.07, 0.17)}
    assert differences(claim, recorded, today) == []
    assert cpu_dependent_lines(claim, recorded, today) == [
        "before.success: recorded 0.336, today 0.246 (depends on the CPU kind; not checked)"
    ]
    today["change.difference"] = (0.02, -0.03, 0.07)
    assert differences(claim, recorded, today) == [
        "change.difference: recorded 0.104 (95% CI 0.054-0.153), today 0.020"
    ]


def test_cpu_dependent_keys_must_be_recorded_keys(tmp_path):
    registry = tmp_path / "claims.yaml"
    registry.write_text(
        "gain:\n  what: w\n  results: r.json\n  keys: [change.difference]\n"
        "  cpu_dependent: [before.success]\n"
        "  command: python -m experiments.train --output {output}\n  writes: summary.json\n"
        "  compare: interval\n  takes: minutes\n"
    )
    with pytest.raises(ClaimsError, match="cpu_dependent names keys the claim does not record"):
        load_claims(registry)
