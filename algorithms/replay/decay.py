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

The extension point: an entry of :data:`PRIORITY_DECAY_REGISTRY` is a builder, ``settings -> AgeDecay``, from
the replay settings (``ReplaySettings``: ``tau``, ``poly_k``); a replay mode names the decay it uses
(algorithms/replay/factory.py). A decay of your own has no case in :func:`log_weight_scalar`: it declares
``kernel_params = None``, and the buffer then computes its keys with ``log_weight`` alone, recomputing them
all (one vectorised O(N) pass) before the first draw after an add or a priority update, and after a new step
unless it is ``shift_invariant``. That is exact, and slower than a compiled decay by that pass per draw.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numba
import numpy as np

from algorithms.registry import Registry

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
    k: float
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


class AgeDecay(Protocol):
    """What the buffer needs of a decay (module docstring). A frozen dataclass: a checkpoint records its
    fields. kernel_params: (kind, tau, k) of :func:`log_weight_scalar` for the compiled kernels, or None for a
    decay they do not know (its keys are computed with ``log_weight`` alone)."""

    shift_invariant: ClassVar[bool]

    @property
    def kernel_params(self) -> tuple[int, float, float] | None: ...

    def factor(self, ages: np.ndarray) -> np.ndarray: ...

    def log_weight(self, collection_steps: np.ndarray, reference_step: float) -> np.ndarray: ...


class DecaySettings(Protocol):
    """The replay settings the built-in decays read (``ReplaySettings`` has them)."""

    tau: float
    poly_k: float


PRIORITY_DECAY_REGISTRY: Registry[Callable[[DecaySettings], AgeDecay]] = Registry(
    "priority decay", key="decay", home="algorithms.replay.decay:PRIORITY_DECAY_REGISTRY"
)


@PRIORITY_DECAY_REGISTRY.register("none")
def no_decay(settings: DecaySettings) -> NoDecay:
    return NoDecay()


# tau = inf is the limit of both decays, no decay at all: the "no decay" point of a sweep over tau.
@PRIORITY_DECAY_REGISTRY.register("exponential")
def exponential_decay(settings: DecaySettings) -> ExponentialDecay | NoDecay:
    return NoDecay() if settings.tau == math.inf else ExponentialDecay(tau=settings.tau)


@PRIORITY_DECAY_REGISTRY.register("polynomial")
def polynomial_decay(settings: DecaySettings) -> PolynomialDecay | NoDecay:
    return NoDecay() if settings.tau == math.inf else PolynomialDecay(tau=settings.tau, k=settings.poly_k)
