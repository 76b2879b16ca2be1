"""The README's speed block, written from the benchmark records under docs/results/benchmark/: one DAPO
iteration against TRL (``benchmarks.dapo_step --output``) and the learner's use of the CPU's matrix-product
peak on each CPU measured (``benchmarks.learner_step --utilization --output``). ``experiments.results_table``
writes it into README.md with the other tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from experiments.common.results_json import REPOSITORY, cpu_name

BENCHMARKS = REPOSITORY / "docs" / "results" / "benchmark"
DAPO_STEP = BENCHMARKS / "dapo-step" / "results.json"
UTILIZATION = BENCHMARKS / "learner-utilization"
BEGIN = (
    "<!-- speed-table: written by python -m experiments.results_table from docs/results/benchmark/; "
    "edit those -->"
)
END = "<!-- /speed-table -->"
VARIANTS = {
    "no-checkpointing": "checkpointing off (ours' default)",
    "checkpointing": "checkpointing on (TRL's)",
}
MODELS = {"frozen_lake": "tiny LM (default job)", "smollm2": "SmolLM2-135M"}


def link(path: Path) -> str:
    """A link to a record: its folder's README where it has one, else the results file."""
    readme = path.parent / "README.md"
    return f"[{path.parent.name}]({(readme if readme.exists() else path).relative_to(REPOSITORY)})"


def cpu(machine: dict[str, Any]) -> str:
    """``AMD EPYC, family 26 model 2 (avx512_bf16)``: the model, its generation where recorded, and the flag
    that decides the learner's dtype (amx_bf16, else avx512_bf16, else none: float32 only)."""
    flags = machine["cpu_flags"]
    kind = next((flag for flag in ("amx_bf16", "avx512_bf16") if flag in flags), "no native bf16")
    return f"{cpu_name(machine)} ({kind})"


def made(provenance: dict[str, Any]) -> str:
    dirty = ", uncommitted changes" if provenance["dirty"] else ""
    return f"commit {provenance['commit'][:7]}{dirty}, {provenance['date'][:10]}"


def dapo_step_lines(record: dict[str, Any], path: Path) -> list[str]:
    """The iteration table of a ``benchmarks.dapo_step`` record and its learner-vs-plain line."""
    work, ours, trl, ratios = record["workload"], record["ours"], record["trl"], record["ratios"]
    targets = record["targets"]
    variants = [variant for variant in VARIANTS if variant in ours and variant in trl]
    provenance = record["provenance"]
    lines = [
        'One DAPO iteration against one step of TRL\'s `GRPOTrainer(loss_type="dapo")` on the same work '
        f"(`python -m benchmarks.dapo_step`: Qwen2.5-0.5B's shape, {work['prompts']} prompts x "
        f"{work['group_size']} samples x {work['new_tokens']} new tokens, {work['model_dtype']} learners; "
        f"{provenance['machine']['cores']} cores of {cpu(provenance['machine'])}, {made(provenance)}; "
        f"{link(path)}):",
        "",
        "| | " + " | ".join(VARIANTS[variant] for variant in variants) + " |",
        "|---" * (len(variants) + 1) + "|",
    ]

    def row(label: str, cell) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(variant) for variant in variants) + " |")

    def spans(variant: str) -> dict[str, float]:
        return {name: span["wall_s"] for name, span in ours[variant]["spans"].items()}

    row(
        "ours: iteration, s (rollout / learn / weight sync)",
        lambda v: (
            f"{spans(v)['iteration']:.1f} ({spans(v)['rollout']:.1f} / {spans(v)['learn']:.1f} / "
            f"{spans(v)['weight_sync']:.1f})"
        ),
    )
    row(
        "TRL: step, s (its generation)",
        lambda v: f"{trl[v]['spans']['step']['wall_s']:.1f} ({trl[v]['spans']['generation']['wall_s']:.1f})",
    )
    row(
        f"time, ours / TRL (target <= {targets['time']})",
        lambda v: f"**{ratios['time'][f'ours ({v}) / TRL ({v})']['wall']:.2f}**",
    )
    row(
        f"peak memory, ours / TRL (target <= {targets['memory']})",
        lambda v: (
            f"{ours[v]['peak_rss_gib']:.1f} / {trl[v]['peak_rss_gib']:.1f} GiB, **{ratios['memory'][v]:.2f}**"
        ),
    )
    defaults = ratios["time"].get("ours (no-checkpointing) / TRL (checkpointing)")
    if defaults is not None:
        lines += [
            "",
            f"Each side at its default (ours without checkpointing, TRL with): **{defaults['wall']:.2f}**.",
        ]
    learner = ratios["learner_vs_plain"]
    if learner is not None:
        sentence = (
            f"Our learner against a plain transformers update of the same batch: **{learner['wall']:.2f}x** "
            f"its tokens per second (target >= {targets['learner_vs_plain']})"
        )
        if "peak_flop_s" in learner:
            sentence += (
                f"; it does {1 / learner['plain_over_learner_flops']:.2f}x the plain update's FLOPs (the "
                f"shared prompt once, the LM head where the loss reads) at "
                f"{learner['learner_share_of_peak']:.0%} of the CPU's {work['model_dtype']} matrix peak "
                f"({learner['peak_flop_s'] / 1e9:.0f} GFLOP/s, measured in the same run; the plain update "
                f"{learner['plain_share_of_peak']:.0%})"
            )
        lines += ["", sentence + "."]
    return lines


def utilization_rows() -> list[str]:
    """One row per run of each ``learner-utilization`` record, CPU by CPU."""
    lines = [
        "| CPU | learner | achieved | matrix peak, its dtype | share of the peak | record |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(UTILIZATION.glob("**/results.json")):
        for name, run in json.loads(path.read_text())["runs"].items():
            model, dtype = MODELS.get(name.split()[0], name.split()[0]), run["dtype"]
            lines.append(
                f"| {cpu(run['provenance']['machine'])} | {model}, {dtype} | "
                f"{run['achieved_flop_s'] / 1e9:.0f} GFLOP/s | {run['peak_flop_s'][dtype] / 1e9:.0f} GFLOP/s "
                f"| {run['utilization'][dtype]:.0%} | {link(path)} |"
            )
    return lines


def speed_table() -> str:
    """The speed block as README.md holds it, the markers included."""
    lines = [BEGIN, *dapo_step_lines(json.loads(DAPO_STEP.read_text()), DAPO_STEP)]
    lines += [
        "",
        "The learner's update on the default job's batch, in FLOP/s counted from the shapes it runs (padding "
        "excluded) against the CPU's matrix-product peak measured alternately in the same run (`python -m "
        "benchmarks.learner_step --learn BATCH --utilization`; SmolLM2 runs the same batch):",
        "",
        *utilization_rows(),
        END,
    ]
    return "\n".join(lines)
