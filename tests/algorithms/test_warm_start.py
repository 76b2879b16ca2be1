"""Supervised warm start: demonstrations in the exact rollout token format; deterministic cached builds."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import algorithms.warm_start as warm_start
import envs  # noqa: F401
import models.names as names
from algorithms.rollout import rollout_groups
from algorithms.warm_start import (
    demonstration_loss,
    demonstrations,
    load_model,
    record_demonstration,
    warm_started_path,
)
from envs import frozen_lake
from envs.seeds import seeds
from models.chat import ChatRenderer
from models.engine import Completion, SamplingConfig
from models.tiny import BUILD_INFO_FILE, tiny_lm_path, tiny_vlm_path, weights_digest

FROZEN_LAKE = "freshrl/FrozenLake-v0"


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("freshrl-models")


@pytest.fixture(scope="module")
def lm_path(model_cache: Path) -> Path:
    """The tiny LM, built once for this module, as the warm start's base."""
    return tiny_lm_path(seed=0, cache_dir=model_cache)


@pytest.fixture(scope="module")
def vlm_path(model_cache: Path) -> Path:
    return tiny_vlm_path(seed=0, cache_dir=model_cache)


class OracleEngine:
    """Stands in for the vLLM engine: answers every prompt with its env's oracle response, ending on eos."""

    def __init__(self, env: gym.Env, renderer: ChatRenderer):
        self.env, self.renderer = env, renderer

    def generate(self, prompts, sampling):
        assert len(prompts) == 1
        text = self.env.unwrapped.oracle_responses()[0]
        ids = self.renderer.tokenizer.encode(text, add_special_tokens=False) + [self.renderer.eos_token_id]
        return [[Completion(token_ids=ids, logprobs=[-0.5] * len(ids), finish_reason="stop", text=text)]]


def rollout_of_oracle(env_id: str, renderer: ChatRenderer, seed: int):
    env = gym.make(env_id)
    ((trajectory,),) = rollout_groups(
        OracleEngine(env, renderer),
        renderer,
        [env],
        [seed],
        1,
        SamplingConfig(max_tokens=64),
        max_context_tokens=4096,
    )
    return trajectory


@pytest.mark.parametrize(
    "env_id", [FROZEN_LAKE, "freshrl/NQSearch-v0", "freshrl/NQSearchTools-v0", "freshrl/FrozenLakeVision-v0"]
)
def test_demonstration_is_what_the_rollout_records(env_id: str, lm_path: Path, vlm_path: Path):
    renderer = ChatRenderer(vlm_path if "Vision" in env_id else lm_path)
    seed = seeds("train", 3)[2]
    demo = record_demonstration(gym.make(env_id), renderer, seed)
    trajectory = rollout_of_oracle(env_id, renderer, seed)
    assert demo.success and trajectory.success
    assert demo.token_ids == trajectory.token_ids
    assert demo.loss_mask == trajectory.loss_mask
    assert len(demo.images) == len(trajectory.images)
    for ours, theirs in zip(demo.images, trajectory.images, strict=True):
        np.testing.assert_array_equal(ours, theirs)
    assert len(demo.images) == (trajectory.num_turns if renderer.is_vision else 0)


def test_a_tool_env_s_oracle_episode_holds_its_tools_calls_and_tool_messages(lm_path: Path):
    renderer = ChatRenderer(lm_path)
    env_id = "freshrl/NQSearchTools-v0"
    trajectory = rollout_of_oracle(env_id, renderer, seeds("train", 1)[0])
    assert trajectory.success and trajectory.num_turns >= 2
    text = renderer.tokenizer.decode(trajectory.token_ids)
    # The schemas in the system message (the tiny template ignores tools=: the Hermes fallback) ...
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n# Tools\n") and '"name": "search"' in system
    # ... every turn a call as sampled, every reply but the last (the episode ended) a tool message.
    responses = [renderer.tokenizer.decode(trajectory.token_ids[a:b]) for a, b in trajectory.response_spans]
    assert all(r.startswith("<tool_call>\n{") and r.endswith("</tool_call><|im_end|>") for r in responses)
    assert text.count("<|im_start|>user\n<tool_response>\n<information>") == trajectory.num_turns - 1
    # The warm start's demonstrations of the id train on exactly these calls.
    (demo,) = demonstrations(env_id, renderer, 1)
    masked = [t for t, m in zip(demo.token_ids, demo.loss_mask, strict=True) if m]
    expected = "".join(r.removesuffix("<|im_end|>") for r in responses)
    assert renderer.tokenizer.decode(masked, skip_special_tokens=True) == expected
    assert demo.token_ids == trajectory.token_ids


def test_demonstration_pieces_are_prompt_responses_and_continuations(lm_path: Path):
    renderer = ChatRenderer(lm_path)
    env = gym.make(FROZEN_LAKE)
    seed = next(s for s in seeds("train", 50) if len(_oracle_episode(env, s)[1]) >= 2)
    demo = record_demonstration(env, renderer, seed)
    observations, responses = _oracle_episode(env, seed)

    expected = renderer.prompt(observations[0]).token_ids
    mask = [0] * len(expected)
    for k, response in enumerate(responses):
        ids = renderer.tokenizer.encode(response, add_special_tokens=False) + [renderer.eos_token_id]
        expected, mask = expected + ids, mask + [1] * len(ids)
        if k + 1 < len(responses):
            glue = renderer.continuation(observations[k + 1], True).token_ids
            expected, mask = expected + glue, mask + [0] * len(glue)
    assert demo.token_ids == expected
    assert demo.loss_mask == mask
    # The masked tokens are the responses, each closed by eos, and nothing else.
    masked = [t for t, m in zip(demo.token_ids, demo.loss_mask, strict=True) if m]
    assert masked.count(renderer.eos_token_id) == len(responses)
    assert masked[-1] == renderer.eos_token_id
    assert renderer.tokenizer.decode(masked, skip_special_tokens=True) == "".join(responses)


def _oracle_episode(env: gym.Env, seed: int) -> tuple[list[str], list[str]]:
    observation, _ = env.reset(seed=seed)
    observations, responses = [observation], []
    while True:
        response = env.unwrapped.oracle_responses()[0]
        responses.append(response)
        observation, _, terminated, truncated, _ = env.step(response)
        if terminated or truncated:
            return observations, responses
        observations.append(observation)


def test_demonstrations_use_train_seeds_and_succeed(lm_path: Path):
    demos = demonstrations("freshrl/Math-v0", ChatRenderer(lm_path), 4)
    assert [d.seed for d in demos] == seeds("train", 4)
    assert all(d.success for d in demos)


@pytest.fixture(scope="module")
def short_warm_start(lm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    settings = {"base": lm_path, "steps": 3, "demos": 8, "batch_size": 4}
    first = warm_started_path(FROZEN_LAKE, cache_dir=tmp_path_factory.mktemp("warm-a"), **settings)
    second = warm_started_path(FROZEN_LAKE, cache_dir=tmp_path_factory.mktemp("warm-b"), **settings)
    return first, {"second": second, **settings}


def test_short_warm_start_is_deterministic_and_loadable(short_warm_start, lm_path: Path):
    path, other = short_warm_start
    assert path.name == other["second"].name
    assert weights_digest(path) == weights_digest(other["second"])
    assert weights_digest(path) != weights_digest(lm_path)
    info = json.loads((path / BUILD_INFO_FILE).read_text())
    assert info["env_id"] == FROZEN_LAKE and info["steps"] == 3 and info["demos"] == 8
    assert info["base_weights_sha256"] == weights_digest(lm_path)
    # Same tokenizer and chat template as the base, and both loaders accept the directory.
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        assert (path / name).read_bytes() == (lm_path / name).read_bytes()
    assert (
        AutoTokenizer.from_pretrained(path).get_vocab() == AutoTokenizer.from_pretrained(lm_path).get_vocab()
    )
    assert type(load_model(path)) is type(AutoModelForCausalLM.from_pretrained(lm_path))
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no staging dir left


def test_cached_warm_start_is_not_retrained(short_warm_start, monkeypatch: pytest.MonkeyPatch):
    path, settings = short_warm_start
    settings = {k: v for k, v in settings.items() if k != "second"}

    def fail(*args, **kwargs):
        raise AssertionError("retrained a cached warm start")

    monkeypatch.setattr(warm_start, "fine_tune", fail)
    assert warm_started_path(FROZEN_LAKE, cache_dir=path.parent, **settings) == path
    with pytest.raises(AssertionError, match="retrained"):
        warm_started_path(FROZEN_LAKE, cache_dir=path.parent, **{**settings, "steps": 4})
    # A changed task text changes the demonstrations, hence the cache key.
    monkeypatch.setattr(frozen_lake, "LEGEND", "Legend: P is you.")
    with pytest.raises(AssertionError, match="retrained"):
        warm_started_path(FROZEN_LAKE, cache_dir=path.parent, **settings)


def test_a_model_name_is_a_base(short_warm_start, lm_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``base="smollm2"`` goes through models.names like every other ``--model``: a name resolves to the
    directory it builds (here a stand-in name for the tiny LM, so the cached warm start is found)."""
    path, settings = short_warm_start
    settings = {k: v for k, v in settings.items() if k not in ("second", "base")}
    monkeypatch.setitem(names.MODEL_NAMES, "tiny-stand-in", lambda cache_dir: lm_path)
    monkeypatch.setattr(warm_start, "fine_tune", lambda *a, **k: pytest.fail("retrained a cached warm start"))
    assert warm_started_path(FROZEN_LAKE, base="tiny-stand-in", cache_dir=path.parent, **settings) == path


def test_warm_start_lowers_the_demonstration_loss(short_warm_start, lm_path: Path):
    path, _ = short_warm_start
    renderer = ChatRenderer(lm_path)
    demos = demonstrations(FROZEN_LAKE, renderer, 8)
    with torch.no_grad():
        before = demonstration_loss(load_model(lm_path), demos, pad_token_id=renderer.eos_token_id)
        after = demonstration_loss(load_model(path), demos, pad_token_id=renderer.eos_token_id)
    assert after < before - 0.5


def test_vision_demonstration_loss_uses_the_images(vlm_path: Path):
    renderer = ChatRenderer(vlm_path)
    demos = demonstrations("freshrl/FrozenLakeVision-v0", renderer, 2)
    model = load_model(vlm_path)
    loss = demonstration_loss(
        model, demos, pad_token_id=renderer.eos_token_id, image_inputs=renderer.image_inputs
    )
    loss.backward()
    assert torch.isfinite(loss)
    assert model.model.visual.patch_embed.proj.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="images"):
        demonstration_loss(model, demos, pad_token_id=renderer.eos_token_id)


class NoOracle(gym.Env):
    """An env without oracle_responses(): nothing to warm-start on."""

    observation_space = gym.spaces.Text(8)
    action_space = gym.spaces.Text(8)


def test_an_env_without_oracle_is_named_before_anything_is_built(tmp_path: Path):
    if "tests/NoOracle-v0" not in gym.registry:
        gym.register(id="tests/NoOracle-v0", entry_point=NoOracle)
    with pytest.raises(warm_start.MissingOracleError) as caught:
        warm_started_path("tests/NoOracle-v0", cache_dir=tmp_path)
    message = str(caught.value)
    for needed in ("oracle_responses()", "list[str]", "after every step", "--no-warm-start", "--model"):
        assert needed in message
    assert not list(tmp_path.iterdir()), "no tiny model was built for an env that cannot be warm-started"


def test_a_build_prints_its_projected_cost_first(lm_path: Path, tmp_path: Path, capsys):
    warm_started_path(FROZEN_LAKE, base=lm_path, steps=2, demos=4, batch_size=2, cache_dir=tmp_path)
    out = capsys.readouterr().out
    assert "not cached" in out and "--warm-start-steps" in out and "--no-warm-start" in out
    assert out.index("not cached") < out.index("projected") and " s a step" in out


def test_step_seconds_times_a_copy(lm_path: Path):
    renderer = ChatRenderer(lm_path)
    model = load_model(lm_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    demos = demonstrations(FROZEN_LAKE, renderer, 2)
    assert warm_start.step_seconds(model, demos, pad_token_id=renderer.eos_token_id) > 0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_the_recipe_follows_the_base(tmp_path):
    """The tiny models' build info says they are tiny: their recipe (1e-3, per-env steps); any other base
    (SmolLM2, a user's directory without build info) gets the pretrained one, a fine-tune's 5e-5."""
    from algorithms.warm_start import PRETRAINED_RECIPE, TINY_RECIPE, recipe_for

    cases = {
        "tiny-qwen2": TINY_RECIPE,
        "tiny-qwen2.5-vl": TINY_RECIPE,
        "smollm2-135m-instruct": PRETRAINED_RECIPE,
    }
    for kind, recipe in cases.items():
        directory = tmp_path / kind
        directory.mkdir()
        (directory / BUILD_INFO_FILE).write_text(json.dumps({"kind": kind}))
        assert recipe_for(directory) == recipe
    assert recipe_for(tmp_path) == PRETRAINED_RECIPE
    assert TINY_RECIPE.steps_for(FROZEN_LAKE) == 400 and PRETRAINED_RECIPE.steps_for(FROZEN_LAKE) == 60
    assert PRETRAINED_RECIPE.lr < TINY_RECIPE.lr


def test_demonstrations_are_played_in_the_runs_env_setting(lm_path: Path):
    renderer = ChatRenderer(lm_path)
    default = demonstrations(FROZEN_LAKE, renderer, 2)
    assert [d.token_ids for d in demonstrations(FROZEN_LAKE, renderer, 2, {"size": 4})] == [
        d.token_ids for d in default
    ]  # the env's defaults spelled out: the same episodes, so the same cached model
    larger = demonstrations(FROZEN_LAKE, renderer, 2, {"size": 6})
    text = renderer.tokenizer.decode(larger[0].token_ids)
    assert [d.token_ids for d in larger] != [d.token_ids for d in default]
    assert text.count("\n") > renderer.tokenizer.decode(default[0].token_ids).count("\n")  # a 6x6 map
