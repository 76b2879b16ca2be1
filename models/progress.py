"""Progress bars that read well both in a terminal and in a log file.

On a terminal, :class:`Progress` is tqdm's live bar. When its output is not a terminal (a log file, a pipe,
a CI job), tqdm would still redraw the bar with carriage returns, and a 10-minute run writes megabytes of
them into the log; there it writes one whole line instead, at most every ``LOG_INTERVAL_S`` seconds, and the
final state when it closes.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm

# A line every few seconds: a 10-minute run logs at most 120 lines per bar.
LOG_INTERVAL_S = 5.0


class Progress(tqdm):
    """``tqdm`` that writes throttled whole lines when its file is not a terminal."""

    def __init__(self, *args: Any, **kwargs: Any):
        stream = kwargs.get("file") or sys.stderr
        self.as_lines = not _is_terminal(stream)
        self._last_line = -float("inf")
        self._last_n: float | None = None
        if self.as_lines:
            kwargs.setdefault("mininterval", LOG_INTERVAL_S)
            kwargs.setdefault("ascii", True)
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if not self.as_lines:
            return super().display(msg, pos)
        now = time.monotonic()
        if msg != "" and now - self._last_line >= LOG_INTERVAL_S:
            self._write_line(str(self) if msg is None else msg)
            self._last_line = now
        return True

    def clear(self, nolock: bool = False) -> None:
        if not self.as_lines:  # a log line stays: nothing to erase before an external write
            super().clear(nolock)

    def close(self) -> None:
        if not self.as_lines or self.disable:
            super().close()
            return
        if self._last_n != self.n:  # the last state, unless it is already the last line
            self._write_line(str(self))
        self.disable = True
        self._decr_instances(self)

    def _write_line(self, line: str) -> None:
        self._last_n = self.n
        self.fp.write(line.rstrip() + "\n")
        self.fp.flush()


def quiet_library_bars_in_logs() -> None:
    """When stderr is not a terminal, turn off the carriage-return bars of transformers (weight loading)."""
    if not _is_terminal(sys.stderr):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False
