"""One switch for the four replay settings compared in the FreshPER paper."""

from __future__ import annotations

from typing import Literal

from algorithms.replay.decay import ExponentialDecay, NoDecay, PolynomialDecay
from algorithms.replay.prioritized_buffer import PrioritizedReplayBuffer

ReplayMode = Literal["on_policy", "per", "freshper", "freshper_poly"]
REPLAY_MODES: tuple[str, ...] = ("on_policy", "per", "freshper", "freshper_poly")


def make_replay_buffer(
    mode: ReplayMode,
    capacity: int = 50_000,
    alpha: float = 0.6,
    beta_0: float = 0.4,
    beta_horizon: float | None = None,
    tau: float = 500.0,
    poly_k: float = 1.0,
    eps: float = 1e-6,
    seed: int = 0,
    insert_at_max_priority: bool = False,
) -> PrioritizedReplayBuffer | None:
    """Build the buffer for ``mode``, or None for the on-policy baseline (no replay).

    - ``"on_policy"``: None.
    - ``"per"``: standard PER, no age decay (``tau`` and ``poly_k`` unused).
    - ``"freshper"``: FreshPER, p_i = p_base_i * exp(-age / tau).
    - ``"freshper_poly"``: p_i = p_base_i * (1 + age / tau) ** -poly_k.

    Defaults follow the FreshPER reference code (capacity 50k, alpha 0.6, beta 0.4 constant, tau 500,
    eps 1e-6), except that new items enter at |signal| + eps rather than at the maximum priority; see
    :class:`PrioritizedReplayBuffer` for every argument. Training builds its buffer from ``DAPOConfig``,
    whose defaults differ where these left FreshPER inert (|A| + 0.1, ages in iterations; see its comments).
    """
    if mode == "on_policy":
        return None
    if mode == "per":
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
