"""Where a DAPO iteration's time goes, for the tiny model and SmolLM2 at their scales.

``iteration`` mode builds DAPO at the shipped scale (tiny, or smollm2 for ``--model smollm2``) through
``experiments.common.run_config.build_config``, on-policy, with dynamic sampling off (so every group trains:
the zero-shot SmolLM2 fails most tasks and a filtered iteration would train nothing), an in-process EnvRunner
and learner, and runs one untimed warm-up iteration then ``--iterations`` timed ones. Printed per iteration:
DAPO's own timers (rollout / learn / weight sync), the machine's load, and at the end the process's peak RSS
(engine, KV cache, learner and AdamW state all live in this one process). ``--save-batch`` pickles the last
fresh batch.

``learn`` mode times the learner alone on a saved batch (no engine): ``update_from_trajectories`` under the
given dtype / shared-prefix / micro-batch settings, ``--repeats`` times after one warm-up, and (``--drift``)
the learner's bf16-autocast logprobs against its fp32 ones on the response tokens, and the no-grad forward
that the mismatch correction adds (``_learner_logprobs``). Each repeat starts from the same weights and
optimizer state, so repeats time the same work.

    python -m benchmarks.learner_step --model smollm2 --save-batch /tmp/smol_math.pkl
    python -m benchmarks.learner_step --settings experiments/settings/frozen_lake_smollm2.yaml --iterations 2
    python -m benchmarks.learner_step --model smollm2 --learn /tmp/smol_math.pkl \
        --model-dtype bfloat16 --drift
    python -m benchmarks.learner_step --settings experiments/settings/frozen_lake_smollm2.yaml \
        --learn /tmp/frozen_lake.pkl --lora-vs-full 16 --output docs/results/benchmark/lora-vs-full

``--utilization`` (learn and iteration modes) measures in the same run, alternating with the updates, the
CPU's matrix-product peak (benchmarks/flops.py: a SmolLM2-shaped [4096 x 576] @ [576 x 1536] and a square
2048 product, best of several, at the learner's torch threads) in the learner's dtype and in float32, and
prints the learner's FLOP/s (counted from the shapes run, padding excluded: benchmarks/flops.py) against it,
beside a torch.profiler split of one update: matrix products, attention, element-wise and other ops, casts,
optimizer, and Python/other (the rest of the wall time). In learn mode ``--output DIR`` adds the run to
DIR/results.json.

    python -m benchmarks.learner_step --model <tiny model dir> --scale tiny \
        --settings experiments/settings/frozen_lake.yaml --learn /tmp/fl.pkl --utilization --repeats 3

``--lora-vs-full RANK`` (learn mode) times full training against LoRA of that rank on the saved batch in one
run: each arm in its own learn-mode process (its own peak RSS), the arms alternating, and prints trainable
parameters, the fastest update, tokens/s, peak RSS and the time against full training.

Wall-clock numbers on a shared 2-core machine move with its load (printed): compare runs made back to back.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import dataclasses
import functools
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from algorithms.dapo import DAPOConfig
from algorithms.dapo.collate import collate
from algorithms.trajectory import Trajectory
from benchmarks.flops import counting_flops, matrix_peaks
from benchmarks.measure import alternate, fastest, load_average, peak_rss_gib
from benchmarks.requirements import parse_and_check
from experiments.common.results_json import dtype_record, provenance, write_json
from experiments.common.run_config import RunSettings, build_config, load_settings, parse_set, starting_model
from models.dtype import DTYPES

PROG = "python -m benchmarks.learner_step"

REQUIRES = ("vllm",)
ENV_ID = "freshrl/Math-v0"


def learner_config(args: argparse.Namespace) -> DAPOConfig:
    """The config through the one builder (experiments.common.run_config): with ``--settings``, that run's
    config exactly as ``experiments.train`` builds it (its warm-started model, env config, dynamic sampling
    and replay); else the shipped scale on-policy and without dynamic sampling. Then the command line's
    ``--set`` keys, dtypes and learner settings on top."""
    overrides: dict[str, Any] = {}
    if args.settings:
        settings = load_settings(args.settings)
        model = starting_model(settings)
    else:
        model = args.model
        if args.model == "tiny":
            from algorithms.warm_start import tiny_base_path

            model = str(tiny_base_path(args.env))
        settings = RunSettings(env=args.env, scale=args.scale, model=model)
        overrides.update({"dynamic_sampling": False, "replay_mode": "on_policy"})
    overrides.update(parse_set(args.set))
    if args.model_dtype:
        overrides["model_dtype"] = args.model_dtype
    if args.engine_dtype:
        overrides["engine_dtype"] = args.engine_dtype
    if args.share_prefix is not None:
        overrides["share_prefix"] = args.share_prefix == "on"
    if args.micro_batch_size:
        overrides["micro_batch_size"] = args.micro_batch_size
    if args.mismatch_correction is not None:
        overrides["mismatch_correction"] = {"on": True, "off": False}[args.mismatch_correction]
    config = build_config(dataclasses.replace(settings, model=model), overrides)
    dtypes = config.resolved_dtypes()
    print(f"learner dtype {dtypes['model_dtype_reason']}; engine dtype {dtypes['engine_dtype_reason']}")
    return config


def describe(trajectories: list[Trajectory]) -> str:
    tokens = [len(t.token_ids) for t in trajectories]
    trained = [float(np.sum(t.loss_mask[1:])) for t in trajectories]
    zero_adv = sum(t.advantage == 0 for t in trajectories)
    return (
        f"{len(trajectories)} trajectories, {sum(tokens)} tokens (max {max(tokens)}), "
        f"{sum(trained):.0f} response tokens, {zero_adv} with advantage 0"
    )


def run_iterations(args: argparse.Namespace) -> None:
    from experiments.common.ray_session import start_ray

    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    start_ray()
    config = learner_config(args)
    algo = config.build_algo()
    learn, timer = algo.update_learners, algo._timer
    captured: list[list[Trajectory]] = []
    cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def cpu_timer(key: str):  # DAPO's timer, plus this process's CPU seconds (engine threads included)
        started = time.process_time()
        with timer(key):
            yield
        cpu[key] = time.process_time() - started

    def spy_learn(trajectories, weights, tag):
        if tag == "fresh":
            captured.append(list(trajectories))
        return learn(trajectories, weights, tag)

    algo.update_learners, algo._timer = spy_learn, cpu_timer
    engine_calls = count_engine_calls()
    updates = count_updates(algo.learner_group._learner)
    rows = []
    learns: list[dict[str, Any]] = []  # --utilization: each timed iteration's learn seconds and FLOPs
    peaks: list[dict[str, float]] = []
    for i in range(1 + args.iterations):
        engine_calls.clear()
        updates.clear()
        started = time.perf_counter()
        with counting_flops() as flops:
            result = algo.train()
        total = time.perf_counter() - started
        split = {
            name: result.get(f"timing/{name}_s", float("nan")) for name in ("rollout", "learn", "weight_sync")
        }
        label = "warm-up" if i == 0 else f"timed {i}"
        trained = describe(captured[-1]) if captured else "nothing trained"
        print(
            f"{args.label} {label}: {total:.1f} s (rollout {split['rollout']:.1f}, "
            f"learn {split['learn']:.1f}, sync {split['weight_sync']:.1f}; CPU s: rollout "
            f"{cpu.get('timing/rollout_s', 0):.1f}, learn {cpu.get('timing/learn_s', 0):.1f}, sync "
            f"{cpu.get('timing/weight_sync_s', 0):.1f}); {trained}; "
            f"load {load_average()}",
            flush=True,
        )
        print(
            f"  engine: {engine_calls['calls']} generate calls in {engine_calls['seconds']:.1f} s, "
            f"{engine_calls['prompts']} prompts of {engine_calls['prompt_tokens']} tokens in all, "
            f"{engine_calls['sampled_tokens']} tokens sampled; learner: "
            + "; ".join(
                f"{tag} {updates[tag + '_rows']} rows of {updates[tag + '_tokens']} tokens in "
                f"{updates[tag + '_seconds']:.1f} s"
                for tag in dict.fromkeys(key.rsplit("_", 1)[0] for key in updates)
            ),
            flush=True,
        )
        if i:
            rows.append({**split, **{f"cpu_{k.split('/')[1][:-2]}": v for k, v in cpu.items()}})
        if i and args.utilization:  # the peak between iterations, so that the load falls on both
            learns.append({"seconds": split["learn"], "flops": dict(flops), "load": load_average()})
            peaks.append(matrix_peaks(config.resolved_dtypes()["model_dtype"]))
    means = {name: float(np.mean([r[name] for r in rows])) for name in rows[0]}
    print(
        f"{args.label} mean of {len(rows)}: rollout {means['rollout']:.1f} s, learn {means['learn']:.1f} s, "
        f"sync {means['weight_sync']:.1f} s (CPU s: rollout {means['cpu_rollout']:.1f}, learn "
        f"{means['cpu_learn']:.1f}, sync {means['cpu_weight_sync']:.1f}); peak RSS {peak_rss_gib():.2f} GiB",
        flush=True,
    )
    # The last batch again, in this process: shapes now seen before (first-call costs) vs the same batch in
    # learn mode's process (threads and memory shared with the engine).
    learner = algo.learner_group._learner
    for repeat in range(2):
        started = time.perf_counter()
        learner.update_from_trajectories(captured[-1])
        print(
            f"  same batch again ({repeat + 1}): {time.perf_counter() - started:.1f} s, torch threads "
            f"{torch.get_num_threads()}, load {load_average()}",
            flush=True,
        )
    if args.utilization:
        profiled = profile_split(lambda: learner.update_from_trajectories(captured[-1]))
        # The profile is of the last batch's update again: the learn phase may hold several updates.
        utilization(peaks, learns, profiled, config.resolved_dtypes()["model_dtype"], "learn phase")
    if args.save_batch and captured:
        with open(args.save_batch, "wb") as handle:
            pickle.dump(captured[-1], handle)
    algo.stop()


def count_engine_calls() -> collections.Counter:
    """Counts every ``RolloutEngine.generate`` call from now on in this process (calls, prompts, prompt and
    sampled tokens, seconds): the counter is cleared by the caller, the counting stays."""
    from models.engine import RolloutEngine

    counts: collections.Counter = collections.Counter()
    generate = RolloutEngine.generate

    def counted(engine, prompts, sampling):
        started = time.perf_counter()
        completions = generate(engine, prompts, sampling)
        counts["seconds"] += time.perf_counter() - started
        counts["calls"] += 1
        counts["prompts"] += len(prompts)
        counts["prompt_tokens"] += sum(len(prompt.token_ids) for prompt in prompts)
        counts["sampled_tokens"] += sum(len(c.token_ids) for samples in completions for c in samples)
        return completions

    RolloutEngine.generate = counted
    return counts


def count_updates(learner) -> collections.Counter:
    """Counts the learner's updates by tag (fresh, replay, backfill): rows, tokens, seconds."""
    counts: collections.Counter = collections.Counter()
    update = learner.update_from_trajectories

    def counted(trajectories, weights=None, **kwargs):
        started = time.perf_counter()
        result = update(trajectories, weights, **kwargs)
        tag = kwargs.get("tag", "fresh")
        counts[f"{tag}_seconds"] += time.perf_counter() - started
        counts[f"{tag}_rows"] += len(trajectories)
        counts[f"{tag}_tokens"] += sum(len(t.token_ids) for t in trajectories)
        return result

    learner.update_from_trajectories = counted
    return counts


def run_learn(args: argparse.Namespace, argv: list[str] | None) -> None:
    from envs.base import AnyText

    with open(args.learn, "rb") as handle:
        batch: list[Trajectory] = pickle.load(handle)
    print(f"batch: {describe(batch)}", flush=True)
    config = learner_config(args)
    text = AnyText()
    learner = config.build_learner(spaces={"default_policy": (text, text)})
    learner.build()
    module = learner.module["default_policy"]
    (module_id,) = list(learner.module.keys())
    optimizer = learner.get_optimizer(module_id)
    weights = copy.deepcopy(module.model.state_dict())
    optimizer_state = copy.deepcopy(optimizer.state_dict())
    model_dtype = config.resolved_dtypes()["model_dtype"]

    def update(i: int) -> float:
        module.model.load_state_dict(weights)
        optimizer.load_state_dict(optimizer_state)
        started, cpu = time.perf_counter(), time.process_time()
        learner.update_from_trajectories(trimmed(batch, i) if args.vary_shapes else batch)
        seconds = time.perf_counter() - started
        print(
            f"  update {'warm-up' if i == 0 else i}: {seconds:.1f} s "
            f"(CPU {time.process_time() - cpu:.1f} s), load {load_average()}",
            flush=True,
        )
        return seconds

    times = [update(0)]
    if args.utilization:

        def counted(i: int) -> dict[str, Any]:
            with counting_flops() as flops:
                seconds = update(i + 1)
            return {"seconds": seconds, "flops": dict(flops), "load": load_average()}

        sides = {"update": counted, "peak": lambda i: matrix_peaks(model_dtype)}
        records = alternate(sides, args.repeats)
        times += [r["seconds"] for r in records["update"]]
        split = profile_split(lambda: update(0))
        report = utilization(records["peak"], records["update"], split, model_dtype)
        if args.output:
            key = f"{args.label} {model_dtype}"
            path = Path(args.output) / "results.json"
            results = json.loads(path.read_text()) if path.exists() else {"runs": {}}
            results["runs"][key] = {
                "provenance": provenance(PROG, sys.argv[1:] if argv is None else argv, config),
                "batch": {"file": args.learn, "description": describe(batch)},
                "torch_threads": torch.get_num_threads(),
                **report,
            }
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json(path, results)
            print(f"wrote {key!r} into {path}", flush=True)
    else:
        times += [update(i) for i in range(1, 1 + args.repeats)]
    if args.result_json:
        trainable = sum(p.numel() for p in module.model.parameters() if p.requires_grad)
        record = {
            "update_s": times[1:],
            "peak_rss_gib": peak_rss_gib(),
            "trainable_parameters": trainable,
            "dtypes": dtype_record(config),
        }
        Path(args.result_json).write_text(json.dumps(record))
    print(
        f"learn ({args.label}, {model_dtype}, share_prefix {config.share_prefix}, micro-batch "
        f"{config.micro_batch_size}, mismatch correction {config.resolved_mismatch_correction()}): "
        f"{np.mean(times[1:]):.2f} s (min {min(times[1:]):.2f}); peak RSS {peak_rss_gib():.2f} GiB",
        flush=True,
    )
    if args.drift:
        module.model.load_state_dict(weights)
        measure_drift(module, batch, config.micro_batch_size)
        started = time.perf_counter()
        learner._learner_logprobs(batch)
        print(
            f"mismatch-correction forward (no grad, {model_dtype}): {time.perf_counter() - started:.2f} s",
            flush=True,
        )


# The profile's categories, by the name of the op or of its nearest enclosing op that has one (a cast that
# autocast makes inside aten::linear is a cast; aten::t inside it is part of the product).
PROFILE_CATEGORIES = {
    "attention": re.compile(r"scaled_dot_product|flash_attention", re.IGNORECASE),
    "matrix products": re.compile(r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv)$|mkldnn_matmul"),
    "casts": re.compile(r"^aten::(to|_to_copy|_autocast_to_\w+)$"),
    "optimizer": re.compile(r"adamw|^Optimizer\.", re.IGNORECASE),
}
OTHER_OPS = "element-wise & other ops"
PYTHON = "Python/other"


def profile_category(event) -> str | None:
    """The category of a profiled op (``PROFILE_CATEGORIES``, else ``OTHER_OPS`` for an aten op), from it
    or its nearest enclosing op that has one; None for the rest (autograd's and Python's own records)."""
    enclosing = event
    while enclosing is not None:
        for category, pattern in PROFILE_CATEGORIES.items():
            if pattern.search(enclosing.name):
                return category
        enclosing = enclosing.cpu_parent
    return OTHER_OPS if event.name.startswith("aten::") else None


def profile_split(run) -> dict[str, float]:
    """Seconds of one ``run()`` under torch.profiler by category: each op's self time in its category, and
    ``PYTHON`` the wall time that no op took (Python, autograd's bookkeeping, the profiler's own cost); and
    "wall"."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        started = time.perf_counter()
        run()
        wall = time.perf_counter() - started
    seconds = dict.fromkeys([*PROFILE_CATEGORIES, OTHER_OPS], 0.0)
    for event in profile.events():
        category = profile_category(event)
        if category:
            seconds[category] += event.self_cpu_time_total / 1e6
    seconds[PYTHON] = wall - sum(seconds.values())
    return {**seconds, "wall": wall}


def utilization(
    peaks: list[dict[str, float]],
    updates: list[dict[str, Any]],
    split: dict[str, float],
    dtype: str,
    timed: str = "update",
) -> dict[str, Any]:
    """Prints and returns the learner's achieved FLOP/s at its fastest ``timed`` (an update, or an
    iteration's learn phase) against the best peak in its dtype and in float32, and the profile's split."""
    best_peaks = {name: max(p[name] for p in peaks) for name in peaks[0]}
    best = min(updates, key=lambda r: r["seconds"])
    achieved = best["flops"]["total"] / best["seconds"]
    peak = {
        kind: max(r for name, r in best_peaks.items() if name.endswith(kind)) for kind in (dtype, "float32")
    }
    flops = best["flops"]
    print(f"| learner ({dtype}, torch threads {torch.get_num_threads()}) | |")
    print("|---|---|")
    print(
        f"| FLOPs per update (padding excluded) | {flops['total'] / 1e9:.1f} G: linear "
        f"{flops['linear'] / 1e9:.1f}, attention {flops['attention'] / 1e9:.1f}, LM head "
        f"{flops['head'] / 1e9:.1f} |"
    )
    print(f"| fastest {timed} | {best['seconds']:.2f} s (load {best['load']}) |")
    print(f"| achieved | {achieved / 1e9:.1f} GFLOP/s |")
    for name, rate in best_peaks.items():
        print(f"| peak {name} | {rate / 1e9:.1f} GFLOP/s |")
    for kind, rate in peak.items():
        print(f"| achieved / {kind} peak | {achieved / rate:.1%} |")
    wall = split["wall"]
    print(f"| profiled update (wall, profiler on) | {wall:.2f} s |")
    for category, seconds in split.items():
        if category != "wall":
            print(f"| {category} | {seconds:.2f} s ({seconds / wall:.0%}) |")
    print(f"load {load_average()}", flush=True)
    return {
        "dtype": dtype,
        "flops_per_update": flops,
        "update_s": [r["seconds"] for r in updates],
        "update_loads": [r["load"] for r in updates],
        "fastest_update_s": best["seconds"],
        "achieved_flop_s": achieved,
        "peaks_flop_s": best_peaks,
        "peak_flop_s": peak,
        "utilization": {kind: achieved / rate for kind, rate in peak.items()},
        "profile_s": split,
        "load_after": load_average(),
    }


def run_lora_vs_full(args: argparse.Namespace, argv: list[str]) -> None:
    """Full training against LoRA of rank ``--lora-vs-full`` on the saved batch, in one run: each arm's
    updates in a fresh process of learn mode (so that each has its own peak RSS), the arms alternating for
    ``--repeats`` rounds (so that the machine's load falls on both); each arm's fastest update. Tokens/s
    counts the batch's tokens (prompts included) per update. ``--output``: also DIR/results.json."""
    with open(args.learn, "rb") as handle:
        batch: list[Trajectory] = pickle.load(handle)
    tokens = sum(len(t.token_ids) for t in batch)
    print(f"batch: {describe(batch)}", flush=True)
    passed_on = without_options(
        argv, {"--lora-vs-full": 1, "--repeats": 1, "--result-json": 1, "--output": 1}
    )
    arms = {"full": 0, f"LoRA r={args.lora_vs_full}": args.lora_vs_full}
    sides = {name: functools.partial(run_arm, passed_on, name, rank) for name, rank in arms.items()}
    rows = lora_vs_full_rows(alternate(sides, args.repeats), arms, tokens)
    print("| arm | trainable parameters | update s (fastest) | tokens/s | peak RSS GiB (max) | time / full |")
    print("|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(
            f"| {name} | {row['trainable_parameters']:,} | {row['fastest_update_s']:.1f} | "
            f"{row['tokens_per_s']:.0f} | {row['peak_rss_gib']:.2f} | {row['time_vs_full']:.2f}x |",
            flush=True,
        )
    if args.output:
        results = {
            "provenance": provenance(PROG, argv),
            "batch": {"file": args.learn, "description": describe(batch), "tokens": tokens},
            "rounds": args.repeats,
            "arms": rows,
        }
        Path(args.output).mkdir(parents=True, exist_ok=True)
        write_json(Path(args.output) / "results.json", results)
        print(f"wrote {Path(args.output) / 'results.json'}", flush=True)


def lora_vs_full_rows(
    records: dict[str, list[dict[str, Any]]], ranks: dict[str, int], tokens: int
) -> dict[str, dict[str, Any]]:
    """Per arm, from its processes' records: rank, trainable parameters, every update's seconds, the fastest
    update, tokens/s at it, the highest peak RSS, the learner's dtypes, and the fastest update against full
    training's."""
    best = {name: fastest_update(r) for name, r in fastest(records, seconds=fastest_update).items()}
    full = best[next(name for name, rank in ranks.items() if rank == 0)]
    return {
        name: {
            "lora_rank": ranks[name],
            "trainable_parameters": runs[0]["trainable_parameters"],
            "update_s": [s for r in runs for s in r["update_s"]],
            "fastest_update_s": best[name],
            "tokens_per_s": tokens / best[name],
            "peak_rss_gib": max(r["peak_rss_gib"] for r in runs),
            "dtypes": runs[0]["dtypes"],
            "time_vs_full": best[name] / full,
        }
        for name, runs in records.items()
    }


def run_arm(passed_on: list[str], name: str, rank: int, round_: int) -> dict[str, Any]:
    """One arm of ``--lora-vs-full`` (LoRA rank ``rank``, 0 for full training) in a fresh learn-mode process,
    in round ``round_`` (from 0): the record its ``--result-json`` wrote."""
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.json"
        command = [sys.executable, "-m", "benchmarks.learner_step", *passed_on, "--repeats", "1"]
        command += ["--set", f"lora_rank={rank}", "--result-json", str(result)]
        print(f"round {round_ + 1}, {name}: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, check=True)
        return json.loads(result.read_text())


def fastest_update(record: dict[str, Any]) -> float:
    """The fastest update of one arm's process."""
    return min(record["update_s"])


def without_options(argv: list[str], options: dict[str, int]) -> list[str]:
    """``argv`` without each of ``options`` (option -> how many values follow it, or ``--option=value``)."""
    kept, skip = [], 0
    for item in argv:
        if skip:
            skip -= 1
        elif item in options:
            skip = options[item]
        elif item.split("=", 1)[0] not in options:
            kept.append(item)
    return kept


def trimmed(batch: list[Trajectory], tokens: int) -> list[Trajectory]:
    """The batch with ``tokens`` fewer tokens at the end of each trajectory: the same work, new shapes."""
    if tokens == 0:
        return batch
    return [
        dataclasses.replace(
            t,
            token_ids=t.token_ids[:-tokens],
            loss_mask=t.loss_mask[:-tokens],
            behaviour_logprobs=t.behaviour_logprobs[:-tokens],
            response_spans=[(a, min(b, len(t.token_ids) - tokens)) for a, b in t.response_spans],
        )
        for t in batch
    ]


@torch.no_grad()
def measure_drift(module, batch: list[Trajectory], micro: int) -> None:
    """|logp_bf16 - logp_fp32| on response tokens, and the stored (engine) logprobs against both."""
    diffs, engine_fp32, engine_bf16 = [], [], []
    dtype = module.model_dtype
    for start in range(0, len(batch), micro):
        rows = collate(batch[start : start + micro])
        mask = rows["loss_mask"].bool()
        module.model_dtype = "float32"
        fp32 = module.compute_logprobs(rows, with_entropy=False)["logp"]
        module.model_dtype = "bfloat16"
        bf16 = module.compute_logprobs(rows, with_entropy=False)["logp"]
        diffs.append((bf16 - fp32)[mask])
        engine_fp32.append((rows["logp_old"] - fp32)[mask])
        engine_bf16.append((rows["logp_old"] - bf16)[mask])
    module.model_dtype = dtype
    diff, engine, engine_low = torch.cat(diffs), torch.cat(engine_fp32), torch.cat(engine_bf16)
    print(
        f"bf16 - fp32 logprob on {diff.numel()} response tokens: mean |d| {diff.abs().mean():.4f}, "
        f"max |d| {diff.abs().max():.3f}, mean d {diff.mean():.4f}; token-ratio exp(d) range "
        f"[{diff.exp().min():.3f}, {diff.exp().max():.3f}]; engine - fp32 learner: mean |d| "
        f"{engine.abs().mean():.5f}, max {engine.abs().max():.4f}; engine - bf16 learner: mean |d| "
        f"{engine_low.abs().mean():.5f}, max {engine_low.abs().max():.4f}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny (the untrained tiny LM) or a dir")
    parser.add_argument("--scale", choices=("tiny", "smollm2"), help="default: smollm2 for --model smollm2")
    parser.add_argument("--env", default=ENV_ID)
    # Default: the scale's (tiny: float32 for both; smollm2: learner auto, engine float32).
    parser.add_argument("--model-dtype", choices=DTYPES, default=None, help="default: the scale's")
    parser.add_argument("--engine-dtype", choices=DTYPES, default=None, help="default: the scale's")
    parser.add_argument("--share-prefix", choices=("on", "off"), default=None, help="default: DAPOConfig's")
    parser.add_argument("--micro-batch-size", type=int, default=0, help="default: the scale's")
    parser.add_argument("--mismatch-correction", choices=("on", "off"), default=None, help="default: auto")
    parser.add_argument(
        "--settings", help="a run's settings file (experiments/settings/): time that run's iterations"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a DAPOConfig key, as experiments.train's",
    )
    parser.add_argument("--iterations", type=int, default=1, help="timed iterations after the warm-up")
    parser.add_argument("--save-batch", help="pickle the last fresh batch here (iteration mode)")
    parser.add_argument("--learn", help="a saved batch: time the learner alone on it")
    parser.add_argument("--repeats", type=int, default=2, help="timed updates after the warm-up (learn mode)")
    parser.add_argument(
        "--vary-shapes", action="store_true", help="each repeat trims a token per trajectory (new shapes)"
    )
    parser.add_argument("--drift", action="store_true", help="bf16 vs fp32 logprobs (learn mode)")
    parser.add_argument(
        "--lora-vs-full",
        type=int,
        default=0,
        metavar="RANK",
        help="learn mode: full training against LoRA of this rank, each in its own process, alternating",
    )
    parser.add_argument(
        "--utilization",
        action="store_true",
        help="the learner's FLOP/s against the CPU's matrix-product peak (measured alternately), a profile",
    )
    parser.add_argument(
        "--output",
        metavar="DIR",
        help="--lora-vs-full: also write DIR/results.json; --utilization: add to it",
    )
    parser.add_argument("--result-json", help=argparse.SUPPRESS)  # learn mode's figures, for --lora-vs-full
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    args = parse_and_check(parser, argv, REQUIRES)
    args.scale = args.scale or ("smollm2" if args.model == "smollm2" else "tiny")
    args.label = Path(args.settings).stem if args.settings else args.model
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads {torch.get_num_threads()}, load {load_average()}", flush=True)
    if args.lora_vs_full and not args.learn:
        parser.error("--lora-vs-full times the learner on a saved batch: add --learn BATCH")
    if args.lora_vs_full:
        run_lora_vs_full(args, sys.argv[1:] if argv is None else argv)
    elif args.learn:
        run_learn(args, argv)
    else:
        run_iterations(args)


if __name__ == "__main__":
    main()
