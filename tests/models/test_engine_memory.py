"""RolloutEngine memory: the KV cache sized for a rollout, and released between rollouts (CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from models.chat import ChatRenderer
from models.engine import CPU_KV_BLOCK_TOKENS, Prompt, RolloutEngine, SamplingConfig, kv_cache_gib_for
from models.vllm_env import on_cuda

cpu_only = pytest.mark.skipif(on_cuda(), reason="vLLM's CPU backend: block size and release_kv_cache")


def anonymous_rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


@cpu_only
def test_kv_cache_gib_for_holds_the_sequences_it_is_sized_for(lm_path: Path):
    sequences, max_model_len = 3, 300  # 3 blocks of 128 tokens per sequence
    gib = kv_cache_gib_for(lm_path, sequences=sequences, max_model_len=max_model_len, dtype="float32")
    engine = RolloutEngine(lm_path, dtype="float32", max_model_len=max_model_len, kv_cache_gib=gib)
    blocks = engine.llm.llm_engine.vllm_config.cache_config.num_gpu_blocks
    needed = sequences * -(-max_model_len // CPU_KV_BLOCK_TOKENS)
    # Enough for all of them, and no more than the MiB rounding adds.
    assert needed <= blocks <= needed + 2
    prompts = [Prompt(list(range(5, 15)))] * sequences
    out = engine.generate(prompts, SamplingConfig(max_tokens=max_model_len - 10, ignore_eos=True, seed=1))
    assert [len(r[0].token_ids) for r in out] == [max_model_len - 10] * sequences


def test_kv_cache_gib_for_scales_with_dtype_and_refuses_nonsense(lm_path: Path):
    fp32 = kv_cache_gib_for(lm_path, sequences=64, max_model_len=512, dtype="float32")
    bf16 = kv_cache_gib_for(lm_path, sequences=64, max_model_len=512, dtype="bfloat16")
    assert bf16 == pytest.approx(fp32 / 2, abs=1 / 1024)
    with pytest.raises(ValueError, match="sequences"):
        kv_cache_gib_for(lm_path, sequences=0, max_model_len=512)


def own_engine(lm_path: Path) -> tuple[RolloutEngine, list[Prompt], SamplingConfig]:
    """An engine of its own, four prompts and seeded sampling: the session engine's memory may be released
    already."""
    import numba  # noqa: F401  (as the session engine: models.vllm_env.guard_vllm_kernel_scan)

    engine = RolloutEngine(lm_path, dtype="float32", max_model_len=1024, seed=0, kv_cache_gib=0.25)
    renderer = ChatRenderer(lm_path)
    prompts = [Prompt(renderer.prompt(f"Solve {i} + 7.").token_ids) for i in range(4)]
    return engine, prompts, SamplingConfig(n=2, max_tokens=24, seed=5)


def samples(out: list[list]) -> list[list[tuple]]:
    return [[(c.token_ids, c.logprobs, c.finish_reason) for c in r] for r in out]


@cpu_only
def test_release_kv_cache_frees_memory_and_changes_no_sample(lm_path: Path):
    engine, prompts, sampling = own_engine(lm_path)
    before = engine.generate(prompts, sampling)
    resident = anonymous_rss_bytes()
    released = engine.release_kv_cache()
    # The cache is 0.25 GiB, written in full at start (torch.zeros).
    assert released >= 0.24 * (1 << 30)
    assert resident - anonymous_rss_bytes() >= released // 2
    assert samples(engine.generate(prompts, sampling)) == samples(before)
    assert engine.release_kv_cache() == released  # and again after use


@cpu_only
def test_release_weights_frees_the_engines_copy_until_the_next_load(lm_path: Path):
    import ctypes

    from safetensors.torch import load_file

    engine, prompts, sampling = own_engine(lm_path)
    before = engine.generate(prompts, sampling)
    engine.release_kv_cache()
    libc = ctypes.CDLL(None)
    libc.malloc_trim(0)
    resident = anonymous_rss_bytes()
    layers = engine.release_weights()
    libc.malloc_trim(0)
    freed = resident - anonymous_rss_bytes()
    weights = load_file(str(lm_path / "model.safetensors"))
    # Every linear layer: q/k/v and o, gate/up and down per decoder layer (and an untied head, if any).
    assert layers >= 4 * engine.llm.llm_engine.model_config.hf_config.num_hidden_layers
    linear_bytes = sum(t.numel() * 4 for name, t in weights.items() if "proj" in name and t.dim() == 2)
    assert freed >= linear_bytes // 2
    with pytest.raises(RuntimeError, match="load_weights first"):
        engine.generate(prompts, sampling)
    engine.load_weights(weights)
    assert samples(engine.generate(prompts, sampling)) == samples(before)


FRAME_CHECK = """
import gc, sys, types
from models.engine import RolloutEngine

def build(path):
    weights_of_a_caller = bytearray(1 << 20)  # what a caller's frame holds (RLlib's setup: the first sync)
    return RolloutEngine(path, max_model_len=128, kv_cache_gib=0.01)

engine = build(sys.argv[1])
gc.collect()
print(sum(isinstance(o, types.FrameType) and o.f_code is build.__code__ for o in gc.get_objects()))
"""


def test_building_the_first_engine_keeps_no_caller_frame_alive(lm_path: Path):
    """vLLM stores an optional backend's ImportError; its traceback would keep the frames of whoever first
    imported vLLM (drop_stored_import_tracebacks). Run in a fresh process, where that import is in build()."""
    out = subprocess.run(
        [sys.executable, "-c", FRAME_CHECK, str(lm_path)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "0"
