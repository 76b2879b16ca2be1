"""RolloutEngine on the tiny Qwen2.5-VL: image prompts, logprobs against transformers, weight loading."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText

from models.chat import ChatRenderer
from models.engine import Completion, Prompt, RolloutEngine, SamplingConfig
from models.logprobs import token_logprobs
from models.vllm_env import RELOAD_LOGGER


@pytest.fixture(scope="module")
def renderer(vlm_path: Path) -> ChatRenderer:
    return ChatRenderer(vlm_path, system_prompt="You see a grid world.")


@pytest.fixture(scope="module")
def prompts(renderer: ChatRenderer) -> list[Prompt]:
    rng = np.random.default_rng(0)
    observations = [
        {"text": "Where is the goal?", "image": rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)},
        {
            "text": "Move Up, Down, Left or Right.",
            "image": rng.integers(0, 256, (96, 160, 3), dtype=np.uint8),
        },
        "No image this time.",
    ]
    return [Prompt(s.token_ids, s.images) for s in map(renderer.prompt, observations)]


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def mean_abs_diff(model, renderer: ChatRenderer, prompts, results) -> float:
    diffs = []
    for prompt, completions in zip(prompts, results, strict=True):
        for c in completions:
            diffs.append((hf_logprobs(model, renderer, prompt, c) - torch.tensor(c.logprobs)).abs())
    return torch.cat(diffs).mean().item()


def hf_logprobs(model, renderer: ChatRenderer, prompt: Prompt, completion: Completion) -> torch.Tensor:
    ids = torch.tensor([prompt.token_ids + completion.token_ids])
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, **renderer.image_inputs(prompt.images))
    return logp[0, len(prompt.token_ids) - 1 :]


def test_image_prompts_generate_and_logprobs_agree(
    vlm_engine: RolloutEngine, vlm_path: Path, renderer, prompts
):
    assert vlm_engine.is_vision
    results = vlm_engine.generate(prompts, SamplingConfig(n=2, max_tokens=24, seed=0))
    assert [len(r) for r in results] == [2, 2, 2]
    model = AutoModelForImageTextToText.from_pretrained(vlm_path, dtype=torch.float32).eval()
    diff = mean_abs_diff(model, renderer, prompts, results)
    print(f"\nVLM fp32, T=1: mean |logp_vLLM - logp_HF| = {diff:.2e}")
    assert diff < 1e-3


def test_loaded_weights_reach_the_vision_tower(vlm_engine: RolloutEngine, vlm_path: Path, renderer, prompts):
    image_prompts = prompts[:2]
    vlm_engine.generate(image_prompts, SamplingConfig(max_tokens=4, seed=1))  # caches image embeddings
    model = AutoModelForImageTextToText.from_pretrained(vlm_path, dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".visual." in f".{name}":
                p.add_(0.2 * torch.randn(p.shape, generator=generator))
    reload_log = ListHandler()
    reload_logger = logging.getLogger(RELOAD_LOGGER)
    reload_logger.addHandler(reload_log)
    try:
        vlm_engine.load_weights(model.state_dict())
    finally:
        reload_logger.removeHandler(reload_log)
    # Every layer of the VLM got its weights or holds none in a checkpoint (whose warnings are dropped).
    assert [r.getMessage() for r in reload_log.records if r.levelno >= logging.WARNING] == []
    results = vlm_engine.generate(image_prompts, SamplingConfig(n=2, max_tokens=16, seed=1))
    assert mean_abs_diff(model, renderer, image_prompts, results) < 1e-3


def test_placeholder_count_must_match_the_images(vlm_engine: RolloutEngine, prompts):
    with pytest.raises(ValueError, match="placeholder"):
        vlm_engine.generate([Prompt(prompts[0].token_ids, prompts[0].images * 2)], SamplingConfig())
