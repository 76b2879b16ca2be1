"""Entropy guard: Clip-Cov and KL-Cov (Cui et al., 2025, "The Entropy Mechanism of Reinforcement Learning for
Reasoning Language Models", arXiv 2505.22617, section 4), which hold back the few tokens that drive the
policy's entropy down.

For a softmax policy trained by policy gradient, one step changes the entropy by about
-Cov(log pi(a), pi(a) A(a)) (the paper's section 3): tokens that are already likely and have a positive
advantage (or unlikely with a negative one) concentrate the policy. Over the N response tokens of an
optimizer step, token i's share of that covariance is (the paper's Cov(y_i), section 4)

    Cov_i = (logp_i - mean_N logp) * (A_i - mean_N A)

Clip-Cov: n = max(floor(r N), 1) tokens drawn uniformly without replacement among those with
omega_low < Cov_i < omega_high lose their term of the loss, value and gradient (L_Clip-Cov: 0 on I_clip).
KL-Cov: the n = max(floor(k N), 1) tokens of largest Cov_i get beta |logp - logp_old| added to their loss
(L_KL-Cov; verl's ``ppo_kl_coef * abs(log_ratio)``), which pulls them back towards pi_old. At r = 1 that
penalty is 0 with a 0 gradient, so it acts once the policy has moved: from the second optimizer step of an
update pass, or on stale (replayed, async) batches.

What differs from the paper and from verl (``compute_policy_loss_clip_cov`` / ``_kl_cov`` in verl's
core_algos.py), and why:

- **Step-wide, not per micro-batch.** verl centres Cov_i and counts N within each micro-batch, so the tokens
  it selects change with ``ppo_micro_batch_size``. Here N, the means and the selection are those of the whole
  optimizer step (every row it trains on, across all learners), fixed before its first micro-batch
  (:func:`select_tokens`); each micro-batch applies its rows' share, so the loss and its gradient do not
  depend on the split (loss.py).
- **logp is pi_old's, not the current policy's.** The paper takes the current policy's detached logprobs. To
  be known before the first micro-batch, logp_i here is the step's ``logp_old``: the learner's recomputed
  pi_old with the mismatch correction on (the weights at the start of the update pass), else the sampler's
  logprobs. On the first optimizer step of a pass over a fresh batch the two are equal (exactly with the
  mismatch correction, to the engine/learner mismatch without it); on later steps of the pass they differ by
  the policy's movement since the pass began, and on replayed batches without the correction by the staleness.
- **Clip-Cov does not skip tokens the PPO clip already zeroes.** verl draws only among tokens the ratio clip
  leaves alone, which needs the current ratio; here a drawn token that the clip has already zeroed stays as
  it was (its gradient is 0 either way). On a pass's first step no token is clipped, so the draw is verl's.
- **Reproducible draws.** Clip-Cov draws with the learner's own generator seeded from the run's seed (verl's
  ``torch.randperm`` uses the global one); every learner draws the same tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    from algorithms.dapo.config import DAPOConfig

ENTROPY_GUARDS = ("none", "clip_cov", "kl_cov")


@dataclass(frozen=True)
class EntropyGuardConfig:
    """The guard's hyper-parameters, taken from a DAPOConfig by :meth:`from_config` (defaults and validation
    live there). mode: "clip_cov" or "kl_cov". ratio: the fraction of the step's response tokens it acts on
    (Clip-Cov's r, KL-Cov's k). cov_low, cov_high: Clip-Cov's band (omega_low, omega_high). kl_coef: KL-Cov's
    beta."""

    mode: str
    ratio: float
    cov_low: float
    cov_high: float
    kl_coef: float

    @classmethod
    def from_config(cls, config: DAPOConfig) -> EntropyGuardConfig | None:
        """The guard ``config`` asks for; None for ``entropy_guard="none"``."""
        if config.entropy_guard == "none":
            return None
        clip = config.entropy_guard == "clip_cov"
        return cls(
            mode=config.entropy_guard,
            ratio=config.clip_cov_ratio if clip else config.kl_cov_ratio,
            cov_low=config.clip_cov_low,
            cov_high=config.clip_cov_high,
            kl_coef=config.kl_cov_coef,
        )


@dataclass(frozen=True)
class GuardedTokens:
    """The tokens one optimizer step guards. selected: per row given to :func:`select_tokens`, a bool array
    over its positions. metrics: ``entropy_guard/...`` statistics of the step (empty without tokens)."""

    selected: list[np.ndarray]
    metrics: dict[str, float] = field(default_factory=dict)

    def batch(self, rows: Sequence[int | None], like: Tensor) -> Tensor:
        """[B, T] bool mask of a micro-batch whose row b is ``self.selected[rows[b]]`` (None: no row of the
        selection, nothing guarded), right-padded with False to the shape and device of ``like``."""
        mask = torch.zeros(like.shape, dtype=torch.bool)
        for b, row in enumerate(rows):
            if row is not None:
                selected = torch.from_numpy(self.selected[row])
                mask[b, : selected.shape[0]] = selected
        return mask.to(like.device)


def select_tokens(
    logp_old: Sequence[np.ndarray],
    advantages: Sequence[np.ndarray],
    masks: Sequence[np.ndarray],
    cfg: EntropyGuardConfig,
    rng: np.random.Generator,
) -> GuardedTokens:
    """The step's guarded tokens (module docstring) from every row it trains on: per row, 1-D arrays of equal
    length of pi_old's logprobs, advantages and the loss mask. Masked positions are never selected and their
    values never read. ``rng`` draws Clip-Cov's tokens; KL-Cov breaks ties in Cov by row, then position."""
    valid = [np.asarray(m) > 0 for m in masks]
    lengths = [int(v.sum()) for v in valid]
    tokens = sum(lengths)
    flat_selected = np.zeros(tokens, dtype=bool)
    metrics: dict[str, float] = {}
    if tokens:
        logp = np.concatenate([np.asarray(x, np.float64)[v] for x, v in zip(logp_old, valid, strict=True)])
        adv = np.concatenate([np.asarray(a, np.float64)[v] for a, v in zip(advantages, valid, strict=True)])
        cov = (logp - logp.mean()) * (adv - adv.mean())
        count = max(int(cfg.ratio * tokens), 1)
        if cfg.mode == "clip_cov":
            band = np.flatnonzero((cov > cfg.cov_low) & (cov < cfg.cov_high))
            chosen = rng.choice(band, size=min(count, band.size), replace=False) if band.size else band
            metrics["entropy_guard/band_frac"] = band.size / tokens
        else:
            chosen = np.argsort(-cov, kind="stable")[:count]
        flat_selected[chosen] = True
        metrics.update(
            {
                "entropy_guard/selected_frac": float(flat_selected.sum()) / tokens,
                "entropy_guard/cov_mean": float(cov.mean()),
                "entropy_guard/cov_max": float(cov.max()),
                "entropy_guard/cov_selected_mean": float(cov[flat_selected].mean()) if chosen.size else 0.0,
            }
        )
    selected, start = [], 0
    for v, n in zip(valid, lengths, strict=True):
        row = np.zeros(v.shape, dtype=bool)
        row[v] = flat_selected[start : start + n]
        selected.append(row)
        start += n
    return GuardedTokens(selected, metrics)


def guard_token_losses(
    pg_losses: Tensor, log_ratio: Tensor, selected: Tensor, cfg: EntropyGuardConfig
) -> tuple[Tensor, Tensor]:
    """The per-token policy-gradient losses with the guard applied on ``selected`` tokens, and KL-Cov's
    penalty beta |logp - logp_old| there (0 elsewhere, and everywhere for Clip-Cov). ``log_ratio`` must hold 0
    (not NaN) at masked positions."""
    zero = torch.zeros_like(pg_losses)
    if cfg.mode == "clip_cov":
        return torch.where(selected, zero, pg_losses), zero
    penalty = torch.where(selected, cfg.kl_coef * log_ratio.abs(), zero)
    return pg_losses + penalty, penalty
