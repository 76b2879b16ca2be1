"""Counting a learner's floating-point work from the shapes it runs, and the CPU's matrix-product peak.

Counted per ``models.logprobs.token_logprobs`` call, from the collated batch's real lengths (padding is
excluded: it is work the CPU does but not work the update needs):

- each ``nn.Linear`` of the decoder: 2 x parameters per token forward; backward 2 x parameters per token for
  the input's gradient plus as much again for the weight's where the weight trains (so 4x for full training);
- attention: QK^T and AV, each 2 x heads x head_dim per (query, key) pair, a query attending to itself and
  the keys before it (causal: L(L+1)/2 pairs for a row of L tokens); backward twice that;
- the LM head (hidden x vocab) only at the positions the loss reads (``needed``, the loss mask), as
  models/logprobs.py runs it; with gradients its chunks are checkpointed, so its forward runs twice;
- with a shared prefix (``share_prefix``), the prefix's tokens once, and each row's rest attending to it;
- with ``checkpoint_layers``, each decoder layer's forward twice.

Element-wise work (norms, activations, softmax, RoPE) and the optimizer are not counted: on these models they
are a few percent of the products' FLOPs, and what they cost is memory traffic, which the profile shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator

import torch
from torch import nn

from benchmarks.measure import load_average


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """What the count needs of a decoder LM: its linear layers' parameters by whether the weight trains
    (the LM head apart), its layer count and attention width (query heads x head dim)."""

    trained_linear: int
    frozen_linear: int
    head: int
    head_trains: bool
    layers: int
    attention_width: int


def model_shape(model: nn.Module) -> ModelShape:
    """The shape of an HF causal LM (LoRA adapters are linear layers like the others)."""
    head = model.get_output_embeddings()
    trained = frozen = 0
    for module in model.modules():
        if isinstance(module, nn.Linear) and module is not head:
            if module.weight.requires_grad:
                trained += module.weight.numel()
            else:
                frozen += module.weight.numel()
    config = model.config.get_text_config()
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return ModelShape(
        trained_linear=trained,
        frozen_linear=frozen,
        head=head.weight.numel(),
        head_trains=head.weight.requires_grad,
        layers=config.num_hidden_layers,
        attention_width=config.num_attention_heads * head_dim,
    )


def causal_pairs(start: int, stop: int) -> int:
    """(query, key) pairs of queries at positions ``start``..``stop``-1, each seeing keys 0..itself."""
    return (stop * (stop + 1) - start * (start + 1)) // 2


def token_logprobs_flops(
    shape: ModelShape,
    lengths: list[int],
    head_positions: int,
    *,
    prefix: int = 0,
    grad: bool = False,
    checkpoint_layers: bool = False,
    checkpoint_head: bool = True,
) -> dict[str, int]:
    """FLOPs of one ``token_logprobs`` call over rows of real ``lengths``, the LM head at ``head_positions``
    positions, the first ``prefix`` tokens (shared by every row) run once: {"linear", "attention", "head"}.
    ``checkpoint_head=False`` counts a head whose forward runs once, as a plain HF forward's does.
    """
    tokens = prefix + sum(length - prefix for length in lengths)
    pairs = causal_pairs(0, prefix) + sum(causal_pairs(prefix, length) for length in lengths)
    linear_forward = 2 * (shape.trained_linear + shape.frozen_linear) * tokens
    attention_forward = 2 * 2 * shape.attention_width * pairs * shape.layers
    head_forward = 2 * shape.head * head_positions
    if not grad:
        return {"linear": linear_forward, "attention": attention_forward, "head": head_forward}
    layer_passes = 2 if checkpoint_layers else 1
    linear_backward = 2 * (2 * shape.trained_linear + shape.frozen_linear) * tokens
    head_backward = (2 if shape.head_trains else 1) * head_forward
    return {
        "linear": layer_passes * linear_forward + linear_backward,
        "attention": (layer_passes + 2) * attention_forward,
        "head": (2 if checkpoint_head else 1) * head_forward + head_backward,
    }


def batch_flops(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    needed: torch.Tensor | None,
    *,
    share_prefix: bool,
    grad: bool,
    checkpoint_layers: bool,
) -> dict[str, int]:
    """``token_logprobs_flops`` of a collated batch as ``token_logprobs`` runs it (its arguments)."""
    from models.logprobs import MIN_SHARED_PREFIX, common_prefix_length

    rows, width = input_ids.shape
    lengths = [width] * rows if attention_mask is None else attention_mask.sum(dim=1).tolist()
    prefix = common_prefix_length(input_ids, attention_mask) if share_prefix else 0
    if prefix < MIN_SHARED_PREFIX or rows < 2:
        prefix = 0
    if needed is None:
        head_positions = sum(length - 1 for length in lengths)
    elif prefix:
        mask = needed.bool()
        head_positions = int(mask[:, : prefix - 1].any(dim=0).sum() + mask[:, prefix - 1 :].sum())
    else:
        head_positions = int(needed.bool().sum())
    return token_logprobs_flops(
        model_shape(model),
        lengths,
        head_positions,
        prefix=prefix,
        grad=grad,
        checkpoint_layers=checkpoint_layers,
    )


@contextlib.contextmanager
def counting_flops() -> Iterator[dict[str, int]]:
    """Adds up, into the dict it yields, the FLOPs of every ``token_logprobs`` call in this process while
    open (policy and reference model alike), by part, and "total"."""
    import models.logprobs
    import models.policy_module

    counts = {"linear": 0, "attention": 0, "head": 0, "total": 0}
    original = models.logprobs.token_logprobs

    def counted(model, input_ids, attention_mask=None, **kwargs):
        flops = batch_flops(
            model,
            input_ids,
            attention_mask,
            kwargs.get("needed"),
            share_prefix=kwargs.get("share_prefix", False) and kwargs.get("pixel_values") is None,
            grad=torch.is_grad_enabled(),
            checkpoint_layers=kwargs.get("checkpoint_layers", False),
        )
        for part, value in flops.items():
            counts[part] += value
            counts["total"] += value
        return original(model, input_ids, attention_mask, **kwargs)

    # The policy module imported the function by name; the reference's forward imports it when it runs.
    models.logprobs.token_logprobs = models.policy_module.token_logprobs = counted
    try:
        yield counts
    finally:
        models.logprobs.token_logprobs = models.policy_module.token_logprobs = original


def matmul_rate(m: int, k: int, n: int, dtype: torch.dtype, repeats: int = 5, seconds: float = 0.3) -> float:
    """The best FLOP/s of ``[m x k] @ [k x n]`` in ``dtype`` over ``repeats`` timings of ``seconds`` or so
    each, at torch's current thread count, after a warm-up product."""
    a = torch.randn(m, k).to(dtype)
    b = torch.randn(k, n).to(dtype)
    torch.mm(a, b)
    started = time.perf_counter()
    torch.mm(a, b)
    calls = max(1, int(seconds / max(time.perf_counter() - started, 1e-6)))
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            torch.mm(a, b)
        best = min(best, (time.perf_counter() - started) / calls)
    return 2 * m * k * n / best


# The peak's products: a SmolLM2-shaped one (4096 tokens through its MLP's up projection) and a square one.
PEAK_SHAPES = {"4096x576 @ 576x1536": (4096, 576, 1536), "2048x2048 @ 2048x2048": (2048, 2048, 2048)}


def matrix_peaks(dtype: str) -> dict[str, float]:
    """FLOP/s of each of ``PEAK_SHAPES`` in ``dtype`` and in float32, at torch's current threads."""
    rates = {
        f"{name} {kind}": matmul_rate(*shape, getattr(torch, kind))
        for kind in dict.fromkeys((dtype, "float32"))
        for name, shape in PEAK_SHAPES.items()
    }
    print(
        "  peak: "
        + ", ".join(f"{name} {rate / 1e9:.0f} GFLOP/s" for name, rate in rates.items())
        + f"; load {load_average()}",
        flush=True,
    )
    return rates
