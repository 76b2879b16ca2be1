"""Rollout throughput: ``RolloutEngine`` (vLLM) against ``transformers.generate``, same model and prompts.

For each model, in this process and one run: P chat prompts (rendered by ``ChatRenderer`` from varied
FrozenLake-like observations), N new tokens each, sampled at temperature 1. Both sides produce exactly N
tokens per prompt (the engine with ``ignore_eos``, HF with ``min_new_tokens``), HF batched with left padding,
both in the same dtype. Each side runs once untimed (warm-up, which also checks the token counts), then R
timed repetitions, HF and vLLM alternating so that both see the same machine load; the best repetition of
each is reported as generated tokens per second, with the ratio vLLM / HF. Engine start time is shown
separately. Models:

- tiny: ``models.tiny.tiny_lm_path()`` (4 layers, hidden 256, 4M parameters);
- qwen05b: ``models.tiny.qwen25_05b_like_path()``, Qwen2.5-0.5B's shape with random weights (361M parameters);
- smollm2: ``models.smollm2.smollm2_path()``, SmolLM2-135M-Instruct (a real model; only with ``--models``).

Timing is noisy on a shared machine; re-run before relying on a digit.

    python -m benchmarks.rollout_throughput                  # both models, 32 x 128, dtype auto
    python -m benchmarks.rollout_throughput --models tiny --prompts 8 --new-tokens 32
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from benchmarks.measure import alternate, highest
from benchmarks.requirements import parse_and_check
from models.chat import ChatRenderer
from models.dtype import DTYPES, resolve_dtype
from models.engine import Prompt, RolloutEngine, SamplingConfig
from models.smollm2 import smollm2_path
from models.tiny import qwen25_05b_like_path, tiny_lm_path

# The engine's vLLM build (the cpu or gpu extra); the HF baseline is transformers, a core dependency.
REQUIRES = ("vllm",)

MODELS = {"tiny": tiny_lm_path, "qwen05b": qwen25_05b_like_path, "smollm2": smollm2_path}


def observations(count: int) -> list[str]:
    """Distinct FrozenLake-like first observations of varying length."""
    rows = ["SFFF", "FHFH", "FFFH", "HFFG", "FFHF", "GFFS"]
    texts = []
    for i in range(count):
        grid = "\n".join(rows[(i + k) % len(rows)] for k in range(4 + i % 3))
        texts.append(
            f"Episode {i}. You are on a frozen lake; S start, F frozen, H hole, G goal.\n{grid}\n"
            "Answer with one move: <answer>Up</answer>, Down, Left or Right."
        )
    return texts


def hf_runner(
    path, prompts: list[list[int]], new_tokens: int, dtype: torch.dtype, pad_id: int
) -> Callable[[], int]:
    """A call that generates with ``transformers`` (batched, left-padded) and returns the new-token count."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
    width = max(map(len, prompts))
    input_ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

    def run() -> int:
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=pad_id,
            )
        return (out.shape[1] - width) * out.shape[0]

    return run


def vllm_runner(engine: RolloutEngine, prompts: list[list[int]], new_tokens: int) -> Callable[[], int]:
    """A call that generates with the engine and returns the new-token count."""
    requests = [Prompt(p) for p in prompts]
    config = SamplingConfig(temperature=1.0, max_tokens=new_tokens, ignore_eos=True)

    def run() -> int:
        results = engine.generate(requests, config)
        return sum(len(c.token_ids) for r in results for c in r)

    return run


def tokens_per_second(run: Callable[[], int]) -> Callable[[int], float]:
    """A side for ``alternate``: one timed call of ``run`` (which returns its new-token count), as tokens
    per second."""

    def timed(_repeat: int) -> float:
        start = time.perf_counter()
        tokens = run()
        return tokens / (time.perf_counter() - start)

    return timed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.rollout_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--models", default="tiny,qwen05b", help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--dtype", default="auto", choices=DTYPES, help="auto: by the CPU")
    parser.add_argument("--repeats", type=int, default=2, help="timed repetitions per side (best is kept)")
    args = parse_and_check(parser, argv, REQUIRES)
    hf_logging.disable_progress_bar()
    threads = torch.get_num_threads()
    resolved = resolve_dtype(args.dtype)  # both sides run on this CPU
    dtype = resolved.dtype
    print(f"dtype {resolved.reason}")
    print(f"{args.prompts} prompts x {args.new_tokens} new tokens, {dtype}, {threads} torch threads")
    print(f"{'model':<8} {'HF tok/s':>10} {'vLLM tok/s':>11} {'vLLM/HF':>8} {'engine start':>13}")
    for name in args.models.split(","):
        path = MODELS[name]()
        renderer = ChatRenderer(path)
        prompts = [renderer.prompt(text).token_ids for text in observations(args.prompts)]
        pad_id = renderer.tokenizer.pad_token_id
        start = time.perf_counter()
        engine = RolloutEngine(path, dtype=dtype, max_model_len=1024, seed=0, kv_cache_gib=1.0)
        started = time.perf_counter() - start
        runs = {
            "hf": hf_runner(path, prompts, args.new_tokens, getattr(torch, dtype), pad_id),
            "vllm": vllm_runner(engine, prompts, args.new_tokens),
        }
        expected = args.prompts * args.new_tokens
        counts = {name: run() for name, run in runs.items()}  # also the warm-up
        assert counts == {"hf": expected, "vllm": expected}, counts
        timed = {name: tokens_per_second(run) for name, run in runs.items()}
        rates = highest(alternate(timed, args.repeats), rate=lambda tokens_per_s: tokens_per_s)
        hf_rate, vllm_rate = rates["hf"], rates["vllm"]
        print(
            f"{name:<8} {hf_rate:>10.0f} {vllm_rate:>11.0f} {vllm_rate / hf_rate:>8.2f} {started:>12.1f}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
