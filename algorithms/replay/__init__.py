"""FreshPER: prioritized experience replay with age-decayed priorities (plain numpy + numba, no Ray)."""

from algorithms.replay.decay import (
    PRIORITY_DECAY_REGISTRY,
    AgeDecay,
    ExponentialDecay,
    NoDecay,
    PolynomialDecay,
)
from algorithms.replay.factory import (
    REFERENCE_SETTINGS,
    REPLAY_MODE_REGISTRY,
    REPLAY_MODES,
    ReplaySettings,
    make_reference_buffer,
    make_replay_buffer,
    prioritized_buffer,
)
from algorithms.replay.metrics import effective_sample_size, replay_fraction
from algorithms.replay.prioritized_buffer import PrioritizedReplayBuffer, ReplaySample

__all__ = [
    "PRIORITY_DECAY_REGISTRY",
    "REFERENCE_SETTINGS",
    "REPLAY_MODES",
    "REPLAY_MODE_REGISTRY",
    "AgeDecay",
    "ExponentialDecay",
    "NoDecay",
    "PolynomialDecay",
    "PrioritizedReplayBuffer",
    "ReplaySample",
    "ReplaySettings",
    "effective_sample_size",
    "make_reference_buffer",
    "make_replay_buffer",
    "prioritized_buffer",
    "replay_fraction",
]
