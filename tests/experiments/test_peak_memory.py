"""The peak resident memory of a block of code (experiments/common/peak_memory.py): what compare records per
run."""

from __future__ import annotations

import time

from experiments.common import peak_memory
from experiments.common.peak_memory import PeakRss

SIZE = 200 * 2**20


def test_the_peak_covers_memory_the_block_allocates():
    with PeakRss() as memory:
        block = b"\x01" * SIZE  # every page written, so resident
    del block
    assert memory.peak_gib > 0
    assert memory.peak_bytes - memory.start_bytes >= 0.95 * SIZE


def test_the_thread_catches_a_peak_freed_before_the_block_ends():
    """The end of the block no longer holds the memory: only a sample taken while it did sees the peak."""
    with PeakRss(interval_s=0.01) as memory:
        block = b"\x01" * SIZE
        seen = memory.samples
        for _ in range(1000):  # until the thread has sampled twice with the block resident
            if memory.samples >= seen + 2:
                break
            time.sleep(0.01)
        del block
    assert memory.peak_bytes - memory.start_bytes >= 0.95 * SIZE


def test_without_proc_the_peak_is_none(monkeypatch, tmp_path):
    monkeypatch.setattr(peak_memory, "STATUS", tmp_path / "no-proc" / "status")
    with PeakRss(interval_s=0.01) as memory:
        block = b"\x01" * 2**20
    del block
    assert memory.peak_gib is None and memory.start_bytes is None and memory.samples == 0
