"""Per-token log-probabilities (and entropies) of a sequence under a HF causal LM or image-text model.

``token_logprobs`` runs the model's base (decoder, plus vision tower for VLMs) once over the sequence, then
applies the LM head to the hidden states chunk by chunk. Each chunk's vocabulary-sized logits are freed as
soon as its logprobs are taken; when gradients are needed a chunk is checkpointed (its logits are recomputed
in the backward pass), so the full [T, vocab] logits tensor never exists, forward or backward. Logits are
cast to float32 before the softmax, as vLLM does, in bf16 and fp32 alike. For vision models the image
placeholder tokens are suppressed as in the rollout engine (models/placeholders.py).
"""

from __future__ import annotations

import inspect

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from models.placeholders import SUPPRESSION_BIAS, suppressed_token_ids


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
    hidden = base(
        input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **vision
    ).last_hidden_state
    hidden = hidden[:, :-1]
    targets = input_ids[:, 1:]
    suppressed = suppressed_token_ids(model.config) if suppress_placeholders else []
    bias = None
    if suppressed:
        bias = torch.zeros(head.weight.shape[0], dtype=torch.float32, device=hidden.device)
        bias[suppressed] = SUPPRESSION_BIAS

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
        empty = hidden.new_zeros((input_ids.shape[0], 0), dtype=torch.float32)
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
