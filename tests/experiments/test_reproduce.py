"""experiments.reproduce: the quick claim re-runs through the real entry point, a changed record is reported
as differing, and staleness counts the commits that touched a claim's paths since its record."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from experiments import reproduce
from experiments.common.claims import REGISTRY, ClaimsError, differences, load_claims, observed
from experiments.common.results_json import REPOSITORY
from experiments.common.staleness import commits_since, recorded_commit


def test_the_quick_claim_reproduces_through_the_entry_point(capsys):
    assert reproduce.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] env-contract-frozenlake" in out
    assert "    | [1/1] freshrl/FrozenLake-v0: checking the contract" in out  # the command's own output
    verdicts = out.split("Verdicts:")[1]
    assert re.search(r"\n  env-contract-frozenlake +reproduced\n", verdicts)
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
    claim = load_claims()["default-job"]
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


def test_staleness_counts_the_commits_that_touched_the_dependencies_since_the_record(
    tmp_path, tmp_path_factory
):
    git(tmp_path, "init", "-q")
    recorded = commit(tmp_path, "src/code.py", "a = 1\n")
    assert commits_since(recorded, ["src/"], tmp_path) == 0
    commit(tmp_path, "src/code.py", "a = 2\n")
    commit(tmp_path, "notes/page.txt", "text\n")
    commit(tmp_path, "src/other.py", "b = 1\n")
    assert commits_since(recorded, ["src/"], tmp_path) == 2
    assert commits_since(recorded, ["src/code.py", "notes/"], tmp_path) == 2
    assert commits_since(recorded, ["notes/page.txt"], tmp_path) == 1
    assert commits_since("0" * 40, ["src/"], tmp_path) is None  # a commit this clone does not have
    assert commits_since(None, ["src/"], tmp_path) is None
    assert commits_since(recorded, ["src/"], tmp_path_factory.mktemp("not-a-checkout")) is None


def test_the_recorded_commit_is_the_provenance_s_or_an_older_report_s_top_level_one():
    assert recorded_commit({"provenance": {"commit": "abc"}}) == "abc"
    assert recorded_commit({"commit": "10456f5 (with uncommitted changes)"}) == "10456f5"
    assert recorded_commit({"provenance": {"commit": None}}) is None
