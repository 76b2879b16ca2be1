"""The buffer's compiled hot path: one numba call per batch to draw, to add and to update priorities.

The buffer keeps three trees over its slots as the rows of one array ``trees`` (see ``priority_tree.py``):
``trees[SUM]`` a sum tree of the sampling keys exp(log_key - shift), ``trees[MIN_KEY]`` a min tree of the log
keys, ``trees[MIN_STEP]`` a min tree of the collection steps; ``log_base[slot]`` is log p_base and
``slot_ids[slot]`` the id of the item in the slot (-1 if empty). A log key is
alpha * (log p_base + log_weight(t_i, reference_step)) with ``log_weight`` from
:func:`~algorithms.replay.decay.log_weight_scalar` and ``key_params`` = (alpha, kind, tau, k).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from algorithms.replay.decay import log_weight_scalar
from algorithms.replay.priority_tree import find_prefix_sums, propagate_min, propagate_sum

SUM, MIN_KEY, MIN_STEP = 0, 1, 2
TREE_FILLS = (0.0, math.inf, math.inf)
KeyParams = tuple[float, int, float, float]  # (alpha, kind, tau, k)


@numba.njit(cache=True, nogil=True)
def log_base_priorities(signals: np.ndarray, eps: float) -> tuple[np.ndarray, bool]:
    """log(|signal| + eps) per signal, and whether every base priority |signal| + eps is finite and > 0."""
    out = np.empty(signals.shape[0])
    valid = True
    for j in range(signals.shape[0]):
        base = abs(signals[j]) + eps
        valid &= math.isfinite(base) and base > 0.0
        out[j] = math.log(base) if base > 0.0 else -np.inf
    return out, valid


@numba.njit(cache=True, nogil=True)
def draw(
    trees: np.ndarray, offsets: np.ndarray, slot_ids: np.ndarray, uniforms: np.ndarray, beta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One slot per uniform in [0, 1), drawn with probability key / total.

    Returns (slots, ids, probabilities, IS weights (P / min P)^-beta, collection steps), aligned.
    """
    leaves = offsets[offsets.shape[0] - 2]
    total = trees[SUM, 0]
    min_key = trees[MIN_KEY, 0]
    slots = find_prefix_sums(trees[SUM], offsets, uniforms * total)
    n = slots.shape[0]
    ids = np.empty(n, dtype=np.int64)
    probs = np.empty(n)
    weights = np.empty(n)
    steps = np.empty(n)
    for j in range(n):
        leaf = leaves + slots[j]
        ids[j] = slot_ids[slots[j]]
        probs[j] = trees[SUM, leaf] / total
        weights[j] = math.exp(-beta * (trees[MIN_KEY, leaf] - min_key))
        steps[j] = trees[MIN_STEP, leaf]
    return slots, ids, probs, weights, steps


@numba.njit(cache=True, nogil=True, inline="always")
def _write_keys(
    trees: np.ndarray,
    leaf: int,
    log_base: float,
    step: float,
    key_params: KeyParams,
    reference_step: float,
    shift: float,
    write_keys: bool,
    rebase_exponent: float,
) -> bool:
    """Write one leaf's key and log key. Returns True if the key is out of range; then, as when
    ``write_keys`` is False, a placeholder (0, +inf) is written for the caller's refresh to replace."""
    alpha, kind, tau, k = key_params
    if write_keys:
        log_key = alpha * (log_base + log_weight_scalar(kind, tau, k, step, reference_step))
        if log_key - shift <= rebase_exponent:
            trees[SUM, leaf] = math.exp(log_key - shift)
            trees[MIN_KEY, leaf] = log_key
            return False
    trees[SUM, leaf] = 0.0
    trees[MIN_KEY, leaf] = np.inf
    return write_keys


@numba.njit(cache=True, nogil=True)
def write_leaves(
    trees: np.ndarray,
    offsets: np.ndarray,
    log_base: np.ndarray,
    slots: np.ndarray,
    log_bases: np.ndarray,
    steps: np.ndarray,
    key_params: KeyParams,
    reference_step: float,
    shift: float,
    write_keys: bool,
    rebase_exponent: float,
) -> bool:
    """Store new items' log p_base and collection step in ``slots`` (in order: the last write to a repeated
    slot wins) with their keys, and update all three trees. Returns True if a key exceeded
    ``rebase_exponent`` (the caller must refresh every key)."""
    leaves = offsets[offsets.shape[0] - 2]
    out_of_range = False
    for j in range(slots.shape[0]):
        leaf = leaves + slots[j]
        log_base[slots[j]] = log_bases[j]
        trees[MIN_STEP, leaf] = steps[j]
        out_of_range |= _write_keys(
            trees,
            leaf,
            log_bases[j],
            steps[j],
            key_params,
            reference_step,
            shift,
            write_keys,
            rebase_exponent,
        )
    propagate_sum(trees[SUM], offsets, slots)
    propagate_min(trees[MIN_KEY], offsets, slots)
    propagate_min(trees[MIN_STEP], offsets, slots)
    return out_of_range


@numba.njit(cache=True, nogil=True)
def update_leaves(
    trees: np.ndarray,
    offsets: np.ndarray,
    log_base: np.ndarray,
    slot_ids: np.ndarray,
    ids: np.ndarray,
    log_bases: np.ndarray,
    key_params: KeyParams,
    reference_step: float,
    shift: float,
    write_keys: bool,
    rebase_exponent: float,
) -> tuple[int, bool]:
    """Set the log p_base of items ``ids`` (in order: the last write wins), skipping ids whose slot now holds
    another item, and update the key trees. Returns (entries written, out_of_range as in write_leaves)."""
    leaves = offsets[offsets.shape[0] - 2]
    capacity = slot_ids.shape[0]
    slots = np.empty(ids.shape[0], dtype=np.int64)
    n_live = 0
    out_of_range = False
    for j in range(ids.shape[0]):  # check all before writing anything
        if ids[j] < 0:
            raise ValueError("indices must be ids returned by add/sample (>= 0)")
    for j in range(ids.shape[0]):
        slot = ids[j] % capacity
        if slot_ids[slot] != ids[j]:
            continue
        leaf = leaves + slot
        log_base[slot] = log_bases[j]
        out_of_range |= _write_keys(
            trees,
            leaf,
            log_bases[j],
            trees[MIN_STEP, leaf],
            key_params,
            reference_step,
            shift,
            write_keys,
            rebase_exponent,
        )
        slots[n_live] = slot
        n_live += 1
    propagate_sum(trees[SUM], offsets, slots[:n_live])
    propagate_min(trees[MIN_KEY], offsets, slots[:n_live])
    return n_live, out_of_range
