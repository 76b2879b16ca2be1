"""Shared fixtures for the model tests: tiny models built once into a session directory, one engine each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from models.engine import RolloutEngine
from models.tiny import tiny_lm_path, tiny_vlm_path


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("freshrl-models")


@pytest.fixture(scope="session")
def lm_path(model_cache: Path) -> Path:
    return tiny_lm_path(seed=0, cache_dir=model_cache)


@pytest.fixture(scope="session")
def vlm_path(model_cache: Path) -> Path:
    return tiny_vlm_path(seed=0, cache_dir=model_cache)


@pytest.fixture(scope="session")
def _lm_engine(lm_path: Path) -> RolloutEngine:
    # The replay buffer imports numba into the trainer's process; the engine must start beside it
    # (models.vllm_env.guard_vllm_kernel_scan).
    import numba  # noqa: F401

    return RolloutEngine(lm_path, dtype="float32", max_model_len=1024, seed=0, kv_cache_gib=0.25)


@pytest.fixture(scope="session")
def _vlm_engine(vlm_path: Path) -> RolloutEngine:
    return RolloutEngine(vlm_path, dtype="float32", max_model_len=1024, seed=0, kv_cache_gib=0.25)


def _original_weights(path: Path, auto_class: type) -> dict[str, torch.Tensor]:
    return auto_class.from_pretrained(path, dtype=torch.float32).state_dict()


@pytest.fixture
def lm_engine(_lm_engine: RolloutEngine, lm_path: Path) -> Iterator[RolloutEngine]:
    """The session's text engine; weights a test loads are replaced by the originals afterwards."""
    from transformers import AutoModelForCausalLM

    yield _lm_engine
    _lm_engine.load_weights(_original_weights(lm_path, AutoModelForCausalLM))


@pytest.fixture
def vlm_engine(_vlm_engine: RolloutEngine, vlm_path: Path) -> Iterator[RolloutEngine]:
    """The session's vision engine; weights a test loads are replaced by the originals afterwards."""
    from transformers import AutoModelForImageTextToText

    yield _vlm_engine
    _vlm_engine.load_weights(_original_weights(vlm_path, AutoModelForImageTextToText))
