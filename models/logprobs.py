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
result (and its gradient, which reaches the prefix through the cache) equals the plain forward's. The
prefix's backward runs as a backward pass of its own when the rest's gradient reaches it, so that the
rest's weight gradients go into ``.grad`` at once instead of waiting, a second copy, for the prefix's.

``checkpoint_layers=True`` is gradient checkpointing: each decoder layer keeps only its input for the
backward pass and recomputes its activations there, so the peak holds one layer's activations instead of
all of them (for a ~1.3x longer forward + backward). It works with ``share_prefix`` because neither pass
writes a key/value cache twice: the prefix pass keeps the first keys/values each layer gives and the rest
only reads them, so a layer's recomputation sees what its first run saw (HF's own checkpointing turns the
cache off instead). Under autocast it casts each weight where it is used instead of caching its
low-precision copy through the forward pass (the recomputation casts again anyway).

``pack_rows=True`` runs the rows (after a shared prefix, all of them without one) as one row of batch 1
without their padding (models/packed_rows.py): each token attends to its own row and to the shared prefix
through a block-diagonal mask, at its own row's positions, and the results are laid out as the padded rows'.
The padding's share of the linear layers' work is saved; attention over the packed row costs its length
squared (SDPA computes the masked blocks too) instead of the rows' count times the longest row's length
squared (benchmarks/packed_rows.py measures the balance).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer
from transformers.modeling_layers import GradientCheckpointingLayer

from models.packed_rows import PackedRows, pack, right_padded_lengths
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
    checkpoint_layers: bool = False,
    pack_rows: bool = False,
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
        checkpoint_layers: recompute each decoder layer's activations in the backward pass instead of
            keeping them (module docstring); values and gradients are unchanged. Only acts when gradients
            are being recorded.
        pack_rows: run the rows (after a shared prefix) as one row without their padding, with
            block-diagonal causal attention (module docstring); the same values and gradients. Text-only, SDPA
            attention and full-attention layers only (the plain forward otherwise); rows must be right-padded.

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
    shared = prefix >= MIN_SHARED_PREFIX and input_ids.shape[0] > 1 and _plain_cache_layers(base)
    prefix = prefix if shared else 0
    packed = None
    if pack_rows and not vision and _packable(base):
        lengths = (
            torch.full((input_ids.shape[0],), input_ids.shape[1], device=input_ids.device)
            if attention_mask is None
            else right_padded_lengths(attention_mask)
        )
        packed = pack(lengths, prefix)
    separate = shared and torch.is_grad_enabled() and not _distributed()
    # Autocast caches each weight's bf16 copy until it exits: a copy of the model. With checkpointing the
    # backward casts again anyway, so the cache only pays where both passes' gradients meet in one cast.
    checkpointed = (
        _checkpointed_layers(model, cache_casts=shared and not separate)
        if checkpoint_layers
        else contextlib.nullcontext()
    )
    with checkpointed:
        if not shared and packed is None:
            hidden = base(
                input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **vision
            ).last_hidden_state
            return stats(hidden[:, :-1], input_ids[:, 1:], needed)

        rows = input_ids.shape[0]
        shared_hidden, prefix_cache = None, None
        if shared:
            # One copy of the prefix's keys/values for each padded row; the packed rows are one row.
            copies = rows if packed is None else 1
            shared_hidden, prefix_cache = _prefix_pass(base, input_ids[:1, :prefix], copies, separate)
        if packed is not None:
            rest = base(
                input_ids=input_ids[packed.rows, packed.times][None], attention_mask=packed.attention_mask,
                position_ids=packed.times[None], past_key_values=prefix_cache, use_cache=shared,
            ).last_hidden_state[0]  # fmt: skip
        else:
            rest = base(
                input_ids=input_ids[:, prefix:],
                attention_mask=torch.ones_like(input_ids) if attention_mask is None else attention_mask,
                past_key_values=prefix_cache, use_cache=True,
            ).last_hidden_state  # fmt: skip
    if packed is not None:
        tail_logprobs, tail_entropy = _packed_stats(stats, rest, packed, input_ids, needed, shared_hidden)
        if not shared:
            return tail_logprobs, tail_entropy
    else:
        last_shared = shared_hidden[:, -1:].expand(rows, -1, -1)
        tail_logprobs, tail_entropy = stats(
            torch.cat([last_shared, rest[:, :-1]], dim=1),
            input_ids[:, prefix:],
            None if needed is None else needed[:, prefix - 1 :],
        )
    # Targets inside the prefix are the same for every row: one row's stats, expanded.
    head_needed = None if needed is None else needed[:, : prefix - 1].any(dim=0, keepdim=True)
    head_logprobs, head_entropy = stats(shared_hidden[:, :-1], input_ids[:1, 1:prefix], head_needed)
    logprobs = torch.cat([head_logprobs.expand(rows, -1), tail_logprobs], dim=1)
    if not with_entropy:
        return logprobs, None
    return logprobs, torch.cat([head_entropy.expand(rows, -1), tail_entropy], dim=1)


def _prefix_pass(
    base: nn.Module, prefix_ids: torch.Tensor, copies: int, separate: bool
) -> tuple[torch.Tensor, Cache]:
    """The shared prefix [1, P] through the model: its hidden states and a read-only cache of its
    keys/values repeated ``copies`` times; ``separate``: its backward is a pass of its own
    (``_SeparateBackward``)."""
    recorded = Cache(layer_class_to_replicate=_RecordOnceLayer)
    outputs = [base(input_ids=prefix_ids, past_key_values=recorded, use_cache=True).last_hidden_state]
    for layer in recorded.layers:
        outputs += [layer.keys, layer.values]
    if separate:
        anchor = torch.empty(0, device=prefix_ids.device, requires_grad=True)  # puts the cut in the graph
        outputs = _SeparateBackward.apply(anchor, outputs)
    hidden, *keys_values = outputs
    pairs = zip(keys_values[::2], keys_values[1::2], strict=True)
    return hidden, Cache(layers=[_ReadOnlyLayer(keys, values, copies) for keys, values in pairs])


def _packed_stats(
    stats: Callable[..., tuple[torch.Tensor, torch.Tensor | None]],
    hidden: torch.Tensor,
    packed: PackedRows,
    input_ids: torch.Tensor,
    needed: torch.Tensor | None,
    shared_hidden: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Stats from the packed row's hidden states [N, H], laid out as the padded layout's columns from the
    shared prefix's last position on (all of them without one); 0 where nothing is predicted (padding) or
    not ``needed``. A packed token predicts the next one of its row; the last of the shared prefix's hidden
    states ``shared_hidden`` [1, P, H] predicts each row's first token after it."""
    rows, times, hidden = packed.rows[packed.predicts], packed.times[packed.predicts], hidden[packed.predicts]
    first_column = 0
    if shared_hidden is not None:
        first_column = shared_hidden.shape[1] - 1
        firsts = torch.arange(input_ids.shape[0], device=input_ids.device)
        rows, times = torch.cat([firsts, rows]), torch.cat([torch.full_like(firsts, first_column), times])
        hidden = torch.cat([shared_hidden[0, -1:].expand(len(firsts), -1), hidden])
    if needed is not None:
        keep = needed[rows, times]
        rows, times, hidden = rows[keep], times[keep], hidden[keep]
    logprobs, entropy = stats(hidden[None], input_ids[rows, times + 1][None], None)
    shape = (input_ids.shape[0], input_ids.shape[1] - 1 - first_column)
    columns = (rows, times - first_column)
    logprobs = logprobs.new_zeros(shape).index_put(columns, logprobs[0])
    if entropy is None:
        return logprobs, None
    return logprobs, entropy.new_zeros(shape).index_put(columns, entropy[0])


class _RecordOnceLayer(DynamicLayer):
    """One layer's keys/values in the prefix pass: the first ones it is given are kept; a recomputation
    (``checkpoint_layers``) gets its own back without storing them again. Nothing precedes the prefix, so
    the layer attends to exactly what it is given."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self.keys, self.values = key_states, value_states
        return key_states, value_states


class _ReadOnlyLayer(DynamicLayer):
    """One layer's prefix keys/values, read by all ``rows`` of the continuation pass and never written."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, rows: int) -> None:
        super().__init__()
        self.lazy_initialization(keys, values)
        self.keys, self.values = keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        return torch.cat([self.keys, key_states], dim=-2), torch.cat([self.values, value_states], dim=-2)


def _packable(base: nn.Module) -> bool:
    """Whether the model takes the packed row's block-diagonal mask as it is: SDPA attention (eager attention
    would add a boolean mask) in full-attention layers only (a sliding window would be lost)."""
    return base.config._attn_implementation == "sdpa" and _plain_cache_layers(base)


def _plain_cache_layers(base: nn.Module) -> bool:
    """Whether every layer of the model's cache is a plain growing one (no sliding window, no linear
    attention), the only kind the prefix layers above stand in for."""
    layers = DynamicCache(config=base.config).layers
    return all(type(layer) is DynamicLayer for layer in layers)


class _SeparateBackward(torch.autograd.Function):
    """The prefix pass's outputs, cut from its graph: their gradients run the prefix's backward as a backward
    pass of its own. In one joint backward, every weight's gradient from the continuation would wait, summed
    apart from ``.grad``, for the prefix's, which comes last: a second copy of the gradients (bf16 through
    autocast's cached cast, fp32 without it) held through the backward. Separately, each is added to
    ``.grad`` as it comes. Not under DDP, which must see each parameter's gradient once per backward."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor, outputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        ctx.set_materialize_grads(False)
        ctx.outputs = outputs  # not an input: the continuation's graph gets no edge into the prefix's
        return tuple(t.detach() for t in outputs)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor | None) -> tuple[None, None]:
        pairs = zip(ctx.outputs, grads, strict=True)
        reached = [(t, g) for t, g in pairs if g is not None and t.requires_grad]
        if reached:
            torch.autograd.backward([t for t, _ in reached], [g for _, g in reached])
        return None, None


def _distributed() -> bool:
    """Whether DDP may be summing gradients across ranks (an in-process vLLM engine sets up a group of 1)."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


@contextlib.contextmanager
def _checkpointed_layers(model: nn.Module, *, cache_casts: bool) -> Iterator[None]:
    """Each decoder layer of ``model`` runs under ``torch.utils.checkpoint`` (non-reentrant: gradients also
    reach the prefix keys/values, which are intermediate results of a checkpointed layer) while gradients
    are recorded, whatever the model's train/eval mode; with ``cache_casts=False`` autocast (if on) casts
    each weight where it is used instead of keeping its low-precision copy until it exits."""
    if not torch.is_grad_enabled():
        yield
        return
    layers = [module for module in model.modules() if isinstance(module, GradientCheckpointingLayer)]
    for layer in layers:
        layer.forward = functools.partial(checkpoint, layer.forward, use_reentrant=False)
    try:
        with contextlib.nullcontext() if cache_casts else _uncached_autocast():
            yield
    finally:
        for layer in layers:
            del layer.forward


@contextlib.contextmanager
def _uncached_autocast() -> Iterator[None]:
    """The autocast in force (if any), without its cache of casts."""
    device = "cuda" if torch.is_autocast_enabled("cuda") else "cpu"
    if not torch.is_autocast_enabled(device):
        yield
        return
    with torch.autocast(device, dtype=torch.get_autocast_dtype(device), cache_enabled=False):
        yield


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
