"""Rollout-path overhead: the multi-turn runner (``rollout_groups``) against vLLM's raw ``generate``.

The runner's work is recorded, then replayed: every engine call the runner made (one per turn and response
budget) is repeated as one plain ``vllm.LLM.generate`` call on the same prompt ids, each prompt with
``max_tokens`` set to the length the runner's sample reached and ``ignore_eos`` (so exactly the same number
of generated tokens from the same prompts, in the same batches), with vLLM's defaults otherwise: no seeds, no
logprobs, no logit bias. The runner's time is split into the time inside ``RolloutEngine.generate`` (vLLM
plus the engine's per-request seeds and sampled-token logprobs) and the rest (env resets and steps, chat
rendering, bookkeeping). Overhead = runner time / raw time - 1 (the target: at most 20%).

Each side runs once untimed (warm-up), then ``--repeats`` times alternating with the other so that both see
the same machine load; the fastest repetition of each is kept. The prefix cache is emptied before every run,
as a weight sync does in training. With ``--profile`` or when the overhead exceeds 20%, one more runner
repetition runs under cProfile and its top costs are printed. Timing is noisy on a shared machine; re-run
before relying on a digit.

    python -m benchmarks.rollout_overhead                           # dapo_step's workload
    python -m benchmarks.rollout_overhead --env freshrl/FrozenLake-v0 --max-tokens 32
    python -m benchmarks.rollout_overhead --model tiny --prompts 2 --group-size 2 --max-tokens 8
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import gymnasium as gym

import envs  # noqa: F401  (registers the freshrl/... ids)
from algorithms.rollout import rollout_groups
from benchmarks.measure import alternate, fastest, load_average
from benchmarks.requirements import parse_and_check
from envs.seeds import SPLITS
from models.chat import ChatRenderer
from models.dtype import DTYPES, resolve_dtype
from models.engine import Completion, Prompt, RolloutEngine, SamplingConfig
from models.smollm2 import smollm2_path
from models.tiny import qwen25_05b_like_path, tiny_lm_path

REQUIRES: tuple[str, ...] = ("vllm",)
MODELS = {"tiny": tiny_lm_path, "qwen05b": qwen25_05b_like_path, "smollm2": smollm2_path}
MAX_OVERHEAD = 0.20  # the runner's bookkeeping may add at most 20% to raw generation
PROFILE_ROWS = 15


@dataclass
class EngineCall:
    """One engine call of the runner: its prompts and the number of tokens each sample got."""

    prompts: list[list[int]]
    lengths: list[int]


@dataclass
class RecordingEngine:
    """A ``RolloutEngine`` that records every ``generate`` call and the seconds spent inside it."""

    engine: RolloutEngine
    calls: list[EngineCall] = field(default_factory=list)
    seconds: float = 0.0

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingConfig) -> list[list[Completion]]:
        started = time.perf_counter()
        outputs = self.engine.generate(prompts, sampling)
        self.seconds += time.perf_counter() - started
        self.calls.append(
            EngineCall([list(p.token_ids) for p in prompts], [len(out[0].token_ids) for out in outputs])
        )
        return outputs


@dataclass(frozen=True)
class Run:
    seconds: float
    tokens: int
    engine_seconds: float = 0.0


def runner_run(
    engine: RolloutEngine, renderer: ChatRenderer, env_id: str, args: argparse.Namespace
) -> tuple[Run, list[EngineCall]]:
    """One ``rollout_groups`` call (fixed sampling seed, so every repetition makes the same episodes)."""
    envs_ = [gym.make(env_id) for _ in range(args.prompts * args.group_size)]
    recording = RecordingEngine(engine)
    sampling = SamplingConfig(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens, seed=args.seed)
    engine.llm.reset_prefix_cache()
    started = time.perf_counter()
    groups = rollout_groups(
        recording,  # type: ignore[arg-type]  (duck-typed: only generate is used)
        renderer,
        envs_,
        [int(s) for s in SPLITS["train"][: args.prompts]],
        args.group_size,
        sampling,
        max_context_tokens=args.max_context_tokens,
    )
    seconds = time.perf_counter() - started
    for env in envs_:
        env.close()
    tokens = sum(t.num_response_tokens for group in groups for t in group)
    return Run(seconds, tokens, recording.seconds), recording.calls


def raw_run(engine: RolloutEngine, calls: list[EngineCall]) -> Run:
    """The runner's engine calls as plain ``vllm.LLM.generate`` calls with the recorded lengths."""
    from vllm import SamplingParams

    engine.llm.reset_prefix_cache()
    tokens = 0
    started = time.perf_counter()
    for call in calls:
        params = [
            SamplingParams(temperature=1.0, top_p=1.0, max_tokens=length, ignore_eos=True)
            for length in call.lengths
        ]
        requests = [{"prompt_token_ids": prompt} for prompt in call.prompts]
        outputs = engine.llm.generate(requests, params, use_tqdm=False)
        tokens += sum(len(out.outputs[0].token_ids) for out in outputs)
    return Run(time.perf_counter() - started, tokens)


def top_costs(run: Callable[[], object], rows: int = PROFILE_ROWS) -> str:
    """cProfile of one call of ``run``: the ``rows`` functions with the most time of their own."""
    profiler = cProfile.Profile()
    profiler.runcall(run)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(rows)
    return out.getvalue()


def row(label: str, seconds: float, tokens: int | None = None) -> None:
    rate = f"{tokens / seconds:>10.0f}" if tokens is not None else ""
    print(f"{label:<48}{seconds:>9.2f}{rate}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.rollout_overhead", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default="qwen05b", choices=sorted(MODELS))
    parser.add_argument("--env", default="freshrl/Math-v0", help="a registered freshrl/... text env id")
    parser.add_argument("--prompts", type=int, default=8, help="task seeds (GRPO groups) per rollout")
    parser.add_argument("--group-size", type=int, default=8, help="samples per task seed")
    parser.add_argument("--max-tokens", type=int, default=64, help="response tokens per turn")
    parser.add_argument("--max-context-tokens", type=int, default=512)
    parser.add_argument("--dtype", default="auto", choices=DTYPES, help="auto: by the CPU")
    parser.add_argument("--repeats", type=int, default=2, help="timed repetitions per side (fastest kept)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed of the runner")
    parser.add_argument("--profile", action="store_true", help="print the runner's top costs in any case")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = parse_and_check(build_parser(), argv, REQUIRES)
    for name in ("prompts", "group_size", "max_tokens", "repeats"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    path = MODELS[args.model]()
    dtype = resolve_dtype(args.dtype)  # the engine runs on this CPU
    print(f"engine dtype {dtype.reason}", flush=True)
    engine = RolloutEngine(
        path, dtype=dtype.dtype, max_model_len=args.max_context_tokens, seed=0, kv_cache_gib=1.0
    )
    if engine.is_vision:
        raise SystemExit(f"--model {args.model} is a vision model; this benchmark replays text prompts")
    renderer = ChatRenderer(path)
    print(
        f"{args.env}: {args.prompts} tasks x {args.group_size} samples, <= {args.max_tokens} tokens per "
        f"turn, model {args.model} ({dtype.dtype}), load {load_average()}",
        flush=True,
    )
    _, calls = runner_run(engine, renderer, args.env, args)  # warm-up, and the work to replay
    raw_run(engine, calls)
    prompt_tokens = sum(len(p) for call in calls for p in call.prompts)
    print(
        f"work: {len(calls)} engine calls, {sum(len(c.prompts) for c in calls)} requests, "
        f"{prompt_tokens} prompt tokens, {sum(sum(c.lengths) for c in calls)} generated tokens",
        flush=True,
    )
    sides = {
        "runner": lambda _repeat: runner_run(engine, renderer, args.env, args)[0],
        "raw": lambda _repeat: raw_run(engine, calls),
    }
    best = fastest(alternate(sides, args.repeats), seconds=lambda run: run.seconds)
    runner, raw = best["runner"], best["raw"]
    if runner.tokens != raw.tokens:
        raise RuntimeError(f"the replay generated {raw.tokens} tokens, the runner {runner.tokens}")
    overhead = runner.seconds / raw.seconds - 1
    print(f"{'':<48}{'seconds':>9}{'tokens/s':>10}")
    row("raw vllm.LLM.generate (same prompts, lengths)", raw.seconds, raw.tokens)
    row("runner (rollout_groups)", runner.seconds, runner.tokens)
    row("  inside RolloutEngine.generate", runner.engine_seconds)
    row("  outside (envs, rendering, bookkeeping)", runner.seconds - runner.engine_seconds)
    verdict = "ok" if overhead <= MAX_OVERHEAD else "MISSED"
    print(
        f"runner / raw = {runner.seconds / raw.seconds:.3f}: overhead {overhead:+.1%} "
        f"(target <= {MAX_OVERHEAD:.0%}: {verdict}); load {load_average()}",
        flush=True,
    )
    if args.profile or overhead > MAX_OVERHEAD:
        print("\ntop costs of one runner repetition (cProfile, own time):")
        print(top_costs(lambda: runner_run(engine, renderer, args.env, args)))


if __name__ == "__main__":
    main()
