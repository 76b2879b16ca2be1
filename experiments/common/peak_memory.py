"""The peak resident memory of this process while a block of code runs, sampled by a thread.

``ru_maxrss`` (``resource.getrusage``; the benchmarks' figure) is the high-water mark of the whole process
life: once one run of a comparison has peaked, every later run in the same process would report at least
that. :class:`PeakRss` instead reads ``VmRSS`` from ``/proc/self/status`` when the block starts, every
``interval_s`` from a daemon thread while it runs, and when it ends, and keeps the largest. A spike shorter
than the interval between two samples can be missed.

Only this process is measured: Ray actors (remote EnvRunners with ``num_env_runners > 0``, remote learners
with ``num_learners > 0``) and any other process the run starts are not counted. Where ``/proc`` is missing
(macOS, Windows) nothing is sampled and the peak is None.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

STATUS = Path("/proc/self/status")
SAMPLE_INTERVAL_S = 0.2


def resident_bytes() -> int | None:
    """This process's resident set size now (``VmRSS``), in bytes; None without ``/proc``."""
    try:
        text = STATUS.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # the kernel writes kB
    return None


class PeakRss:
    """``with PeakRss() as memory: ...``, then ``memory.peak_gib``: the largest resident set size sampled
    while the block ran (None without ``/proc``); ``start_bytes`` is the first sample."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.start_bytes: int | None = None
        self.peak_bytes: int | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="peak-rss", daemon=True)

    def __enter__(self) -> PeakRss:
        self.start_bytes = self._sample()
        if self.start_bytes is not None:
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self._sample()

    @property
    def peak_gib(self) -> float | None:
        return None if self.peak_bytes is None else self.peak_bytes / 2**30

    def _sample(self) -> int | None:
        now = resident_bytes()
        if now is not None:
            self.peak_bytes = now if self.peak_bytes is None else max(self.peak_bytes, now)
            self.samples += 1
        return now

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()
