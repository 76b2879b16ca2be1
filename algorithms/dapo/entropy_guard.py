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

The extension point (``DAPOConfig.entropy_guard``): an entry of :data:`ENTROPY_GUARD_REGISTRY` is a builder,
``config -> EntropyGuard | None``, that takes its settings' values from the run's DAPOConfig; "none" builds
None, no guard. An :class:`EntropyGuard` chooses the step's tokens from their Cov_i (``select``, called by
:func:`select_tokens`) and changes their loss (``token_losses``, called by ``policy_loss``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from algorithms.registry import Registry


class EntropyGuard(ABC):
    """Which of an optimizer step's response tokens to hold back, and how."""

    @abstractmethod
    def select(self, cov: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, float]]:
        """Indices into ``cov`` (Cov_i of the step's N response tokens, by row then position) of the tokens to
        guard, and the guard's own ``entropy_guard/...`` metrics. ``rng``: the learner's stream for draws."""

    @abstractmethod
    def token_losses(
        self, pg_losses: Tensor, log_ratio: Tensor, selected: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        """The per-token policy-gradient losses with the guard applied on the ``selected`` tokens, and the
        penalty it added there (logged as ``entropy_guard_penalty``), or None where it adds none.
        ``log_ratio`` = logp - logp_old, 0 (not NaN) at masked positions."""


# The config is typed Any here: DAPOConfig's module imports this one. Each builder types the keys it reads.
ENTROPY_GUARD_REGISTRY: Registry[Callable[[Any], EntropyGuard | None]] = Registry(
    "entropy guard", key="entropy_guard", home="algorithms.dapo.entropy_guard:ENTROPY_GUARD_REGISTRY"
)


@dataclass(frozen=True)
class ClipCov(EntropyGuard):
    """Clip-Cov: n = max(floor(ratio N), 1) tokens drawn among those with cov_low < Cov_i < cov_high (r and
    (omega_low, omega_high) in the paper) lose their loss term, value and gradient."""

    ratio: float
    cov_low: float
    cov_high: float

    def select(self, cov: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, float]]:
        count = max(int(self.ratio * cov.size), 1)
        band = np.flatnonzero((cov > self.cov_low) & (cov < self.cov_high))
        chosen = rng.choice(band, size=min(count, band.size), replace=False) if band.size else band
        return chosen, {"entropy_guard/band_frac": band.size / cov.size}

    def token_losses(
        self, pg_losses: Tensor, log_ratio: Tensor, selected: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        return torch.where(selected, torch.zeros_like(pg_losses), pg_losses), None


@dataclass(frozen=True)
class KLCov(EntropyGuard):
    """KL-Cov: the n = max(floor(ratio N), 1) tokens of largest Cov_i (ties by row, then position) get
    beta |logp - logp_old| added to their loss (k and beta in the paper)."""

    ratio: float
    beta: float

    def select(self, cov: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, float]]:
        count = max(int(self.ratio * cov.size), 1)
        return np.argsort(-cov, kind="stable")[:count], {}

    def token_losses(
        self, pg_losses: Tensor, log_ratio: Tensor, selected: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        penalty = torch.where(selected, self.beta * log_ratio.abs(), torch.zeros_like(pg_losses))
        return pg_losses + penalty, penalty


@ENTROPY_GUARD_REGISTRY.register("none")
def no_guard(config: object) -> None:
    """No guard (the default): the loss is DAPO's."""
    return None


class ClipCovSettings(Protocol):
    """The DAPOConfig keys :func:`clip_cov` reads."""

    clip_cov_ratio: float
    clip_cov_low: float
    clip_cov_high: float


@ENTROPY_GUARD_REGISTRY.register("clip_cov")
def clip_cov(config: ClipCovSettings) -> ClipCov:
    return ClipCov(ratio=config.clip_cov_ratio, cov_low=config.clip_cov_low, cov_high=config.clip_cov_high)


class KLCovSettings(Protocol):
    """The DAPOConfig keys :func:`kl_cov` reads."""

    kl_cov_ratio: float
    kl_cov_coef: float


@ENTROPY_GUARD_REGISTRY.register("kl_cov")
def kl_cov(config: KLCovSettings) -> KLCov:
    return KLCov(ratio=config.kl_cov_ratio, beta=config.kl_cov_coef)


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
    guard: EntropyGuard,
    rng: np.random.Generator,
) -> GuardedTokens:
    """The step's guarded tokens (module docstring) from every row it trains on: per row, 1-D arrays of equal
    length of pi_old's logprobs, advantages and the loss mask. Masked positions are never selected and their
    values never read. ``rng`` is handed to ``guard.select`` (Clip-Cov draws with it)."""
    valid = [np.asarray(m) > 0 for m in masks]
    lengths = [int(v.sum()) for v in valid]
    tokens = sum(lengths)
    flat_selected = np.zeros(tokens, dtype=bool)
    metrics: dict[str, float] = {}
    if tokens:
        logp = np.concatenate([np.asarray(x, np.float64)[v] for x, v in zip(logp_old, valid, strict=True)])
        adv = np.concatenate([np.asarray(a, np.float64)[v] for a, v in zip(advantages, valid, strict=True)])
        cov = (logp - logp.mean()) * (adv - adv.mean())
        chosen, guard_metrics = guard.select(cov, rng)
        flat_selected[chosen] = True
        metrics = {
            **guard_metrics,
            "entropy_guard/selected_frac": float(flat_selected.sum()) / tokens,
            "entropy_guard/cov_mean": float(cov.mean()),
            "entropy_guard/cov_max": float(cov.max()),
            "entropy_guard/cov_selected_mean": float(cov[flat_selected].mean())
            if flat_selected.any()
            else 0.0,
        }
    selected, start = [], 0
    for v, n in zip(valid, lengths, strict=True):
        row = np.zeros(v.shape, dtype=bool)
        row[v] = flat_selected[start : start + n]
        selected.append(row)
        start += n
    return GuardedTokens(selected, metrics)
