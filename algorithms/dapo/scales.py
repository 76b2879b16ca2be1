"""Scales: the workload sizes and learning settings of a run, for the model it trains (``--scale``).

``tiny`` for the offline tiny models, ``smollm2`` for SmolLM2-135M-Instruct, both on a 2-core CPU; ``paper``
keeps DAPOConfig's defaults, which are the DAPO and FreshPER papers' (algorithms/dapo/config.py), on-policy
as DAPO trains. A scale is a plain mapping of DAPOConfig keys (``algorithms.dapo.config.config_keys``: the
attribute names, ``replay_tau`` for ``.replay(tau=...)``); the CPU scales replay with FreshPER, as every run
on them did. With an algorithm of the ladder
(``algorithms/dapo/ladder.py``) it is a run's preset, the second of the four configuration layers
(docs/configuration.md).
"""

from __future__ import annotations

from typing import Any

from algorithms.dapo.config import DAPOConfig

# The offline tiny models on a 2-core CPU: short responses, small groups, a much higher learning rate than the
# paper's 1e-6 (a 4M-parameter model moves slowly: on the warm-started FrozenLake model, 20 iterations at 1e-4
# took validation success from 0.22 to 0.35 on 128 seeds, where 2e-5 had moved an earlier one within noise),
# two epochs so the ratio departs from 1 and Clip-Higher acts. Not the paper's settings; ~10 s an iteration
# here.
TINY_SCALE: dict[str, Any] = {
    "group_size": 8,
    "prompts_per_iteration": 4,
    "max_response_tokens": 48,
    "max_context_tokens": 1024,
    "overlong_cache_len": "auto",  # DAPOConfig's: a third of max_response_tokens, 16 of 48
    "lr": 1e-4,
    "warmup_steps": 2,  # iterations, as DAPO's 20 (of a far longer run)
    "minibatch_size": 16,
    "num_epochs": 2,
    "micro_batch_size": 8,
    "max_generation_batches": 3,
    "engine_kv_cache_gib": 1.0,
    # fp32 learner and engine, explicitly rather than DAPOConfig's "auto", so the tiny default job computes
    # the same on every machine, bf16-capable or not: their logprobs agree to ~1e-6 (docs/design.md,
    # section 7), so no mismatch
    # correction is needed; set here so that switching scales leaves nothing of another behind.
    "model_dtype": "float32",
    "engine_dtype": "float32",
}

# FreshPER at the tiny scale (the replay mode of every tiny and SmolLM2 run; 32 trajectories an iteration,
# runs of 20-100 iterations; ages in iterations, the default unit). The paper-scale tau (500) over a buffer
# spanning a few iterations would make FreshPER ~ PER: here the buffer holds 8 iterations' batches and tau is
# 4 iterations (half-life 2.8), so at sampling the freshest items (age 1) have exp(7/4) = 5.8x the priority of
# the oldest (age 8, decay factor 0.14), and beta reaches 1 at iteration 20 (0.97 in the last of the default
# job's 20, which count from 0). Measured on a simulated FrozenLake stream
# (tests/algorithms/replay/test_replay_defaults.py): mean IS weight ~0.56 over 20 iterations, ~0.43 at beta
# ~1.
TINY_REPLAY: dict[str, Any] = {
    "replay_mode": "freshper",
    "replay_tau": 4.0,
    "replay_capacity": 256,
    "replay_beta_horizon": 20.0,
}


# SmolLM2-135M-Instruct (``--model smollm2``, models/smollm2.py) on a 2-core CPU: DAPOConfig.training keys
# the same keys as TINY_SCALE (``--scale smollm2``, the default with ``--model smollm2``), with TINY_REPLAY:
#   apply_scale(apply_algorithm(DAPOConfig().environment(env), "dapo"), "smollm2")
# A starting point, not tuned by RL runs yet. One iteration, zero-shot model, dynamic
# sampling off so every group trains (benchmarks/learner_step.py; a shared AVX512_BF16 machine,
# load 1.5-3, learner in bf16):
# Math-v0 rollout 4.3 s, learn 4.2 s, sync 0.9 s, peak RSS 7.9 GiB; FrozenLake-v0 (5 turns of 64 invalid
# tokens) rollout 42 s, learn 43 s, sync 2 s, peak RSS 10.6 GiB. Why each value:
SMOLLM2_SCALE: dict[str, Any] = {
    # Groups as the tiny scale's: at ~20% success (a warm-started SmolLM2 on Math-v0) a group of 8 has mixed
    # outcomes 83% of the time (1 - 0.8^8 - 0.2^8), one of 4 only 59%; DAPO's 16 doubles the rollout.
    "group_size": 8,
    "prompts_per_iteration": 4,
    # Oracle answers are at most 28 SmolLM2 tokens on Math-v0 (12 a FrozenLake turn); 64 leaves room for a
    # short working, and bounds the rollouts of a model that has not learnt to stop (the zero-shot one).
    "max_response_tokens": 64,
    # FrozenLake: 97-token prompt + 5 turns of <= 64 + ~60 observation tokens.
    "max_context_tokens": 1024,
    "overlong_cache_len": 16,  # a quarter of the limit (DAPO: 4096 of 20480)
    # Far below the tiny model's 1e-4 (a pretrained 135M model; the warm start's SFT uses 5e-5) and half the
    # 1e-5 that 4 iterations did not improve with; above DAPO's 1e-6, which moves nothing in the
    # ~50 iterations an hour buys here.
    "lr": 5e-6,
    "warmup_steps": 2,  # iterations, as the tiny scale
    # Two AdamW steps per iteration (32 trajectories): the second minibatch is one step off-policy, so the
    # clip acts without a second epoch (DAPO: several minibatches, one epoch); an epoch is the learn time.
    "minibatch_size": 16,
    "num_epochs": 1,
    # Activations of 30 layers x hidden 576: 4 trajectories a micro-batch keep the peak (learner, AdamW
    # state, engine and KV cache in one process) at 8-11 GiB of a shared 24 GiB.
    "micro_batch_size": 4,
    # Learner "auto" (models/dtype.py): bf16 autocast on a CPU with native bf16, where it was 1.6x faster
    # than fp32 (AVX512_BF16) and 1.3 GiB less at the peak; fp32 on one without (AVX2 only), where bf16
    # is emulated and a forward and backward took ~25x longer. In bf16 its logprob noise (mean |d| 0.03,
    # max 0.4 against fp32) is the clip range's size, so the mismatch correction ("auto": engine fp32 !=
    # learner bf16) is on, one no-grad forward more a pass; in fp32 it is off.
    "model_dtype": "auto",
    # The engine stays fp32 on every CPU: exact logprobs, and vLLM generated ~4x slower in bf16 on AVX2.
    "engine_dtype": "float32",
    # Each extra generation batch is another full rollout; the tiny scale allows 3.
    "max_generation_batches": 2,
    # fp32 KV cache: 30 layers x 2 x 3 heads x 64 x 4 B = 46 KB a token, so 1 GiB holds ~23k tokens, the
    # 32 x (~100 prompt + 64) of an iteration several times over.
    "engine_kv_cache_gib": 1.0,
}


SCALES: dict[str, dict[str, Any]] = {
    "tiny": {**TINY_SCALE, **TINY_REPLAY},
    # The same workload as the tiny scale (32 trajectories an iteration), so the same replay settings.
    "smollm2": {**SMOLLM2_SCALE, **TINY_REPLAY},
    "paper": {},
}


def apply_scale(config: DAPOConfig, name: str) -> DAPOConfig:
    """``config`` set to the scale ``name`` (a key of ``SCALES``)."""
    if name not in SCALES:
        raise ValueError(f"scale must be one of {sorted(SCALES)}, got {name!r}")
    return config.set_keys(SCALES[name], f"scale {name}")
