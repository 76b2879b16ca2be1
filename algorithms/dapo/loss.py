"""DAPO's policy loss (DAPO paper, Eq. 8-12) as a pure torch function, with GRPO's and Dr. GRPO's reductions.

Per response token t of sequence i, with ratio r = exp(logp - logp_old) against the behaviour policy:

    L_it = -min(r * A_i, clip(r, 1 - eps_low, 1 + eps_high) * A_i)      Clip-Higher (Eq. 8/10)
    L_it = min(L_it, -c * A_i)  if A_i < 0 and dual_clip_c = c           dual clip (Ye et al., 2020; verl)
    L_it = 0 (Clip-Cov) or L_it + beta |logp - logp_old| (KL-Cov)       on the entropy guard's tokens (Cui
                                                                         et al., 2025; entropy_guard.py)
    L_it *= min(exp(logp_old - logp_sampler), C)  when logp_sampler given  truncated IS (TIS), detached
    L_it += kl_coef * (exp(ref - logp) - (ref - logp) - 1)              k3 KL to a frozen reference (GRPO)

and the step loss sums w_i * L_it over the optimizer step and divides by one step-wide normalizer
(:func:`loss_normalizer`):

- ``token-mean`` (DAPO Eq. 12): sum_{i,t} w_i L_it / (response tokens in the step).
- ``seq-mean-token-mean`` (GRPO): sum_i w_i mean_t(L_it) / (sequences in the step).
- ``seq-mean-token-sum-norm`` (Dr. GRPO): sum_{i,t} w_i L_it / (all sequences in the step * L), L a constant.

Because every micro-batch divides by the normalizer of the whole step, summing the losses of the micro-batches
(gradient accumulation) gives the full-step loss and gradient however the step is split (verl's legacy actor,
which divides each micro-batch by its own token count, and TRL's GRPOTrainer with steps_per_generation !=
gradient_accumulation_steps got this wrong). Sequences must not be split across micro-batches. The entropy
guard's tokens are chosen once for the whole step (entropy_guard.py), so it keeps this property.

Engine/learner mismatch correction (truncated importance sampling, TIS: Yao et al. 2025, "Your efficient
RL framework secretly brings you off-policy RL training"; verl's rollout_is, token level, truncate mode):
when the sampler's logprobs ``logp_sampler`` are given, ``logp_old`` is the learner's own recomputation of
the behaviour policy (same weights, no grad), the PPO ratio and its clips use ``pi_theta / pi_old_learner``,
and each token's policy-gradient loss is multiplied by the detached weight
``min(pi_old_learner / pi_sampler, tis_cap)``. The KL term is not weighted (as in verl). With
``logp_sampler`` equal to ``logp_old`` every weight is exactly 1 and the loss is bit-identical to the
uncorrected one.

Masked positions (mask 0) contribute nothing, and NaN or inf stored there in any input never reaches the loss
or its gradient: inputs pass through ``torch.where`` before any arithmetic, so neither the forward nor the
backward pass multiplies a masked value by zero. Unmasked positions must hold finite values.

At a clip boundary (r exactly 1 - eps_low, 1 + eps_high or c) the token keeps its gradient; the clip fractions
count tokens strictly outside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from algorithms.dapo.entropy_guard import ENTROPY_GUARD_REGISTRY, EntropyGuard

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")


class LossSettings(Protocol):
    """What :meth:`LossConfig.from_config` reads of a DAPOConfig (structurally: config.py imports this
    module), beside the keys of the entropy guard it names."""

    eps_low: float
    eps_high: float
    loss_agg_mode: str
    kl_coef: float
    max_response_tokens: int
    tis_cap: float
    entropy_guard: str

    def resolved_dual_clip_c(self) -> float | None: ...


@dataclass(frozen=True)
class LossConfig:
    """Hyper-parameters of :func:`policy_loss`, taken from a DAPOConfig by :meth:`from_config` (which owns
    their defaults and validates them: ``DAPOConfig.validate``).

    eps_low, eps_high: Clip-Higher's decoupled range [1 - eps_low, 1 + eps_high] (DAPO section 3.1).
    dual_clip_c: bound c > 1 on the loss of negative-advantage tokens (-c * A); None turns it off (verl's
        default is 3.0, its DAPO scripts use 10).
    loss_agg_mode: one of ``LOSS_AGG_MODES``; ``token-mean`` is DAPO's token-level loss (Eq. 12).
    kl_coef: weight of the k3 KL to a frozen reference; 0 as in DAPO (section 2.3).
    max_response_tokens: the constant L of ``seq-mean-token-sum-norm``: Dr. GRPO uses the generation budget
        (for multi-turn trajectories, the budget of all turns together); that mode requires it
        (:func:`loss_normalizer`), the others ignore it.
    tis_cap: C of the mismatch weight min(pi_old_learner / pi_sampler, C), used when ``logp_sampler`` is
        given; >= 1 so that matching logprobs keep weight 1 (verl's rollout_is_threshold example and the
        TIS post, Yao et al., 2025, use 2.0).
    entropy_guard: the entropy guard (Clip-Cov, KL-Cov or a user's: entropy_guard.py), or None for none.
    """

    eps_low: float
    eps_high: float
    dual_clip_c: float | None
    loss_agg_mode: str
    kl_coef: float
    max_response_tokens: int | None
    tis_cap: float
    entropy_guard: EntropyGuard | None

    @classmethod
    def from_config(cls, config: LossSettings) -> LossConfig:
        """The loss settings of ``config`` (a DAPOConfig), its "auto" dual clip resolved and its entropy guard
        built by name."""
        return cls(
            eps_low=config.eps_low,
            eps_high=config.eps_high,
            dual_clip_c=config.resolved_dual_clip_c(),
            loss_agg_mode=config.loss_agg_mode,
            kl_coef=config.kl_coef,
            max_response_tokens=config.max_response_tokens,
            tis_cap=config.tis_cap,
            entropy_guard=ENTROPY_GUARD_REGISTRY.get(config.entropy_guard)(config),
        )


def loss_normalizer(masks: Sequence[Tensor], mode: str, max_response_tokens: int | None = None) -> float:
    """The denominator of one optimizer step's loss, from the [B_k, T_k] masks of all its micro-batches.

    ``token-mean``: total response tokens. ``seq-mean-token-mean``: sequences with at least one response
    token. ``seq-mean-token-sum-norm`` (Dr. GRPO): every row of the step, fully masked ones included (an
    overlong-filtered trajectory still counts: the denominator is a constant of the batch size, not of what
    the batch holds), times the fixed budget ``max_response_tokens`` (required: the generation budget of a
    trajectory, all turns together). A step without response tokens gives 1.0 in the first two modes, so
    its loss is 0, not NaN.
    """
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"mode must be one of {LOSS_AGG_MODES}, got {mode!r}")
    if mode == "seq-mean-token-sum-norm":
        if max_response_tokens is None or max_response_tokens < 1:
            raise ValueError(
                "seq-mean-token-sum-norm divides by a fixed budget: pass max_response_tokens >= 1 (the "
                f"generation budget of one trajectory), got {max_response_tokens}"
            )
        rows = sum(int(m.shape[0]) for m in masks)
        return float(max(rows, 1) * max_response_tokens)
    lengths = torch.cat([m.reshape(m.shape[0], -1).bool().sum(-1).cpu() for m in masks]) if masks else None
    if lengths is None or int(lengths.sum()) == 0:
        return 1.0
    if mode == "token-mean":
        return float(lengths.sum())
    return float(int((lengths > 0).sum()))


def policy_loss(
    logp: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    normalizer: float,
    cfg: LossConfig,
    weights: Tensor | None = None,
    logp_ref: Tensor | None = None,
    logp_sampler: Tensor | None = None,
    guard_tokens: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """One micro-batch's contribution to the step loss, and its detached metrics.

    logp, logp_old, mask, logp_ref: [B, T] (current, behaviour and reference log-probs of the sampled tokens;
    mask 1 on response tokens). advantages: [B] (broadcast over tokens) or [B, T]. weights: [B] importance
    weights of replayed sequences, multiplying each sequence's whole loss (KL term included). normalizer:
    :func:`loss_normalizer` of the whole optimizer step. logp_ref is required when ``cfg.kl_coef > 0``.
    logp_sampler: [B, T] the rollout engine's logprobs of the sampled tokens; given, ``logp_old`` must be the
    learner's recomputed ones and the truncated mismatch weight applies (module docstring). guard_tokens:
    [B, T] bool, the tokens of this micro-batch the step's entropy guard selected
    (``entropy_guard.select_tokens``); required exactly when ``cfg.entropy_guard`` is set.

    Metrics, over this micro-batch's response tokens: clipfrac_low / clipfrac_high (fraction of tokens whose
    gradient the low / high clip removes: A < 0 and r < 1 - eps_low / A > 0 and r > 1 + eps_high),
    dual_clip_frac, approx_kl (k3 estimate of KL(behaviour || current)), ratio_min / ratio_max / ratio_mean,
    kl_ref (when logp_ref is given), pg_loss (the policy-gradient part of the returned loss) and tokens. With
    logp_sampler: mismatch_kl (k3 estimate of KL(sampler || learner) from the sampled tokens),
    mismatch_ratio_min / mismatch_ratio_max (pi_old_learner / pi_sampler before truncation) and tis_clip_frac
    (fraction of tokens whose weight the cap truncates). With an entropy guard: entropy_guard_tokens (the
    guarded response tokens) and, for KL-Cov, entropy_guard_penalty (beta |logp - logp_old| averaged over
    them). Without response tokens the fractions and KLs are 0 and the ratio statistics 1.
    """
    mask = _check_inputs(
        logp, logp_old, advantages, mask, weights, logp_ref, logp_sampler, guard_tokens, normalizer, cfg
    )
    zero = logp.new_zeros(())
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logp)
    # where, not multiplication: a NaN/inf in a masked slot never enters exp(), so no 0 * inf in backward.
    logp = torch.where(mask, logp, zero)
    logp_old = torch.where(mask, logp_old, zero)
    adv = torch.where(mask, advantages.to(logp.dtype), zero)

    log_ratio = logp - logp_old
    ratio = torch.exp(log_ratio)
    pg_loss1 = -adv * ratio
    pg_loss2 = -adv * torch.clamp(ratio, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)
    pg_losses = torch.maximum(pg_loss1, pg_loss2)
    dual_clipped = torch.zeros_like(mask)
    if cfg.dual_clip_c is not None:
        pg_loss3 = -adv * cfg.dual_clip_c
        dual_clipped = (adv < 0) & (pg_loss3 < pg_losses)  # strict: at r == c the token keeps its gradient
        pg_losses = torch.where(dual_clipped, pg_loss3, pg_losses)
    if cfg.entropy_guard is not None:
        guarded = guard_tokens.bool() & mask
        pg_losses, guard_penalty = cfg.entropy_guard.token_losses(pg_losses, log_ratio, guarded)
    mismatch_log_ratio = None
    if logp_sampler is not None:
        mismatch_log_ratio = logp_old - torch.where(mask, logp_sampler.to(logp.dtype), zero)
        mismatch_ratio = torch.exp(mismatch_log_ratio).detach()
        pg_losses = pg_losses * torch.clamp(mismatch_ratio, max=cfg.tis_cap)

    token_losses = pg_losses
    kl_ref = None
    if logp_ref is not None:
        ref_log_ratio = torch.where(mask, logp_ref, zero) - logp
        kl_ref = torch.exp(ref_log_ratio) - ref_log_ratio - 1.0
        token_losses = pg_losses + cfg.kl_coef * kl_ref

    if weights is not None:
        w = torch.where(mask, weights[:, None].to(logp.dtype), zero)
        token_losses, pg_losses = w * token_losses, w * pg_losses
    loss = _aggregate(token_losses, mask, cfg.loss_agg_mode, normalizer)

    with torch.no_grad():
        tokens = mask.sum()
        n = tokens.clamp(min=1).to(logp.dtype)
        one = logp.new_ones(())
        metrics = {
            "clipfrac_low": ((adv < 0) & (ratio < 1.0 - cfg.eps_low)).sum() / n,
            "clipfrac_high": ((adv > 0) & (ratio > 1.0 + cfg.eps_high)).sum() / n,
            "dual_clip_frac": dual_clipped.sum() / n,
            "approx_kl": ((ratio - 1.0) - log_ratio).sum() / n,
            "ratio_min": torch.where(tokens > 0, torch.where(mask, ratio, torch.inf).min(), one),
            "ratio_max": torch.where(tokens > 0, torch.where(mask, ratio, -torch.inf).max(), one),
            "ratio_mean": torch.where(tokens > 0, torch.where(mask, ratio, zero).sum() / n, one),
            "pg_loss": _aggregate(pg_losses, mask, cfg.loss_agg_mode, normalizer),
            "tokens": tokens,
        }
        if kl_ref is not None:
            metrics["kl_ref"] = kl_ref.sum() / n
        if cfg.entropy_guard is not None:
            metrics["entropy_guard_tokens"] = guarded.sum()
            if guard_penalty is not None:
                metrics["entropy_guard_penalty"] = guard_penalty.sum() / guarded.sum().clamp(min=1)
        if mismatch_log_ratio is not None:
            metrics["mismatch_kl"] = ((mismatch_ratio - 1.0) - mismatch_log_ratio).sum() / n
            metrics["mismatch_ratio_min"] = torch.where(
                tokens > 0, torch.where(mask, mismatch_ratio, torch.inf).min(), one
            )
            metrics["mismatch_ratio_max"] = torch.where(
                tokens > 0, torch.where(mask, mismatch_ratio, -torch.inf).max(), one
            )
            metrics["tis_clip_frac"] = (mask & (mismatch_ratio > cfg.tis_cap)).sum() / n
    return loss, metrics


def _aggregate(token_losses: Tensor, mask: Tensor, mode: str, normalizer: float) -> Tensor:
    """Sum this micro-batch's share of the step loss; masked entries of ``token_losses`` are already 0."""
    if mode == "seq-mean-token-mean":
        per_sequence = token_losses.sum(-1) / mask.sum(-1).clamp(min=1)
        return per_sequence.sum() / normalizer
    return token_losses.sum() / normalizer


def _check_inputs(
    logp: Tensor,
    logp_old: Tensor,
    advantages: Tensor,
    mask: Tensor,
    weights: Tensor | None,
    logp_ref: Tensor | None,
    logp_sampler: Tensor | None,
    guard_tokens: Tensor | None,
    normalizer: float,
    cfg: LossConfig,
) -> Tensor:
    """Validate shapes and arguments; return the mask as bool."""
    if logp.dim() != 2:
        raise ValueError(f"logp must be [B, T], got shape {tuple(logp.shape)}")
    inputs = (
        ("logp_old", logp_old),
        ("mask", mask),
        ("logp_ref", logp_ref),
        ("logp_sampler", logp_sampler),
        ("guard_tokens", guard_tokens),
    )
    for name, x in inputs:
        if x is not None and x.shape != logp.shape:
            raise ValueError(f"{name} must have the shape of logp {tuple(logp.shape)}, got {tuple(x.shape)}")
    if advantages.shape not in (logp.shape[:1], logp.shape):
        raise ValueError(
            f"advantages must be [B] or [B, T] for logp {tuple(logp.shape)}, got {tuple(advantages.shape)}"
        )
    if weights is not None and weights.shape != logp.shape[:1]:
        raise ValueError(f"weights must be [B] = {tuple(logp.shape[:1])}, got {tuple(weights.shape)}")
    if cfg.kl_coef > 0 and logp_ref is None:
        raise ValueError("cfg.kl_coef > 0 needs logp_ref")
    if (cfg.entropy_guard is None) != (guard_tokens is None):
        given = "None" if guard_tokens is None else "given"
        raise ValueError(
            "guard_tokens (entropy_guard.select_tokens) must be given exactly when cfg.entropy_guard is set, "
            f"got entropy_guard={cfg.entropy_guard} and guard_tokens {given}"
        )
    if not normalizer > 0:
        raise ValueError(f"normalizer must be > 0, got {normalizer}")
    return mask if mask.dtype == torch.bool else mask != 0
