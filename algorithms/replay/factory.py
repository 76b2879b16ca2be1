"""The replay-mode extension point (``DAPOConfig.replay_mode``): the four settings compared in the FreshPER
paper, and any mode of your own.

An entry of :data:`REPLAY_MODE_REGISTRY` is a builder, ``ReplaySettings -> PrioritizedReplayBuffer | None``
(None: no replay). The prioritized modes differ only in their age decay, which each names in
:data:`~algorithms.replay.decay.PRIORITY_DECAY_REGISTRY` (:func:`prioritized_buffer`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from algorithms.registry import Registry
from algorithms.replay.decay import PRIORITY_DECAY_REGISTRY
from algorithms.replay.prioritized_buffer import PrioritizedReplayBuffer


@dataclass(frozen=True)
class ReplaySettings:
    """Every setting a replay mode builds its buffer from: :class:`PrioritizedReplayBuffer`'s arguments (it
    says what each means) and the decays' ``tau`` and ``poly_k``. None has a default: ``DAPOConfig`` holds
    training's (``build_replay_buffer``), :data:`REFERENCE_SETTINGS` the reference repository's."""

    capacity: int
    alpha: float
    beta_0: float
    beta_horizon: float | None
    tau: float
    poly_k: float
    eps: float
    seed: int
    insert_at_max_priority: bool


REPLAY_MODE_REGISTRY: Registry[Callable[[ReplaySettings], PrioritizedReplayBuffer | None]] = Registry(
    "replay mode", key="replay_mode", home="algorithms.replay.factory:REPLAY_MODE_REGISTRY"
)


def prioritized_buffer(settings: ReplaySettings, decay: str) -> PrioritizedReplayBuffer:
    """The prioritized buffer of ``settings`` with the age decay registered as ``decay``."""
    return PrioritizedReplayBuffer(
        settings.capacity,
        PRIORITY_DECAY_REGISTRY.get(decay)(settings),
        alpha=settings.alpha,
        beta_0=settings.beta_0,
        beta_horizon=settings.beta_horizon,
        eps=settings.eps,
        seed=settings.seed,
        insert_at_max_priority=settings.insert_at_max_priority,
    )


@REPLAY_MODE_REGISTRY.register("on_policy")
def on_policy(settings: ReplaySettings) -> None:
    """The on-policy baseline: no buffer."""
    return None


@REPLAY_MODE_REGISTRY.register("per")
def per(settings: ReplaySettings) -> PrioritizedReplayBuffer:
    """Standard PER (Schaul et al., 2016): no age decay (``tau`` and ``poly_k`` unused)."""
    return prioritized_buffer(settings, decay="none")


@REPLAY_MODE_REGISTRY.register("freshper")
def freshper(settings: ReplaySettings) -> PrioritizedReplayBuffer:
    """FreshPER: p_i = p_base_i * exp(-age / tau) (Eq. 13-14); tau = inf is PER."""
    return prioritized_buffer(settings, decay="exponential")


@REPLAY_MODE_REGISTRY.register("freshper_poly")
def freshper_poly(settings: ReplaySettings) -> PrioritizedReplayBuffer:
    """p_i = p_base_i * (1 + age / tau) ** -poly_k (section 4.3's ablation); tau = inf is PER."""
    return prioritized_buffer(settings, decay="polynomial")


# The built-in modes, in the paper's order: what comparisons and the command line offer by default.
REPLAY_MODES: tuple[str, ...] = REPLAY_MODE_REGISTRY.names()


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


def make_replay_buffer(mode: str, settings: ReplaySettings) -> PrioritizedReplayBuffer | None:
    """The buffer of replay mode ``mode`` (a registered name or a ``module:name``), or None (on-policy)."""
    return REPLAY_MODE_REGISTRY.get(mode)(settings)


def make_reference_buffer(mode: str, **changes: Any) -> PrioritizedReplayBuffer | None:
    """The buffer for ``mode`` with :data:`REFERENCE_SETTINGS`, ``changes`` on top."""
    return make_replay_buffer(mode, ReplaySettings(**{**REFERENCE_SETTINGS, **changes}))
