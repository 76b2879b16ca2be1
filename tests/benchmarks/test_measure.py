"""benchmarks/measure.py: the sides alternate within each repeat, each side's best record is kept in the
stated direction (fewest seconds, highest rate), and the process's peak memory and the load read sensibly."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from benchmarks.measure import alternate, fastest, highest, load_average, peak_rss_gib


def test_the_sides_alternate_within_each_repeat_and_keep_their_records_in_order():
    calls = []

    def side(name: str):
        def run(repeat: int) -> str:
            calls.append((repeat, name))
            return f"{name}{repeat}"

        return run

    records = alternate({"b": side("b"), "a": side("a"), "c": side("c")}, repeats=3)
    assert calls == [(r, name) for r in range(3) for name in ("b", "a", "c")]  # b a c, b a c, b a c
    assert records == {"b": ["b0", "b1", "b2"], "a": ["a0", "a1", "a2"], "c": ["c0", "c1", "c2"]}
    assert list(records) == ["b", "a", "c"]


@pytest.mark.parametrize("repeats", [0, -1])
def test_no_repeat_is_refused_naming_the_count(repeats):
    with pytest.raises(ValueError, match=f"repeats must be >= 1, got {repeats}"):
        alternate({"a": lambda _repeat: 1.0}, repeats)


@dataclass(frozen=True)
class Run:
    seconds: float
    tokens: int


def test_fastest_keeps_each_sides_record_with_the_fewest_seconds():
    records = {
        "runner": [Run(3.0, 10), Run(2.0, 11), Run(2.5, 12)],
        "raw": [Run(1.0, 20), Run(4.0, 21)],
    }
    assert fastest(records, seconds=lambda run: run.seconds) == {"runner": Run(2.0, 11), "raw": Run(1.0, 20)}


def test_fastest_keeps_the_earliest_of_equal_times():
    records = {"a": [Run(1.0, 1), Run(1.0, 2)]}
    assert fastest(records, seconds=lambda run: run.seconds)["a"].tokens == 1


def test_fastest_reads_the_seconds_through_the_key():
    records = {"full": [{"update_s": [5.0, 4.0]}, {"update_s": [3.0]}], "lora": [{"update_s": [2.0, 6.0]}]}
    best = fastest(records, seconds=lambda record: min(record["update_s"]))
    assert best == {"full": {"update_s": [3.0]}, "lora": {"update_s": [2.0, 6.0]}}


def test_highest_keeps_each_sides_record_with_the_highest_rate():
    records = {"hf": [100.0, 140.0, 120.0], "vllm": [900.0, 800.0]}
    assert highest(records, rate=lambda tokens_per_s: tokens_per_s) == {"hf": 140.0, "vllm": 900.0}
    assert fastest(records, seconds=lambda value: value) == {"hf": 100.0, "vllm": 800.0}  # the other way


def test_the_peak_resident_memory_is_positive_and_never_falls():
    first = peak_rss_gib()
    assert 0 < first <= peak_rss_gib()
    assert first < 1024  # GiB, not KiB or bytes: this test process holds far less than a TiB


def test_the_load_average_is_three_figures_with_one_decimal():
    assert re.fullmatch(r"\d+\.\d \d+\.\d \d+\.\d", load_average())
