"""benchmarks.dapo_step's figures: the ratios it prints and records, from measurements built by hand."""

import json
from types import SimpleNamespace

import pytest
from transformers import Qwen2Config, Qwen2ForCausalLM

from benchmarks.dapo_step import Measured, Span, Workload, plain_update_flops, ratios, record
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
    return Measured(
        spans, generated_tokens=4096.0, batch_tokens=1000, peak_rss_gib=peak, allocator="tcmalloc"
    )


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


def test_the_arithmetic_reads_each_update_against_the_best_peak_in_the_learners_dtype():
    measured = ours(30.0, 20.0, 9.0, plain=40.0)
    measured.learner_flops = {"linear": 8e12, "attention": 1e12, "head": 1e12, "total": 10e12}
    measured.plain_flops = {"linear": 12e12, "attention": 1e12, "head": 3e12, "total": 16e12}
    measured.peak_flop_s = {"a bfloat16": 0.8e12, "b bfloat16": 1e12, "a float32": 0.2e12, "b float32": 3e12}
    measured.peak_dtype = "bfloat16"
    found = ratios({"no-checkpointing": measured}, {})["learner_vs_plain"]
    assert found["peak_flop_s"] == 1e12
    assert found["learner_share_of_peak"] == pytest.approx(10e12 / 20.0 / 1e12)
    assert found["plain_share_of_peak"] == pytest.approx(16e12 / 40.0 / 1e12)
    assert found["plain_over_learner_flops"] == pytest.approx(1.6)
    assert found["learner_update_at_peak_s"] == pytest.approx(10.0)


def test_the_plain_update_is_counted_on_every_token_with_the_head_run_once():
    # Per layer of this decoder: q 8x8 + k 8x4 + v 8x4 + o 8x8 + gate, up, down 8x16 = 576 weights; head 32x8.
    config = Qwen2Config(
        vocab_size=32,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    rows = [SimpleNamespace(token_ids=[1] * length) for length in (5, 3, 4)]
    flops = plain_update_flops(Qwen2ForCausalLM(config), rows, micro=2)
    tokens, pairs = 12, 15 + 6 + 10
    assert flops["linear"] == 6 * 2 * 576 * tokens
    assert flops["attention"] == 3 * 2 * 2 * 8 * pairs * 2
    assert flops["head"] == 3 * 2 * 256 * tokens  # forward once, the input's and the weight's gradients
    assert flops["total"] == flops["linear"] + flops["attention"] + flops["head"]
