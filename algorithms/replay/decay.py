"""Age decay of replay priorities: p_i = p_base_i * d(t - t_i) (FreshPER, Eq. 13-14).

Every decay answers two questions for the buffer:

- ``factor(ages)``: the decay d(age) itself (plain numpy; for references, tests and metrics).
- ``log_weight(collection_steps, reference_step)``: log d(t - t_i) up to an additive constant that is the same
  for every item, evaluated against ``reference_step``. Sampling probabilities are ratios, so that constant
  cancels in P(i) and in the IS weights.

``shift_invariant`` says whether ``log_weight`` may be evaluated against any fixed reference step and stay
valid as the current step t advances. That holds for the exponential decay (forward decay:
exp(-(t - t_i)/tau) = exp(-t/tau) * exp(t_i/tau), and the first factor is common to all items) and for no
decay, so their stored keys never need refreshing. It fails for the polynomial decay, whose keys must be
recomputed against the current step whenever the step changes.

``log_weight`` is vectorised numpy (the O(N) refresh uses it); the buffer's compiled per-batch kernels
evaluate the same formula through :func:`log_weight_scalar` given the decay's ``kernel_params``
(kind, tau, k). A test holds the two equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np

EXPONENTIAL, POLYNOMIAL, NONE = 0, 1, 2


@numba.njit(cache=True, nogil=True, inline="always")
def log_weight_scalar(kind: int, tau: float, k: float, step: float, reference_step: float) -> float:
    """log d(reference_step - step) up to a constant common to all items (see the module docstring)."""
    if kind == EXPONENTIAL:
        return (step - reference_step) / tau
    if kind == POLYNOMIAL:
        return -k * math.log1p((reference_step - step) / tau)
    return 0.0


def _check_positive(name: str, value: float) -> None:
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value}")


@dataclass(frozen=True)
class ExponentialDecay:
    """FreshPER's decay d(age) = exp(-age / tau); the priority halves every tau * ln 2 steps.

    Args:
        tau: age decay constant, > 0, in the caller's step unit (the paper uses 500, 1000 for FrozenLake).
    """

    tau: float
    shift_invariant: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _check_positive("tau", self.tau)

    @property
    def kernel_params(self) -> tuple[int, float, float]:
        return EXPONENTIAL, float(self.tau), 0.0

    def factor(self, ages: np.ndarray) -> np.ndarray:
        return np.exp(-np.asarray(ages, dtype=np.float64) / self.tau)

    def log_weight(self, collection_steps: np.ndarray, reference_step: float) -> np.ndarray:
        return (np.asarray(collection_steps, dtype=np.float64) - reference_step) / self.tau


@dataclass(frozen=True)
class PolynomialDecay:
    """Polynomial decay d(age) = (1 + age / tau) ** -k, the paper's ablation alternative (section 4.3).

    Args:
        tau: age scale, > 0, in the caller's step unit.
        k: power, > 0.
    """

    tau: float
    k: float = 1.0
    shift_invariant: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check_positive("tau", self.tau)
        _check_positive("k", self.k)

    @property
    def kernel_params(self) -> tuple[int, float, float]:
        return POLYNOMIAL, float(self.tau), float(self.k)

    def factor(self, ages: np.ndarray) -> np.ndarray:
        return (1.0 + np.asarray(ages, dtype=np.float64) / self.tau) ** -self.k

    def log_weight(self, collection_steps: np.ndarray, reference_step: float) -> np.ndarray:
        ages = reference_step - np.asarray(collection_steps, dtype=np.float64)
        return -self.k * np.log1p(ages / self.tau)


@dataclass(frozen=True)
class NoDecay:
    """No age decay: standard prioritized experience replay (Schaul et al., 2016)."""

    shift_invariant: ClassVar[bool] = True

    @property
    def kernel_params(self) -> tuple[int, float, float]:
        return NONE, 1.0, 0.0

    def factor(self, ages: np.ndarray) -> np.ndarray:
        return np.ones_like(np.asarray(ages, dtype=np.float64))

    def log_weight(self, collection_steps: np.ndarray, reference_step: float) -> np.ndarray:
        return np.zeros_like(np.asarray(collection_steps, dtype=np.float64))


AgeDecay = ExponentialDecay | PolynomialDecay | NoDecay
