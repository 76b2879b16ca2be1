"""experiments.vision_reading: transcription examples are the env's own image and text, the blind control
differs only in the image, and the record holds both arms' held-out curves."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from algorithms.warm_start import load_model, tiny_base_path
from experiments import vision_reading
from experiments.vision_reading import _token_key, held_out_loss, transcriptions
from models.chat import ChatRenderer

ENV = "freshrl/FrozenLakeVision-v0"


@pytest.fixture(scope="module")
def renderer() -> ChatRenderer:
    return ChatRenderer(tiny_base_path(ENV))


def test_an_example_is_the_observation_image_then_the_envs_text(renderer):
    (example,) = transcriptions(ENV, renderer, "validation", 1)
    env = gym.make(ENV, render_mode="ansi")
    observation, _ = env.reset(seed=example.seed)
    (image,) = example.images
    np.testing.assert_array_equal(image, observation["image"])
    answer = [token for token, kept in zip(example.token_ids, example.loss_mask, strict=True) if kept]
    assert answer[-1] == renderer.eos_token_id
    assert renderer.tokenizer.decode(answer[:-1]) == env.render()


def test_the_examples_follow_the_oracle_so_the_agent_moves(renderer):
    examples = transcriptions(ENV, renderer, "train", 12)
    assert len(examples) == 12
    seeds = [example.seed for example in examples]
    assert len(set(seeds)) < len(seeds)  # several states of one episode
    agent_cells = {example.images[0].tobytes() for example in examples}
    assert len(agent_cells) == len(examples)  # each state its own image


def test_the_blind_control_differs_only_in_the_image(renderer):
    seen = transcriptions(ENV, renderer, "train", 6)
    blind = transcriptions(ENV, renderer, "train", 6, blank=True)
    for a, b in zip(seen, blind, strict=True):
        assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask
        assert a.images[0].shape == b.images[0].shape
        assert np.unique(b.images[0]).tolist() == [128]
        assert np.unique(a.images[0]).size > 1


def test_the_loss_by_token_averages_to_the_loss(renderer):
    model = load_model(tiny_base_path(ENV))
    examples = transcriptions(ENV, renderer, "validation", 6)
    loss, by_token = held_out_loss(model, examples, renderer)
    counts: dict[str, int] = {}
    for example in examples:
        answer = [token for token, kept in zip(example.token_ids, example.loss_mask, strict=True) if kept]
        for token in answer:
            key = _token_key(renderer, token)
            counts[key] = counts.get(key, 0) + 1
    assert counts.keys() == by_token.keys()
    weighted = sum(by_token[key] * counts[key] for key in counts) / sum(counts.values())
    assert weighted == pytest.approx(loss, abs=1e-3)


def test_a_text_env_is_refused(renderer):
    with pytest.raises(ValueError, match="image"):
        transcriptions("freshrl/FrozenLake-v0", renderer, "train", 1)


def test_the_record_holds_both_arms(tmp_path):
    record = vision_reading.main(
        ["--steps", "2", "--every", "1", "--train", "8", "--validation", "4", "--output", str(tmp_path)]
    )
    saved = json.loads((tmp_path / "FrozenLakeVision-v0.json").read_text())
    assert saved["reads_the_image"] == record["reads_the_image"]
    for arm in ("image", "blind"):
        assert [point["step"] for point in saved["arms"][arm]] == [0, 1, 2]
        losses = [point["loss"] for point in saved["arms"][arm]]
        assert losses[-1] < losses[0]  # training moves the held-out loss
    by_token = saved["reads_the_image"]["by_token"]
    assert {"P", "G", "(end)"} <= by_token.keys()  # the map's agent, goal and the answer's end
    assert saved["provenance"]["command"].startswith("python -m experiments.vision_reading")
