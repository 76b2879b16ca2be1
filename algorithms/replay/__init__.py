"""FreshPER: prioritized experience replay with age-decayed priorities (plain numpy + numba, no Ray)."""

from algorithms.replay.decay import AgeDecay, ExponentialDecay, NoDecay, PolynomialDecay
from algorithms.replay.factory import (
    REFERENCE_SETTINGS,
    REPLAY_MODES,
    ReplayMode,
    make_reference_buffer,
    make_replay_buffer,
)
from algorithms.replay.metrics import effective_sample_size, replay_fraction
from algorithms.replay.prioritized_buffer import PrioritizedReplayBuffer, ReplaySample

__all__ = [
    "REFERENCE_SETTINGS",
    "REPLAY_MODES",
    "AgeDecay",
    "ExponentialDecay",
    "NoDecay",
    "PolynomialDecay",
    "PrioritizedReplayBuffer",
    "ReplayMode",
    "ReplaySample",
    "effective_sample_size",
    "make_reference_buffer",
    "make_replay_buffer",
    "replay_fraction",
]
