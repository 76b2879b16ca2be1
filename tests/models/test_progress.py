"""models.progress: a live bar on a terminal, throttled whole lines (no carriage returns) in a log file."""

from __future__ import annotations

import io

import pytest

from models import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    """A fake monotonic clock: each reading is ``step`` seconds after the previous one."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def run_bar(stream, monkeypatch: pytest.MonkeyPatch, seconds_per_reading: float, iterations: int = 40) -> str:
    monkeypatch.setattr(progress.time, "monotonic", Clock(seconds_per_reading))
    with progress.Progress(range(iterations), desc="train", file=stream, mininterval=0) as bar:
        for index in bar:
            bar.set_postfix(step=index)
            if index == 5:
                bar.write("a log line", file=stream)
    return stream.getvalue()


def test_a_log_file_gets_whole_lines_every_few_seconds(monkeypatch):
    # One clock reading per display call, a second apart: one line per LOG_INTERVAL_S seconds.
    text = run_bar(io.StringIO(), monkeypatch, seconds_per_reading=1.0)
    assert "\r" not in text
    lines = text.splitlines()
    assert "a log line" in lines
    bars = [line for line in lines if line.startswith("train:")]
    assert 3 <= len(bars) < 40, "throttled, not one line per update"
    assert bars[-1].startswith("train: 100%") and "40/40" in bars[-1], "the final state is the last line"
    assert len(bars) == len(set(bars)), "no line repeated"


def test_fast_updates_in_a_log_write_only_the_first_and_last_lines(monkeypatch):
    text = run_bar(io.StringIO(), monkeypatch, seconds_per_reading=0.001)
    bars = [line for line in text.splitlines() if line.startswith("train:")]
    assert len(bars) == 2 and "0/40" in bars[0] and "40/40" in bars[1]


def test_a_terminal_gets_the_live_bar(monkeypatch):
    text = run_bar(Terminal(), monkeypatch, seconds_per_reading=1.0)
    assert "\r" in text  # tqdm's redraws in place


def test_library_bars_are_off_in_a_log(monkeypatch):
    from transformers.utils import logging as hf_logging

    monkeypatch.setattr(progress.sys, "stderr", io.StringIO())
    try:
        progress.quiet_library_bars_in_logs()
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.enable_progress_bar()
