"""One DAPO iteration on one CUDA GPU at Qwen2.5-0.5B's shape, bf16, engine/learner mismatch correction on.

The GPU path's check (docs/scaling.md; benchmarks/gpu_check.sh runs it after the CUDA tests):
``freshrl/Math-v0`` (the built-in generator), P prompts x G samples x at most N new tokens (default 8 x 8 x
64, dapo_step's workload) with ``models.tiny.qwen25_05b_like_path()`` (Qwen2.5-0.5B's shape, random weights);
engine (in-process vLLM) and learner (RLlib's local learner, ``num_gpus_per_learner=1``) on the same GPU,
both bfloat16 (the learner under autocast over float32 master weights), ``mismatch_correction=True``
(truncated importance sampling against the learner's recomputed pi_old, cap ``tis_cap`` = 2). Dynamic
sampling, overlong shaping and replay are off: the random model fails every problem, so nothing would be
kept otherwise. One untimed warm-up iteration (CUDA graphs, compilation), then ``--iterations`` timed ones;
printed per iteration: the phase times (rollout / learn / weight sync), generated tokens and tokens per
second of the rollout, the mismatch figures (KL, ratio range, share of truncated tokens), the loss, and the
peak GPU memory of this process (engine and learner together).

    python -m benchmarks.gpu_iteration                     # on a CUDA machine
    python -m benchmarks.gpu_iteration --quick --device cpu   # the tiny LM on CPU (a smoke run)
"""

from __future__ import annotations

import argparse
import time

import envs  # noqa: F401  (registers freshrl/Math-v0)
from algorithms.dapo import DAPOConfig
from benchmarks.measure import peak_rss_gib
from benchmarks.requirements import parse_and_check
from experiments.common.run_config import RunSettings, build_config
from experiments.common.training_metrics import flatten
from models.tiny import qwen25_05b_like_path, tiny_lm_path

# The engine's vLLM build (`make setup VLLM=gpu` on a CUDA machine).
REQUIRES = ("vllm",)
ENV_ID = "freshrl/Math-v0"
MAX_CONTEXT_TOKENS = 512  # a Math-v0 prompt (< 200 tokens) plus the responses
# The figures printed from each result (metric names containing one of these).
FIGURES = ("timing/", "generated_tokens", "response_length_mean", "mismatch", "tis_clip", "train/loss")


def gpu_config(args: argparse.Namespace) -> DAPOConfig:
    """The ``paper`` preset through the one builder (experiments.common.run_config) with this check's
    workload: bf16 learner and engine with the mismatch correction on, every group trained, on-policy."""
    model = tiny_lm_path() if args.quick else qwen25_05b_like_path()
    batch = args.prompts * args.group_size
    workload = {
        "model_dtype": "bfloat16",
        "engine_dtype": "bfloat16",
        "mismatch_correction": True,
        "engine_kv_cache_gib": args.kv_cache_gib or (4.0 if args.device == "cuda" else 0.5),
        "max_context_tokens": MAX_CONTEXT_TOKENS,
        "group_size": args.group_size,
        "prompts_per_iteration": args.prompts,
        "max_response_tokens": args.new_tokens,
        "temperature": 1.0,
        "top_p": 1.0,
        "dynamic_sampling": False,
        "overlong_filtering": False,
        "overlong_punishment": False,
        "lr": 1e-6,
        "warmup_steps": 0,
        "minibatch_size": batch,
        "num_epochs": 1,
        "micro_batch_size": min(batch, 8),
        "replay_mode": "on_policy",
        "seed": 0,
    }
    settings = RunSettings(env=ENV_ID, scale="paper", model=str(model), gpu=args.device == "cuda")
    return build_config(settings, workload)


def figures(result: dict) -> dict[str, float]:
    return {k: v for k, v in sorted(flatten(result).items()) if any(f in k for f in FIGURES)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_iteration", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="where the learner runs")
    parser.add_argument("--quick", action="store_true", help="the tiny LM instead of the 0.5B shape")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=1, help="timed iterations after the warm-up")
    parser.add_argument(
        "--kv-cache-gib",
        type=float,
        default=None,
        help="the engine's KV cache in GiB (default 4 on CUDA, where the learner shares the GPU; 0.5 on CPU)",
    )
    args = parse_and_check(parser, argv, REQUIRES)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA GPU here; use a CUDA machine or --device cpu")
    if args.device == "cuda":
        print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    config = gpu_config(args)
    dtypes = config.resolved_dtypes()
    print(f"learner dtype {dtypes['model_dtype_reason']}; engine dtype {dtypes['engine_dtype_reason']}")
    algo = config.build_algo()
    try:
        for iteration in range(args.iterations + 1):
            started = time.perf_counter()
            result = algo.train()
            wall = time.perf_counter() - started
            label = "warm-up" if iteration == 0 else f"timed {iteration}"
            print(f"iteration ({label}): {wall:.1f} s", flush=True)
            values = figures(result)
            for name, value in values.items():
                print(f"  {name:<52} {value:12.4g}")
            rollout_s = next((v for k, v in values.items() if k.endswith("timing/rollout_s")), 0.0)
            tokens = next((v for k, v in values.items() if k.endswith("rollout/generated_tokens")), 0.0)
            if rollout_s > 0:
                print(f"  {'rollout tokens per second':<52} {tokens / rollout_s:12.1f}")
    finally:
        algo.stop()
    if args.device == "cuda":
        peak_gib = torch.cuda.max_memory_allocated() / 2**30
        print(f"peak GPU memory allocated by this process: {peak_gib:.2f} GiB")
    print(f"peak resident memory: {peak_rss_gib():.2f} GiB")


if __name__ == "__main__":
    main()
