"""RolloutEngine on the tiny LM: logprobs match transformers; sampling, finish reasons, weight loading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from models.chat import ChatRenderer
from models.engine import Completion, Prompt, RolloutEngine, SamplingConfig
from models.logprobs import token_logprobs

OBSERVATIONS = ["FrozenLake 4x4.\nSFFF\nFHFH\nFFFH\nHFFG\nMove: Up, Down, Left or Right?", "Solve 12 + 7."]


@pytest.fixture(scope="module")
def renderer(lm_path: Path) -> ChatRenderer:
    return ChatRenderer(lm_path)


@pytest.fixture(scope="module")
def prompts(renderer: ChatRenderer) -> list[Prompt]:
    return [Prompt(renderer.prompt(text).token_ids) for text in OBSERVATIONS]


def hf_model(lm_path: Path, dtype=torch.float32):
    return AutoModelForCausalLM.from_pretrained(lm_path, dtype=dtype).eval()


def hf_logprobs(model, prompt: Prompt, completion: Completion, temperature: float = 1.0) -> torch.Tensor:
    ids = torch.tensor([prompt.token_ids + completion.token_ids])
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, temperature=temperature)
    return logp[0, len(prompt.token_ids) - 1 :].double()


def mean_abs_diff(model, prompts, results, temperature=1.0) -> float:
    diffs = [
        (hf_logprobs(model, prompt, c, temperature) - torch.tensor(c.logprobs, dtype=torch.float64)).abs()
        for prompt, completions in zip(prompts, results, strict=True)
        for c in completions
    ]
    return torch.cat(diffs).mean().item()


def teach(model, renderer: ChatRenderer, response: str, steps: int = 20) -> dict[str, torch.Tensor]:
    """A few supervised steps so that the model answers every prompt with ``response`` and <|im_end|>."""
    answer = renderer.tokenizer(response, add_special_tokens=False)["input_ids"] + [renderer.eos_token_id]
    sequences = [renderer.prompt(text).token_ids for text in OBSERVATIONS]
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    model.train()
    for _ in range(steps):
        for prompt in sequences:
            logp, _ = token_logprobs(model, torch.tensor([prompt + answer]))
            loss = -logp[0, len(prompt) - 1 :].mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval()
    return model.state_dict()


def test_logprobs_agree_with_transformers(lm_engine: RolloutEngine, lm_path: Path, prompts):
    results = lm_engine.generate(prompts, SamplingConfig(n=4, max_tokens=48, seed=1))
    diff = mean_abs_diff(hf_model(lm_path), prompts, results)
    tokens = sum(len(c.token_ids) for r in results for c in r)
    print(f"\nfp32, T=1: mean |logp_vLLM - logp_HF| = {diff:.2e} over {tokens} tokens")
    assert diff < 1e-3


def test_logprobs_are_those_of_the_tempered_distribution(lm_engine: RolloutEngine, lm_path: Path, prompts):
    results = lm_engine.generate(prompts, SamplingConfig(n=2, temperature=0.7, max_tokens=32, seed=2))
    model = hf_model(lm_path)
    assert mean_abs_diff(model, prompts, results, temperature=0.7) < 1e-3
    assert mean_abs_diff(model, prompts, results, temperature=1.0) > 1e-2


def test_n_samples_per_prompt_and_max_tokens(lm_engine: RolloutEngine, prompts):
    results = lm_engine.generate(prompts, SamplingConfig(n=3, max_tokens=12, seed=3))
    assert [len(r) for r in results] == [3, 3]
    for completions in results:
        assert len({tuple(c.token_ids) for c in completions}) == 3
        for c in completions:
            # The random model practically never samples <|im_end|> in 12 tokens.
            assert c.finish_reason == "length" and len(c.token_ids) == 12 == len(c.logprobs)
            assert all(lp <= 0 for lp in c.logprobs)
    assert lm_engine.generate([], SamplingConfig()) == []


def test_seeded_sampling_is_reproducible(lm_engine: RolloutEngine, prompts):
    def ids(config):
        return [[c.token_ids for c in r] for r in lm_engine.generate(prompts, config)]

    config = SamplingConfig(n=2, max_tokens=16, seed=7)
    first = ids(config)
    assert ids(config) == first
    assert ids(SamplingConfig(n=2, max_tokens=16, seed=8)) != first
    unseeded = SamplingConfig(n=2, max_tokens=16)
    assert ids(unseeded) != ids(unseeded)
    # A prompt's samples do not depend on the other prompts of the batch.
    alone = [[c.token_ids for c in r] for r in lm_engine.generate(prompts[:1], config)]
    assert alone[0] == first[0]


def test_eos_stop_string_and_length_after_loading_taught_weights(
    lm_engine: RolloutEngine, lm_path: Path, renderer, prompts
):
    model = hf_model(lm_path)
    lm_engine.load_weights(teach(model, renderer, "<answer>Up</answer>"))
    answer = renderer.tokenizer("<answer>Up</answer>", add_special_tokens=False)["input_ids"]

    # Taught to p(answer) ~ 0.94; temperature 0.5 makes the answer practically certain.
    ended = lm_engine.generate(prompts, SamplingConfig(n=4, temperature=0.5, max_tokens=32, seed=4))
    for c in (c for r in ended for c in r):
        # Stopped on eos: <|im_end|> is the last token id, with its logprob; the text leaves it out.
        assert c.finish_reason == "stop"
        assert c.token_ids == answer + [renderer.eos_token_id]
        assert len(c.logprobs) == len(c.token_ids)
        assert c.text == "<answer>Up</answer>"
    assert mean_abs_diff(model, prompts, ended, temperature=0.5) < 1e-3

    stopped = lm_engine.generate(
        prompts, SamplingConfig(temperature=0.5, max_tokens=32, stop=("</answer>",), seed=4)
    )
    for c in (c for r in stopped for c in r):
        # Stopped on a string: the ids include the tokens that formed it; the text is cut before it.
        assert c.finish_reason == "stop"
        assert c.token_ids == answer
        assert c.text == "<answer>Up"

    cut = lm_engine.generate(prompts, SamplingConfig(temperature=0.5, max_tokens=2, seed=4))
    assert all(c.finish_reason == "length" and c.token_ids == answer[:2] for r in cut for c in r)


def test_loaded_weights_are_used_in_float32_and_bfloat16(lm_engine: RolloutEngine, lm_path: Path, prompts):
    original = hf_model(lm_path)
    perturbed = hf_model(lm_path)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in perturbed.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    lm_engine.load_weights(perturbed.state_dict())
    results = lm_engine.generate(prompts, SamplingConfig(n=2, max_tokens=32, seed=5))
    new, old = mean_abs_diff(perturbed, prompts, results), mean_abs_diff(original, prompts, results)
    print(f"\nafter load_weights: vs perturbed HF {new:.2e}, vs original HF {old:.2e}")
    assert new < 1e-3 < old

    bf16_state = {name: t.to(torch.bfloat16) for name, t in perturbed.state_dict().items()}
    lm_engine.load_weights(bf16_state)
    rounded = hf_model(lm_path)
    rounded.load_state_dict({name: t.float() for name, t in bf16_state.items()})
    results = lm_engine.generate(prompts, SamplingConfig(n=2, max_tokens=32, seed=6))
    assert mean_abs_diff(rounded, prompts, results) < 1e-3


def test_partial_state_dict_is_refused(lm_engine: RolloutEngine, lm_path: Path):
    state = hf_model(lm_path).state_dict()
    with pytest.raises(ValueError, match="full state dict"):
        lm_engine.load_weights(dict(list(state.items())[:5]))


def test_generation_stops_at_max_model_len(lm_engine: RolloutEngine, prompts):
    room = 5
    long_prompt = Prompt((prompts[0].token_ids * 100)[: lm_engine.max_model_len - room])
    (completions,) = lm_engine.generate([long_prompt], SamplingConfig(n=2, max_tokens=50, seed=0))
    assert all(c.finish_reason == "length" and len(c.token_ids) == room for c in completions)
    with pytest.raises(ValueError, match="no room"):
        lm_engine.generate([Prompt(long_prompt.token_ids + [7] * room)], SamplingConfig())


def test_text_engine_refuses_images(lm_engine: RolloutEngine, prompts):
    image = np.zeros((28, 28, 3), dtype=np.uint8)
    with pytest.raises(ValueError, match="text model"):
        lm_engine.generate([Prompt(prompts[0].token_ids, [image])], SamplingConfig())
    with pytest.raises(ValueError, match="at least one token"):
        lm_engine.generate([Prompt([])], SamplingConfig())
    assert not lm_engine.is_vision


def test_missing_model_path_names_the_tiny_builder(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="tiny_lm_path"):
        RolloutEngine(tmp_path / "no-such-model")


def test_dropping_an_engine_leaves_the_others_working(lm_engine: RolloutEngine, lm_path: Path, prompts):
    """In-process engines share vLLM's parallel state; the one dropped must not tear it down for the rest."""
    import gc

    sampling = SamplingConfig(n=1, max_tokens=8, seed=3)
    before = lm_engine.generate(prompts, sampling)
    other = RolloutEngine(lm_path, dtype="float32", max_model_len=256, seed=0, kv_cache_gib=0.05)
    other.generate(prompts, sampling)
    del other
    gc.collect()
    after = lm_engine.generate(prompts, sampling)
    assert [c.token_ids for cs in after for c in cs] == [c.token_ids for cs in before for c in cs]
