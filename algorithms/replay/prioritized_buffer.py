"""Prioritized replay with age decay: FreshPER, polynomial-decay FreshPER and standard PER in one buffer.

Each stored item (any Python object, typically a trajectory record) carries a base priority
p_base_i = |signal_i| + eps (the signal is |R_i| for critic-free methods as in the paper, or |A_i|; the caller
chooses) and its collection step t_i. At the current step t its priority is p_i = p_base_i * d(t - t_i) for an
:mod:`~algorithms.replay.decay` d, and a sample draws i.i.d. (with replacement)

    P(i) = p_i^alpha / sum_k p_k^alpha,     w_i = (N P(i))^-beta / max_j w_j = (P(i) / min_j P(j))^-beta,

the max over every item in the buffer, with beta annealed linearly from beta_0 to 1 over ``beta_horizon``
steps (constant beta_0 when ``beta_horizon`` is None, as in the FreshPER reference code).

How it stays O(B log N) per step. The buffer keeps, per slot, the log key
log k_i = alpha * (log p_base_i + log_weight_i), where log_weight is log d up to a constant shared by all
items (see ``decay.py``), in a min tree (for the IS normaliser, exact at any dynamic range), and
exp(log k_i - shift) in a float64 sum tree (for sampling); a third (min) tree of collection steps gives the
maximum age. The trees are 8-ary arrays (``priority_tree.py``) walked by numba kernels (``kernels.py``),
one call per batch: B draws or B priority updates cost O(B log N), with no O(N) work per step.

- Exponential decay (FreshPER) uses forward decay: log_weight_i = (t_i - t_ref) / tau for a fixed reference
  step t_ref, so a key never changes as t advances. Before a new sum-tree key would exceed exp(500) (roughly
  when alpha * (t - t_ref) / tau reaches 500), the buffer rebases: t_ref := t and every key is recomputed
  from the stored p_base and t_i in one vectorised O(N) pass (with tau = 500, alpha = 0.6 that is every
  ~400k steps). A key far below the scale set at the last rebase (the largest key then) is subnormal or 0 in
  the sum tree; that is harmless while the total is near the scale, but once the items that set it are
  evicted (or updated down) the small keys left would be drawn from wrong or zero values. So ``sample`` and
  ``probabilities`` rebase first whenever the tree total is below exp(-REBASE_EXPONENT): then every key
  that underflowed is below exp(-208) of the total, and the keys that carry the mass are normal floats.
  A rebase leaves the total >= 1, so this costs one O(N) pass per fall of the total by e^500, none in the
  common case. The min tree keeps its exact log key throughout.
- No decay (standard PER) needs no refresh at all.
- A decay the kernels do not know (``kernel_params`` None, a user's: decay.py) gets placeholder keys from
  every add and update, and the next ``sample`` recomputes all keys with its vectorised ``log_weight``:
  exact, one O(N) pass per draw after a change.
- Polynomial decay (1 + age/tau)^-k does not factor, so its keys are recomputed exactly against the current
  step, lazily: the first ``sample`` (or ``probabilities``) at a new step pays one vectorised O(N) pass and
  tree rebuild (see benchmarks/replay_buffer.py; several ms at N = 1e6); later samples and
  updates at that step are O(B log N). Adds and updates at a newer step store base priorities and steps and
  leave the keys to that refresh.

Age is ``t - t_i`` in whatever unit the caller counts ``t`` (training iterations by default in freshrl).
``t`` must never decrease across calls. Slots are a FIFO ring: the (capacity+1)-th item evicts the oldest.
Every item gets a unique id (``id % capacity`` is its slot, ``id // capacity`` its generation), and
``update_priorities`` ignores ids whose slot has been overwritten since they were sampled.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.replay.decay import NONE, AgeDecay
from algorithms.replay.kernels import (
    MIN_KEY,
    MIN_STEP,
    SUM,
    TREE_FILLS,
    draw,
    log_base_priorities,
    update_leaves,
    write_leaves,
)
from algorithms.replay.metrics import batch_metrics, effective_sample_size
from algorithms.replay.priority_tree import build_min, build_sum, new_trees, tree_offsets

# Largest exponent a sum-tree leaf may have before all keys are rebased. exp(500) ~ 1e217 leaves room for a
# sum over 1e9 leaves and for large base priorities below float64's 1.8e308.
REBASE_EXPONENT = 500.0
# Smallest sum-tree total sampled without a rebase: leaves underflow below exp(-745), so above this total
# whatever underflowed weighs < exp(-245) of it (beyond a float64 uniform's resolution, 2^-53).
MIN_TOTAL = math.exp(-REBASE_EXPONENT)

STATE_FORMAT = 1


@dataclass(frozen=True)
class ReplaySample:
    """One batch drawn from the buffer, aligned along the batch axis.

    Attributes:
        items: the stored objects (the same objects, not copies; may repeat).
        indices: int64 unique item ids (slot = id % capacity, generation = id // capacity), to pass back
            to ``update_priorities``.
        probabilities: P(i) of each draw at the sampling step.
        is_weights: importance weights (N P(i))^-beta / max_j w_j, in (0, 1].
        ages: t - t_i of each draw.
        beta: the beta used for ``is_weights``.
    """

    items: list[Any]
    indices: np.ndarray
    probabilities: np.ndarray
    is_weights: np.ndarray
    ages: np.ndarray
    beta: float

    def __len__(self) -> int:
        return len(self.items)

    @property
    def ess(self) -> float:
        """Effective sample size of the batch's IS weights, (sum w)^2 / sum w^2."""
        return effective_sample_size(self.is_weights)


class PrioritizedReplayBuffer:
    """Fixed-capacity prioritized replay buffer with age-decayed priorities (see the module docstring).

    Every setting is given, none defaulted: ``DAPOConfig`` holds training's (``build_replay_buffer``) and
    ``REFERENCE_SETTINGS`` (algorithms/replay/factory.py) the FreshPER reference repository's.

    Args:
        capacity: number of items kept; older ones are evicted first.
        decay: an age decay (``ExponentialDecay`` for FreshPER, ``PolynomialDecay``, ``NoDecay`` for PER, or
            any :class:`~algorithms.replay.decay.AgeDecay`).
        alpha: prioritization exponent, >= 0 (0 = uniform). FreshPER's reference uses 0.6.
        beta_0: initial IS exponent in [0, 1]. FreshPER's reference uses 0.4.
        beta_horizon: steps over which beta goes linearly from beta_0 (at t = 0) to 1; None keeps beta_0.
        eps: added to |signal| to form the base priority, >= 0; 1e-6 as in the FreshPER reference code
            (``DAPOConfig`` uses 0.1: with 1e-6 one zero-signal item crushes every IS weight, see there).
        seed: seed of the buffer's own ``np.random.Generator`` (PCG64).
        insert_at_max_priority: if True, a new item's base priority is the running maximum of all base
            priorities assigned so far, this batch's included (starting at 1.0), as in Schaul et al. and the
            FreshPER reference code; if False it is |signal| + eps, since the signal is known when the item is
            added.

    Not thread-safe: call it from one thread (the reference code's background decay thread raced with
    insertion; here nothing runs in the background).
    """

    def __init__(
        self,
        capacity: int,
        decay: AgeDecay,
        *,
        alpha: float,
        beta_0: float,
        beta_horizon: float | None,
        eps: float,
        seed: int,
        insert_at_max_priority: bool,
    ) -> None:
        if int(capacity) != capacity or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity}")
        if not (np.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be finite and >= 0, got {alpha}")
        if not 0 <= beta_0 <= 1:
            raise ValueError(f"beta_0 must be in [0, 1], got {beta_0}")
        if beta_horizon is not None and not beta_horizon > 0:
            raise ValueError(f"beta_horizon must be > 0 or None, got {beta_horizon}")
        if not (np.isfinite(eps) and eps >= 0):
            raise ValueError(f"eps must be finite and >= 0, got {eps}")
        self.capacity = int(capacity)
        self.decay = decay
        self.alpha = float(alpha)
        self.beta_0 = float(beta_0)
        self.beta_horizon = None if beta_horizon is None else float(beta_horizon)
        self.eps = float(eps)
        self.insert_at_max_priority = bool(insert_at_max_priority)
        self._offsets = tree_offsets(self.capacity)
        self._leaves = int(self._offsets[-2])  # where the trees' leaf level starts
        # A decay without kernel_params has its keys computed by _refresh alone; the kernels never read
        # these placeholder parameters for it (they are only told not to write keys).
        self._compiled = self.decay.kernel_params is not None
        self._key_params = (self.alpha, *(self.decay.kernel_params if self._compiled else (NONE, 1.0, 0.0)))
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._reset_storage()

    def _reset_storage(self) -> None:
        """Empty every slot and counter; configuration and RNG are untouched."""
        # An object array: gathering a batch is one C loop (3x faster than a list comprehension at 1e6).
        self._items = np.empty(self.capacity, dtype=object)
        self._ids = np.full(self.capacity, -1, dtype=np.int64)
        self._trees = new_trees(self._offsets, TREE_FILLS)
        self._log_base = np.zeros(self.capacity)
        self._n_added = 0
        self._step = -math.inf
        self._reference_step = 0.0
        self._shift = 0.0
        self._stale = False
        self._max_log_base = 0.0  # log of the running max base priority (insert_at_max_priority only)
        self._step_sum = 0.0

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return min(self._n_added, self.capacity)

    @property
    def size(self) -> int:
        """Number of items currently stored."""
        return len(self)

    @property
    def step(self) -> float:
        """The latest step ``t`` passed to ``add``, ``sample`` or ``probabilities`` (-inf before any)."""
        return self._step

    @property
    def reference_step(self) -> float:
        """The step that stored keys are relative to (moves at each rebase / refresh)."""
        return self._reference_step

    def beta(self, t: float) -> float:
        """IS exponent at step ``t``: beta_0 + (1 - beta_0) * min(1, t / beta_horizon)."""
        if self.beta_horizon is None:
            return self.beta_0
        return self.beta_0 + (1.0 - self.beta_0) * min(1.0, max(0.0, t) / self.beta_horizon)

    def metrics(
        self, batch: ReplaySample | None = None, successes: Sequence[bool] | np.ndarray | None = None
    ) -> dict[str, float]:
        """``replay/*`` metrics at the latest step: size, mean and max age (0 when empty), the decay factor
        d(max age) of the oldest item, and for a batch :func:`~algorithms.replay.metrics.batch_metrics` (ESS,
        mean and min IS weight, mean age; success share if ``successes`` of its items are given) and beta."""
        size = len(self)
        max_age = self._step - float(self._trees[MIN_STEP, 0]) if size else 0.0
        out = {
            "replay/size": float(size),
            "replay/mean_age": self._step - self._step_sum / size if size else 0.0,
            "replay/max_age": max_age,
            "replay/oldest_decay": float(self.decay.factor(np.array([max_age]))[0]),
        }
        if batch is not None and len(batch):
            out.update(batch_metrics(batch.is_weights, batch.ages, successes))
            out["replay/beta"] = batch.beta
        return out

    def probabilities(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Ids and sampling probabilities P(i) of every stored item at step ``t`` (O(N); for inspection)."""
        self._advance(t)
        size = len(self)
        if size and self._keys_need_refresh():
            self._refresh()
        keys = self._trees[SUM, self._leaves : self._leaves + size]
        return self._ids[:size].copy(), keys / self._trees[SUM, 0] if size else keys.copy()

    # ------------------------------------------------------------------ updates

    def add(
        self,
        items: Sequence[Any],
        signals: Sequence[float] | np.ndarray | None,
        t: float,
        collection_steps: Sequence[float] | np.ndarray | float | None = None,
    ) -> np.ndarray:
        """Store ``items`` at the current step ``t`` and return their unique ids.

        Args:
            items: objects to store, oldest first (of more than ``capacity`` items only the last ones stay).
            signals: one priority signal per item (|R_i| or |A_i| before the absolute value); the base
                priority is |signal| + eps. May be None only with ``insert_at_max_priority``.
            t: the current step; must not be smaller than any step passed before.
            collection_steps: each item's t_i (e.g. an earlier step for groups kept over from dynamic
                sampling), at most ``t``; defaults to ``t``.
        """
        # fromiter keeps each item as one object, even a list or an array.
        items = np.fromiter(items, dtype=object, count=len(items))
        n = items.shape[0]
        t = self._checked_step(t)
        if signals is None and not self.insert_at_max_priority:
            raise ValueError("signals are required unless insert_at_max_priority=True")
        steps = np.broadcast_to(
            np.asarray(t if collection_steps is None else collection_steps, dtype=np.float64), (n,)
        ).copy()
        if not np.all(np.isfinite(steps)) or np.any(steps > t):
            raise ValueError("collection_steps must be finite and <= t")
        if signals is None:
            log_base = np.full(n, self._max_log_base)
        else:
            log_base = self._log_base_priorities(signals, n)
            if self.insert_at_max_priority:
                self._max_log_base = max(self._max_log_base, float(log_base.max(initial=-math.inf)))
                log_base = np.full(n, self._max_log_base)
        self._advance(t)
        ids = np.arange(self._n_added, self._n_added + n, dtype=np.int64)
        self._n_added += n
        if n == 0:
            return ids
        keep = slice(max(0, n - self.capacity), n)
        kept_ids, log_base, steps = ids[keep], log_base[keep], steps[keep]
        slots = kept_ids % self.capacity

        evicted = self._ids[slots] >= 0
        old_steps = self._trees[MIN_STEP, self._leaves + slots[evicted]]
        self._step_sum += float(steps.sum()) - float(old_steps.sum())
        self._items[slots] = items[keep]
        self._ids[slots] = kept_ids
        out_of_range = write_leaves(
            self._trees,
            self._offsets,
            self._log_base,
            slots,
            log_base,
            steps,
            self._key_params,
            self._reference_step,
            self._shift,
            self._compiled and not self._stale,
            REBASE_EXPONENT,
        )
        self._stale |= not self._compiled
        if out_of_range:
            self._refresh()
        return ids

    def update_priorities(self, indices: np.ndarray, signals: Sequence[float] | np.ndarray) -> int:
        """Set the base priority of items ``indices`` (ids from a sample) to |signal| + eps.

        Ids whose slot was overwritten since they were sampled are ignored; for a repeated id the last signal
        wins. The collection step t_i is unchanged, so the age keeps counting from collection. Returns the
        number of entries of ``indices`` that were still stored (repeats counted).
        """
        ids = np.asarray(indices, dtype=np.int64).reshape(-1)
        log_base = self._log_base_priorities(signals, ids.shape[0])
        if self.insert_at_max_priority:
            live = self._ids[ids % self.capacity] == ids
            self._max_log_base = max(self._max_log_base, float(log_base[live].max(initial=-math.inf)))
        n_live, out_of_range = update_leaves(
            self._trees,
            self._offsets,
            self._log_base,
            self._ids,
            ids,
            log_base,
            self._key_params,
            self._reference_step,
            self._shift,
            self._compiled and not self._stale,
            REBASE_EXPONENT,
        )
        self._stale |= not self._compiled
        if out_of_range:
            self._refresh()
        return int(n_live)

    def sample(self, batch_size: int, t: float) -> ReplaySample:
        """Draw ``batch_size`` items i.i.d. with replacement from P(i) at the current step ``t``.

        Raises ValueError on an empty buffer. A batch larger than the buffer simply repeats items.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._advance(t)
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer: add items first")
        if self._keys_need_refresh():
            self._refresh()
        beta = self.beta(t)
        slots, ids, probs, weights, steps = draw(
            self._trees, self._offsets, self._ids, self._rng.random(batch_size), beta
        )
        return ReplaySample(
            items=self._items[slots].tolist(),
            indices=ids,
            probabilities=probs,
            is_weights=weights,
            ages=t - steps,
            beta=beta,
        )

    # ------------------------------------------------------------------ checkpointing

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: config, items, ids, tree leaves, counters, RNG state.

        Plain numpy arrays, Python scalars, lists and dicts (picklable if the items are). Arrays are copies;
        items are the stored objects themselves.
        """
        size, lo = len(self), self._leaves
        return {
            "format": STATE_FORMAT,
            "config": self._config(),
            "items": self._items[:size].tolist(),
            "ids": self._ids[:size].copy(),
            "log_base": self._log_base[:size].copy(),
            "leaves": self._trees[:, lo : lo + size].copy(),
            "n_added": self._n_added,
            "step": self._step,
            "reference_step": self._reference_step,
            "shift": self._shift,
            "stale": self._stale,
            "max_log_base": self._max_log_base,
            "step_sum": self._step_sum,
            "rng_state": copy.deepcopy(self._rng.bit_generator.state),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict()`` taken from a buffer with the same configuration (else ValueError)."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unknown replay state format {state.get('format')!r}")
        if state["config"] != self._config():
            raise ValueError(f"replay config mismatch: saved {state['config']}, this buffer {self._config()}")
        size, lo = len(state["items"]), self._leaves
        self._reset_storage()
        self._items[:size] = np.fromiter(state["items"], dtype=object, count=size)
        self._ids[:size] = state["ids"]
        self._log_base[:size] = state["log_base"]
        self._trees[:, lo : lo + size] = state["leaves"]
        self._build()
        self._n_added = int(state["n_added"])
        self._step = float(state["step"])
        self._reference_step = float(state["reference_step"])
        self._shift = float(state["shift"])
        self._stale = bool(state["stale"])
        self._max_log_base = float(state["max_log_base"])
        self._step_sum = float(state["step_sum"])
        self._rng.bit_generator.state = copy.deepcopy(state["rng_state"])

    # ------------------------------------------------------------------ internals

    def _config(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "decay": {"kind": type(self.decay).__name__, **dataclasses.asdict(self.decay)},
            "alpha": self.alpha,
            "beta_0": self.beta_0,
            "beta_horizon": self.beta_horizon,
            "eps": self.eps,
            "insert_at_max_priority": self.insert_at_max_priority,
        }

    def _log_base_priorities(self, signals: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
        s = np.asarray(signals, dtype=np.float64).reshape(-1)
        if s.shape[0] != n:
            raise ValueError(f"expected {n} signals, got {s.shape[0]}")
        log_base, valid = log_base_priorities(s, self.eps)
        if not valid:
            raise ValueError("signals must be finite, and |signal| + eps > 0 (use eps > 0 for zero signals)")
        return log_base

    def _checked_step(self, t: float) -> float:
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"step t must be finite, got {t}")
        if t < self._step:
            raise ValueError(f"step t must not decrease: got {t} after {self._step}")
        return t

    def _advance(self, t: float) -> None:
        self._step = t = self._checked_step(t)
        if not self.decay.shift_invariant and t != self._reference_step:
            self._stale = True

    def _keys_need_refresh(self) -> bool:
        """Stale polynomial keys, or a total so far below the scale of the last rebase (the items that set it
        were evicted or updated down) that the keys left may have underflowed (see the module docstring)."""
        total = self._trees[SUM, 0]
        return self._stale or not (math.isfinite(total) and total >= MIN_TOTAL)

    def _refresh(self) -> None:
        """Recompute every key against the latest step (vectorised) and rebuild the trees: one O(N) pass."""
        size, lo = len(self), self._leaves
        self._reference_step = self._step
        steps = self._trees[MIN_STEP, lo : lo + size]
        log_keys = self.alpha * (self._log_base[:size] + self.decay.log_weight(steps, self._reference_step))
        self._shift = float(log_keys.max()) if size else 0.0
        self._trees[MIN_KEY, lo : lo + size] = log_keys
        self._trees[SUM, lo : lo + size] = np.exp(log_keys - self._shift)
        build_sum(self._trees[SUM], self._offsets)
        build_min(self._trees[MIN_KEY], self._offsets)
        self._stale = False

    def _build(self) -> None:
        """Recompute every tree level above the leaves."""
        build_sum(self._trees[SUM], self._offsets)
        build_min(self._trees[MIN_KEY], self._offsets)
        build_min(self._trees[MIN_STEP], self._offsets)
