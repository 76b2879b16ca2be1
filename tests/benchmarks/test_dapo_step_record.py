"""benchmarks.dapo_step's figures: the ratios it prints and records, from measurements built by hand."""

import json

import pytest

from benchmarks.dapo_step import Measured, Span, Workload, ratios, record
from experiments.common.results_json import dumps


def ours(iteration: float, learn: float, peak: float, plain: float | None = None) -> Measured:
    spans = {
        "iteration": Span(iteration, 2 * iteration),
        "rollout": Span(iteration - learn - 1.0, 2 * (iteration - learn - 1.0)),
        "learn": Span(learn, 2 * learn),
        "weight_sync": Span(1.0, 1.0),
    }
    if plain is not None:
        spans["learner update"] = Span(learn, 2 * learn)
        spans["plain update"] = Span(plain, 3 * plain)
    return Measured(spans, generated_tokens=4096.0, batch_tokens=1000, peak_rss_gib=peak, allocator="tcmalloc")


def trl(step: float, peak: float) -> Measured:
    spans = {"step": Span(step, 4 * step), "generation": Span(step / 2, step)}
    return Measured(spans, generated_tokens=4096.0, peak_rss_gib=peak, allocator="tcmalloc")


def test_ratios_pair_every_variant_of_ours_with_every_variant_of_trl():
    found = ratios(
        {"no-checkpointing": ours(30.0, 20.0, 9.0, plain=40.0), "checkpointing": ours(40.0, 28.0, 7.0)},
        {"no-checkpointing": trl(75.0, 10.0), "checkpointing": trl(80.0, 8.0)},
    )
    assert set(found["time"]) == {
        f"ours ({mine}) / TRL ({theirs})"
        for mine in ("no-checkpointing", "checkpointing")
        for theirs in ("no-checkpointing", "checkpointing")
    }
    pair = found["time"]["ours (no-checkpointing) / TRL (checkpointing)"]
    assert pair["wall"] == pytest.approx(30.0 / 80.0)
    assert pair["cpu"] == pytest.approx(60.0 / 320.0)
    # 2 epochs: rollout 9 + 2 x learn 20 + sync 1 = 50 s of wall time.
    assert pair["two_epochs_wall"] == pytest.approx(50.0 / 80.0)
    assert found["memory"] == {"no-checkpointing": pytest.approx(0.9), "checkpointing": pytest.approx(7 / 8)}
    learner = found["learner_vs_plain"]
    assert learner["wall"] == pytest.approx(2.0)
    assert learner["cpu"] == pytest.approx(120.0 / 40.0)
    assert learner["learner_tokens_per_s"] == pytest.approx(1000 / 20.0)


def test_without_trl_only_ours_is_recorded():
    found = ratios({"checkpointing": ours(40.0, 28.0, 7.0)}, {})
    assert found == {"time": {}, "memory": {}, "learner_vs_plain": None}


def test_the_record_is_json_with_provenance_and_both_sides():
    work = Workload("/models/qwen", 8, 8, 64, 8, "bfloat16", 1)
    made = record(work, {"checkpointing": ours(40.0, 28.0, 7.0)}, {"checkpointing": trl(80.0, 8.0)}, "auto")
    saved = json.loads(dumps(made))
    assert {"command", "commit", "date", "machine"} <= set(saved["provenance"])
    assert saved["workload"]["model"] == "qwen" and saved["workload"]["prompts"] == 8
    assert saved["ours"]["checkpointing"]["spans"]["learn"] == {"wall_s": 28.0, "cpu_s": 56.0}
    assert saved["trl"]["checkpointing"]["peak_rss_gib"] == 8.0
    assert saved["ratios"]["time"]["ours (checkpointing) / TRL (checkpointing)"]["wall"] == pytest.approx(0.5)
