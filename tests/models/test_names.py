"""models.names: what a --model argument means, in the resolver and in the entry points that take it."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.engine import RolloutEngine
from models.names import MODEL_NAMES, resolve_model_path


@pytest.fixture
def fake_smollm2(monkeypatch, tmp_path: Path) -> list:
    """``smollm2`` built by a stand-in that records its cache_dir (the real build: test_smollm2.py)."""
    calls = []

    def build(cache_dir):
        calls.append(cache_dir)
        (tmp_path / "built-smollm2").mkdir(exist_ok=True)  # no config.json: no engine starts on it
        return tmp_path / "built-smollm2"

    monkeypatch.setitem(MODEL_NAMES, "smollm2", build)
    return calls


def test_none_is_the_tiny_lm(lm_path: Path, model_cache: Path):
    assert resolve_model_path(None, seed=0, cache_dir=model_cache) == str(lm_path)


def test_a_name_is_built_and_wins_over_a_directory_of_that_name(fake_smollm2, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2").mkdir()
    assert resolve_model_path("smollm2", cache_dir="/cache") == str(tmp_path / "built-smollm2")
    assert fake_smollm2 == ["/cache"]
    assert resolve_model_path("./smollm2") == "smollm2"  # the directory, written as a path


def test_paths_and_hub_ids_pass_through(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "my-model").mkdir()
    assert resolve_model_path(tmp_path / "my-model") == str(tmp_path / "my-model")
    assert resolve_model_path("~/my-model") == str(tmp_path / "my-model")
    assert resolve_model_path("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.mark.parametrize("model", ["smolm2", "SmolLM2", "./no/such/dir", "/no/such/dir", ""])
def test_anything_else_is_an_error_naming_the_choices(model: str):
    with pytest.raises(FileNotFoundError, match=r"not a model name.*'smollm2'.*tiny_lm_path"):
        resolve_model_path(model)


def test_the_engine_resolves_names_through_the_same_function(fake_smollm2):
    # A typo fails before vLLM starts; a name reaches its builder (whose stand-in directory is refused).
    with pytest.raises(FileNotFoundError, match="'smollm2'"):
        RolloutEngine("smolm2")
    with pytest.raises(FileNotFoundError, match="built-smollm2 is not a model directory"):
        RolloutEngine("smollm2")
    assert fake_smollm2 == [None]


def test_train_takes_the_name_from_the_command_line_and_a_settings_file(tmp_path: Path):
    from experiments import train
    from experiments.common.run_config import build_config

    args = train.parse_args(["--model", "smollm2"])
    assert build_config(args.run).model_path == "smollm2"  # resolved where the policy is built
    settings = tmp_path / "smollm2.yaml"
    settings.write_text("env: freshrl/FrozenLake-v0\nmodel: smollm2\n")
    assert train.parse_args(["--settings", str(settings)]).run.model == "smollm2"
