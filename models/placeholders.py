"""Vision placeholder tokens, which the policy never samples.

In a vision model's prompt, ``<|image_pad|>`` (with ``<|video_pad|>``, ``<|vision_start|>`` and
``<|vision_end|>``) stands for an image. A response containing one would, in the next turn's prompt, stand
for an image that does not exist, and vLLM refuses such a prompt. The policy is therefore defined with these
tokens suppressed: ``SUPPRESSION_BIAS`` is added to their logits (before the temperature) both in vLLM's
sampler (``RolloutEngine``, as a logit bias) and in ``token_logprobs``, so the behaviour logprobs and the
learner's logprobs describe the same distribution. Text models have no such tokens.
"""

from __future__ import annotations

from typing import Any

SUPPRESSION_BIAS = -100.0
PLACEHOLDER_CONFIG_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")


def suppressed_token_ids(config: Any) -> list[int]:
    """The placeholder token ids of a vision model's config (sorted); empty for a text model."""
    if not hasattr(config, "vision_config"):
        return []
    ids = {getattr(config, key, None) for key in PLACEHOLDER_CONFIG_KEYS}
    return sorted(token_id for token_id in ids if isinstance(token_id, int))
