"""Per-token log-probabilities (and entropies) of a sequence under a HF causal LM or image-text model.

``token_logprobs`` runs the model's base (decoder, plus vision tower for VLMs) once over the sequence, then
applies the LM head to the hidden states chunk by chunk. Each chunk's vocabulary-sized logits are freed as
soon as its logprobs are taken; when gradients are needed a chunk is checkpointed (its logits are recomputed
in the backward pass), so the full [T, vocab] logits tensor never exists, forward or backward. Logits are
cast to float32 before the softmax, as vLLM does, in bf16 and fp32 alike. For vision models the image
placeholder tokens are suppressed as in the rollout engine (models/placeholders.py).

``share_prefix=True`` runs the rows' common prefix once: GRPO's G samples of a task share its whole first
prompt, which on single-turn tasks is often half of every sequence. The prefix goes through the model with
batch 1, its key/value cache is repeated for the B rows, and the rest of each row attends to it; the
result (and its gradient, which reaches the prefix through the cache) equals the plain forward's.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from models.placeholders import SUPPRESSION_BIAS, suppressed_token_ids

# Below this many shared tokens a second model call costs more than it saves.
MIN_SHARED_PREFIX = 16


def token_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    temperature: float = 1.0,
    pixel_values: torch.Tensor | None = None,
    image_grid_thw: torch.Tensor | None = None,
    with_entropy: bool = False,
    chunk_size: int = 1024,
    suppress_placeholders: bool = True,
    share_prefix: bool = False,
    needed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token log-probabilities: ``logprobs[b, t] = log p(ids[b, t+1] | ids[b, :t+1])``.

    Args:
        model: a HF ``...ForCausalLM`` or ``...ForConditionalGeneration`` model (base model + LM head).
        input_ids: [B, T] token ids; pad on the right (positions count from 0 in every row).
        attention_mask: [B, T], 1 for real tokens; None for all ones.
        temperature: the logits are divided by it, matching the engine's logprobs at that temperature.
        pixel_values, image_grid_thw: image inputs of a vision model (``ChatRenderer.image_inputs``).
        with_entropy: also return the entropy of each next-token distribution (at ``temperature``).
        chunk_size: positions per LM-head chunk.
        suppress_placeholders: for vision models, add ``SUPPRESSION_BIAS`` to the logits of the image
            placeholder tokens, as the rollout engine does when sampling (models/placeholders.py), so both
            describe the same policy. Placeholder targets (in prompts) then get logprobs near -100: mask them.
        share_prefix: run the tokens that every row starts with once (module docstring); text-only, and
            only when at least ``MIN_SHARED_PREFIX`` tokens are shared.
        needed: [B, T-1] bool, the positions the caller reads (a loss mask): the LM head runs on those only;
            other entries are meaningless (0, or in a shared prefix another row's value). Prompt and
            observation tokens are most of a sequence, and the head (hidden x vocab, e.g. 576 x 49152) is a
            large part of a small model's cost. None: all positions.

    Returns:
        ``(logprobs, entropy)``, each [B, T-1] float32 (entropy None unless ``with_entropy``); entries at
        padded positions are meaningless and must be masked by the caller. Gradients flow to the model's
        parameters.
    """
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids must be [batch, time], got shape {tuple(input_ids.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    vision = {}
    if pixel_values is not None:
        vision = {"pixel_values": pixel_values, "image_grid_thw": image_grid_thw}
        if "mm_token_type_ids" in inspect.signature(base.forward).parameters:
            vision["mm_token_type_ids"] = _mm_token_type_ids(model, input_ids)
    suppressed = suppressed_token_ids(model.config) if suppress_placeholders else []
    bias = None
    if suppressed:
        bias = torch.zeros(head.weight.shape[0], dtype=torch.float32, device=input_ids.device)
        bias[suppressed] = SUPPRESSION_BIAS

    if needed is not None and needed.shape != (input_ids.shape[0], input_ids.shape[1] - 1):
        raise ValueError(
            f"needed must be [batch, time - 1] = {(input_ids.shape[0], input_ids.shape[1] - 1)} (one entry "
            f"per predicted token, like the loss mask), got {tuple(needed.shape)}"
        )

    def stats(
        hidden: torch.Tensor, targets: torch.Tensor, where: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        return _head_stats(head, hidden, targets, where, bias, temperature, with_entropy, chunk_size)

    needed = None if needed is None else needed.bool()
    prefix = common_prefix_length(input_ids, attention_mask) if share_prefix and not vision else 0
    if prefix < MIN_SHARED_PREFIX or input_ids.shape[0] == 1:
        hidden = base(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **vision
        ).last_hidden_state
        return stats(hidden[:, :-1], input_ids[:, 1:], needed)

    rows = input_ids.shape[0]
    shared = base(input_ids=input_ids[:1, :prefix], use_cache=True)
    cache = shared.past_key_values
    cache.batch_repeat_interleave(rows)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    rest = base(
        input_ids=input_ids[:, prefix:], attention_mask=attention_mask, past_key_values=cache, use_cache=True
    ).last_hidden_state
    # Targets inside the prefix are the same for every row: one row's stats, expanded.
    head_needed = None if needed is None else needed[:, : prefix - 1].any(dim=0, keepdim=True)
    head_logprobs, head_entropy = stats(
        shared.last_hidden_state[:, :-1], input_ids[:1, 1:prefix], head_needed
    )
    last_shared = shared.last_hidden_state[:, -1:].expand(rows, -1, -1)
    tail_logprobs, tail_entropy = stats(
        torch.cat([last_shared, rest[:, :-1]], dim=1),
        input_ids[:, prefix:],
        None if needed is None else needed[:, prefix - 1 :],
    )
    logprobs = torch.cat([head_logprobs.expand(rows, -1), tail_logprobs], dim=1)
    if not with_entropy:
        return logprobs, None
    return logprobs, torch.cat([head_entropy.expand(rows, -1), tail_entropy], dim=1)


def common_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> int:
    """How many leading tokens every row has in common (real tokens only), at most the shortest row - 1, so
    that every row keeps at least one token of its own."""
    lengths = (
        torch.full((input_ids.shape[0],), input_ids.shape[1], device=input_ids.device)
        if attention_mask is None
        else attention_mask.sum(dim=1)
    )
    limit = int(lengths.min()) - 1
    if limit <= 0:
        return 0
    differs = (input_ids[:, :limit] != input_ids[:1, :limit]).any(dim=0)
    return int(differs.float().argmax()) if bool(differs.any()) else limit


def _head_stats(
    head: nn.Module,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    where: torch.Tensor | None,
    bias: torch.Tensor | None,
    temperature: float,
    with_entropy: bool,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs of ``targets`` (and entropies) from ``hidden`` [B, T, H], the LM head applied by chunks;
    with ``where`` [B, T] only at those positions (the others 0)."""
    if where is not None:
        positions = where.nonzero(as_tuple=True)
        logprobs, entropy = _head_stats(
            head, hidden[positions][None], targets[positions][None], None, bias, temperature, with_entropy,
            chunk_size,
        )  # fmt: skip
        full = hidden.new_zeros(targets.shape, dtype=torch.float32).index_put(positions, logprobs[0])
        if not with_entropy:
            return full, None
        return full, hidden.new_zeros(targets.shape, dtype=torch.float32).index_put(positions, entropy[0])

    def chunk_stats(
        chunk_hidden: torch.Tensor, chunk_targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = head(chunk_hidden).float()
        if bias is not None:
            logits = logits + bias
        logits = logits / temperature
        normaliser = torch.logsumexp(logits, dim=-1)
        logprobs = logits.gather(-1, chunk_targets.unsqueeze(-1)).squeeze(-1) - normaliser
        if not with_entropy:
            return logprobs, logprobs.new_zeros(())
        entropy = normaliser - (torch.softmax(logits, dim=-1) * logits).sum(-1)
        return logprobs, entropy

    recompute = torch.is_grad_enabled() and hidden.requires_grad
    logprob_chunks, entropy_chunks = [], []
    for start in range(0, hidden.shape[1], chunk_size):
        args = (hidden[:, start : start + chunk_size], targets[:, start : start + chunk_size])
        if recompute:
            logprobs, entropy = checkpoint(chunk_stats, *args, use_reentrant=False)
        else:
            logprobs, entropy = chunk_stats(*args)
        logprob_chunks.append(logprobs)
        entropy_chunks.append(entropy)
    if not logprob_chunks:
        empty = hidden.new_zeros((hidden.shape[0], 0), dtype=torch.float32)
        return empty, (empty if with_entropy else None)
    logprobs = torch.cat(logprob_chunks, dim=1)
    return logprobs, (torch.cat(entropy_chunks, dim=1) if with_entropy else None)


def _mm_token_type_ids(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """0 for text, 1 for image tokens, 2 for video tokens.

    Qwen2-VL-style models in transformers 5 compute their 3D (multimodal RoPE) positions only when given these
    types; without them the positions silently fall back to 1D and disagree with vLLM's after an image.
    """
    types = torch.zeros_like(input_ids, dtype=torch.int32)
    for value, name in ((1, "image_token_id"), (2, "video_token_id")):
        token_id = getattr(model.config, name, None)
        if token_id is not None:
            types[input_ids == token_id] = value
    return types
