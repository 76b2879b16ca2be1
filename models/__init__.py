"""freshrl policies: models, conversation rendering, the rollout engine and per-token logprobs.

- ``models.tiny``: offline tiny Qwen2 / Qwen2.5-VL models (and a Qwen2.5-0.5B-shaped benchmark model),
  built deterministically from a seed and cached on disk; ``models.corpus`` and ``models.tiny_tokenizer``
  make their tokenizer.
- ``models.chat``: ``ChatRenderer``, token-in/token-out rendering of multi-turn ChatML conversations.
- ``models.engine``: ``RolloutEngine``, vLLM generation from token ids with per-token logprobs and in-place
  weight loading; ``models.vllm_env`` sets vLLM's environment for this machine.
- ``models.logprobs``: ``token_logprobs``, chunked per-token logprobs and entropies of an HF model.
- ``models.packed_rows``: ``pack``, the layout of a micro-batch's rows run as one row without padding.
- ``models.placeholders``: the vision placeholder tokens that the policy never samples.
- ``models.policy_module``: the RLlib module that holds the policy on learners and EnvRunners.

Nothing is imported here, so ``import models.chat`` does not pull in vLLM or Ray.
"""
