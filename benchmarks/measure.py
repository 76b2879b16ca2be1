"""Measuring a benchmark run: the sides of a comparison alternated over repeats with each side's best repeat
kept, the process's peak resident memory, and the machine's load.

Timing on a shared machine moves with its load. Running every side once per repeat, in turn (a, b, a, b),
lets a change of load fall on all of them, and each side's best repeat is the one the load slowed least; the
benchmarks compare those. The load average is printed beside the timings so that a reader can judge them.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

Side = TypeVar("Side")
Record = TypeVar("Record")


def alternate(sides: Mapping[Side, Callable[[int], Record]], repeats: int) -> dict[Side, list[Record]]:
    """Runs every side once per repeat, in the order of ``sides`` (a, b, a, b, ...: the sides alternate
    within each repeat), each call given the repeat's index from 0 (for its progress line); returns each
    side's records in the order they ran."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}: each side needs one run to keep")
    records: dict[Side, list[Record]] = {side: [] for side in sides}
    for repeat in range(repeats):
        for side, run in sides.items():
            records[side].append(run(repeat))
    return records


def fastest(
    records: Mapping[Side, Iterable[Record]], seconds: Callable[[Record], float]
) -> dict[Side, Record]:
    """Each side's record with the fewest ``seconds`` (the earliest of equal ones): for timings, where
    lower is better."""
    return {side: min(runs, key=seconds) for side, runs in records.items()}


def highest(records: Mapping[Side, Iterable[Record]], rate: Callable[[Record], float]) -> dict[Side, Record]:
    """Each side's record with the highest ``rate`` (the earliest of equal ones): for throughputs such as
    tokens per second, where higher is better."""
    return {side: max(runs, key=rate) for side, runs in records.items()}


def peak_rss_gib() -> float:
    """This process's peak resident memory in GiB: ``ru_maxrss`` (KiB on Linux), the high-water mark of the
    process's whole life so far, so a figure read after a larger peak reports that peak. For the peak of one
    block of code, use ``PeakRss`` of experiments/common/peak_memory.py."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def load_average() -> str:
    """The machine's load averages over 1, 5 and 15 minutes, one decimal each: "1.9 1.4 1.2"."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())
