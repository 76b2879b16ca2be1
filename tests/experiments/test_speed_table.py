"""The README's speed block reads what benchmarks.dapo_step records: built here from measurements by hand."""

import json

from benchmarks.dapo_step import Measured, Span, Workload, record
from experiments.common import speed_table
from experiments.common.results_json import dumps


def ours(iteration: float, learn: float, peak: float, plain: float | None = None) -> Measured:
    spans = {
        "iteration": Span(iteration, 2 * iteration),
        "rollout": Span(iteration - learn - 1.0, 2 * (iteration - learn - 1.0)),
        "learn": Span(learn, 2 * learn),
        "weight_sync": Span(1.0, 1.0),
    }
    measured = Measured(
        spans, generated_tokens=4096.0, batch_tokens=1000, peak_rss_gib=peak, allocator="tcmalloc"
    )
    if plain is not None:
        spans["learner update"], spans["plain update"] = Span(learn, 2 * learn), Span(plain, 2 * plain)
        measured.learner_flops = {"total": 10e12}
        measured.plain_flops = {"total": 16e12}
        measured.peak_flop_s = {"a bfloat16": 1e12, "a float32": 0.25e12}
        measured.peak_dtype = "bfloat16"
    return measured


def trl(step: float, peak: float) -> Measured:
    spans = {"step": Span(step, 4 * step), "generation": Span(step / 2, step)}
    return Measured(spans, generated_tokens=4096.0, peak_rss_gib=peak, allocator="tcmalloc")


def recorded(with_plain: bool) -> dict:
    work = Workload("/models/qwen", 8, 8, 64, 8, "bfloat16", 1)
    mine = {
        "no-checkpointing": ours(30.0, 20.0, 9.0, 40.0 if with_plain else None),
        "checkpointing": ours(40.0, 28.0, 7.0),
    }
    theirs = {"no-checkpointing": trl(75.0, 10.0), "checkpointing": trl(80.0, 8.0)}
    return json.loads(dumps(record(work, mine, theirs, "auto")))


def test_the_block_gives_each_variant_its_times_ratios_and_memory_against_the_recorded_targets():
    text = "\n".join(speed_table.dapo_step_lines(recorded(True), speed_table.DAPO_STEP))
    assert (
        "| ours: iteration, s (rollout / learn / weight sync) | 30.0 (9.0 / 20.0 / 1.0) "
        "| 40.0 (11.0 / 28.0 / 1.0) |" in text
    )
    assert "| time, ours / TRL (target <= 0.35) | **0.40** | **0.50** |" in text
    assert (
        "| peak memory, ours / TRL (target <= 0.9) | 9.0 / 10.0 GiB, **0.90** | 7.0 / 8.0 GiB, **0.88** |"
        in text
    )
    assert "Each side at its default (ours without checkpointing, TRL with): **0.38**." in text
    # 10 TFLOP in 20 s against a 1 TFLOP/s peak; the plain update 16 TFLOP in 40 s.
    assert "**2.00x** its tokens per second (target >= 2.0)" in text
    assert "0.62x the plain update's FLOPs" in text and "at 50% of the CPU's bfloat16 matrix peak" in text
    assert "the plain update 40%" in text


def test_without_the_arithmetic_the_learner_line_gives_the_speed_only():
    text = "\n".join(speed_table.dapo_step_lines(recorded(False), speed_table.DAPO_STEP))
    assert "Our learner" not in text  # no learner-vs-plain measurement in this record
    assert "| TRL: step, s (its generation) | 75.0 (37.5) | 80.0 (40.0) |" in text


def test_a_cpu_is_named_by_model_generation_and_its_bf16_kind():
    machine = {
        "cpu_model": "AMD EPYC",
        "cpu_generation": "family 26 model 2",
        "cpu_flags": ["avx2", "avx512_bf16"],
    }
    assert speed_table.cpu(machine) == "AMD EPYC, family 26 model 2 (avx512_bf16)"
    older = {"cpu_model": "Some Xeon", "cpu_flags": ["avx2", "avx512_bf16", "amx_bf16"]}
    assert speed_table.cpu(older) == "Some Xeon (amx_bf16)"
    assert speed_table.cpu({"cpu_model": "Old", "cpu_flags": ["avx2"]}) == "Old (no native bf16)"


def test_every_utilization_record_gives_one_row_per_run():
    rows = speed_table.utilization_rows()
    runs = sum(
        len(json.loads(p.read_text())["runs"]) for p in speed_table.UTILIZATION.glob("**/results.json")
    )
    assert len(rows) == 2 + runs and all(row.count("|") == 7 for row in rows)
