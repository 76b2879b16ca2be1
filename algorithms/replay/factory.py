"""One switch for the four replay settings compared in the FreshPER paper."""

from __future__ import annotations

import math
from typing import Any, Literal

from algorithms.replay.decay import ExponentialDecay, NoDecay, PolynomialDecay
from algorithms.replay.prioritized_buffer import PrioritizedReplayBuffer

ReplayMode = Literal["on_policy", "per", "freshper", "freshper_poly"]
REPLAY_MODES: tuple[str, ...] = ("on_policy", "per", "freshper", "freshper_poly")


# The FreshPER reference repository's settings (capacity 50k, alpha 0.6, beta 0.4 constant, tau 500, eps
# 1e-6), except that new items enter at |signal| + eps rather than at the maximum priority: the comparisons
# with it (benchmarks/replay_buffer.py) and the buffer's own tests start from them. Training takes
# DAPOConfig's values (DAPOConfig.build_replay_buffer), which differ where these left FreshPER inert.
REFERENCE_SETTINGS: dict[str, Any] = {
    "capacity": 50_000,
    "alpha": 0.6,
    "beta_0": 0.4,
    "beta_horizon": None,
    "tau": 500.0,
    "poly_k": 1.0,
    "eps": 1e-6,
    "seed": 0,
    "insert_at_max_priority": False,
}


def make_replay_buffer(
    mode: ReplayMode,
    *,
    capacity: int,
    alpha: float,
    beta_0: float,
    beta_horizon: float | None,
    tau: float,
    poly_k: float,
    eps: float,
    seed: int,
    insert_at_max_priority: bool,
) -> PrioritizedReplayBuffer | None:
    """Build the buffer for ``mode``, or None for the on-policy baseline (no replay).

    - ``"on_policy"``: None.
    - ``"per"``: standard PER, no age decay (``tau`` and ``poly_k`` unused).
    - ``"freshper"``: FreshPER, p_i = p_base_i * exp(-age / tau).
    - ``"freshper_poly"``: p_i = p_base_i * (1 + age / tau) ** -poly_k.
    - either with ``tau = inf``: no decay, the limit of both (1 at every age), which is standard PER: the
      "no decay" point of a sweep over tau.

    Every setting is given: :class:`PrioritizedReplayBuffer` says what each means, ``DAPOConfig`` holds
    training's (``build_replay_buffer``), :data:`REFERENCE_SETTINGS` the reference repository's.
    """
    if mode == "on_policy":
        return None
    if mode == "per" or (mode in ("freshper", "freshper_poly") and tau == math.inf):
        decay = NoDecay()
    elif mode == "freshper":
        decay = ExponentialDecay(tau=tau)
    elif mode == "freshper_poly":
        decay = PolynomialDecay(tau=tau, k=poly_k)
    else:
        raise ValueError(f"unknown replay mode {mode!r}; expected one of {REPLAY_MODES}")
    return PrioritizedReplayBuffer(
        capacity,
        decay,
        alpha=alpha,
        beta_0=beta_0,
        beta_horizon=beta_horizon,
        eps=eps,
        seed=seed,
        insert_at_max_priority=insert_at_max_priority,
    )


def make_reference_buffer(mode: ReplayMode, **changes: Any) -> PrioritizedReplayBuffer | None:
    """The buffer for ``mode`` with :data:`REFERENCE_SETTINGS`, ``changes`` on top."""
    return make_replay_buffer(mode, **{**REFERENCE_SETTINGS, **changes})
