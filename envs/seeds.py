"""Disjoint seed ranges for training, validation and test tasks.

``reset(seed=s)`` fully determines a task, so a seed range is a task split. The ranges never overlap, so no
test task is ever trained on (an agent env suite's test seeds once overlapped its training seeds).
"""

from __future__ import annotations

import hashlib
import numbers

TRAIN = range(0, 10_000_000)
VALIDATION = range(10_000_000, 10_100_000)
TEST = range(20_000_000, 20_100_000)

SPLITS = {"train": TRAIN, "validation": VALIDATION, "test": TEST}

# Shares of the task-content hash space that belong to each split (percent buckets). A generated task's
# split is decided by its content, not its seed: two seeds of different splits can draw the same map, so a
# seed split alone leaks tasks (6-12% of FrozenLake and Sokoban validation maps were training maps).
CONTENT_BUCKETS = {"train": range(0, 90), "validation": range(90, 95), "test": range(95, 100)}


def seeds(split: str, count: int, *, offset: int = 0) -> list[int]:
    """The first ``count`` seeds of ``split`` after ``offset``: a fixed, reproducible task set."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {sorted(SPLITS)}")
    seed_range = SPLITS[split]
    # A negative count would slice from the end: seeds("train", -1) would be 9,999,999 seeds.
    for name, value in (("count", count), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if offset + count > len(seed_range):
        raise ValueError(f"{split} holds {len(seed_range)} seeds; asked for {count} after offset {offset}")
    return list(seed_range[offset : offset + count])


def split_of_content(content: str | bytes) -> str:
    """The split a task belongs to, from a stable hash of its content (map text, level, problem text)."""
    data = content.encode() if isinstance(content, str) else content
    bucket = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") % 100
    return next(name for name, buckets in CONTENT_BUCKETS.items() if bucket in buckets)


def split_of(seed: int) -> str | None:
    """The split a seed belongs to, or None when it is outside all of them."""
    for name, seed_range in SPLITS.items():
        if seed in seed_range:
            return name
    return None


def split_of_reset_seed(seed: int | None) -> str:
    """The split whose tasks ``reset(seed=seed)`` draws: train for None, the seed's own split otherwise.

    A seed outside every split range is an error: it would draw tasks of no declared split (or, worse, of
    the test split) without anyone noticing.
    """
    if seed is None:
        return "train"
    split = split_of(seed)
    if split is None:
        ranges = ", ".join(f"{name} [{r.start:,}, {r.stop:,})" for name, r in SPLITS.items())
        raise ValueError(
            f"reset seed {seed} is outside every split range ({ranges}); use envs.seeds.seeds(split, n)"
        )
    return split
