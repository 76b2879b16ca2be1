"""Offline models: tiny Qwen2 / Qwen2.5-VL policies and a Qwen2.5-0.5B-shaped benchmark model.

No network is used. A byte-level BPE tokenizer is trained on ``models.corpus.corpus_texts`` (plus any
``extra_corpus``), the model is created from a config with random weights drawn from ``seed``, and the result
is saved as an ordinary HF checkpoint that ``transformers`` (``AutoModelForCausalLM`` /
``AutoModelForImageTextToText``, ``AutoTokenizer`` / ``AutoProcessor``) and vLLM load.

Every model is cached under ``cache_root()`` (``$FRESHRL_CACHE_DIR``, else ``~/.cache/freshrl/models``, or the
``cache_dir`` argument) in a directory named for a hash of (builder version, configs, seed, corpus), so a
change to any of them builds a new model and never reuses a stale one. A model is built in a temporary
directory beside its final place and renamed into it, so a crash never leaves a half-built model and two
processes building the same model at once both end with the same complete directory.

The three models, all with the same 3072-token vocabulary and tied embeddings:

- ``tiny_lm_path()``: Qwen2, 4 layers, hidden 256, 4 heads (2 KV heads, head dim 64), MLP 768, 3.9M
  parameters, float32, 8192 positions. A forward + backward pass over 1024 tokens took about 0.3 s on the
  2-core development machine; a few dozen supervised steps teach it a fixed answer.
- ``tiny_vlm_path()``: Qwen2.5-VL with the same text stack (multimodal RoPE) and a 2-block vision tower
  (hidden 128), 4.8M parameters, float32. A 112x112 image becomes 16 image tokens; larger images are scaled
  down to at most 64 tokens (224x224 pixels), smaller ones up to at least 4.
- ``qwen25_05b_like_path()``: Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads, 2 KV heads, MLP 4864,
  tied embeddings) with the small vocabulary, bfloat16, random weights: 361M parameters, for
  benchmarks only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import (
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2VLImageProcessor,
    Qwen2VLVideoProcessor,
)

from models.corpus import corpus_texts
from models.tiny_tokenizer import (
    ENDOFTEXT,
    IM_END,
    IMAGE_PAD,
    VIDEO_PAD,
    VISION_END,
    VISION_START,
    train_tokenizer,
)

# Bump when a change to this module changes what a builder writes, so caches are rebuilt.
BUILDER_VERSION = 1
CACHE_DIR_ENV = "FRESHRL_CACHE_DIR"
DEFAULT_CACHE_DIR = Path("~/.cache/freshrl/models")
BUILD_INFO_FILE = "freshrl_build.json"

TOKENIZER_VOCAB_SIZE = 3072

TINY_LM_CONFIG: dict[str, Any] = {
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 8192,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}

QWEN25_05B_CONFIG: dict[str, Any] = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}

# Text stack of the VLM: the tiny LM's, with multimodal RoPE. mrope_section splits head_dim / 2 = 32 rotary
# frequencies into (temporal, height, width) in Qwen2.5-VL's 16:24:24 proportion.
TINY_VLM_TEXT_CONFIG: dict[str, Any] = {
    **TINY_LM_CONFIG,
    "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
}
TINY_VLM_VISION_CONFIG: dict[str, Any] = {
    "depth": 2,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_heads": 2,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 112,
    "fullatt_block_indexes": [1],
    "out_hidden_size": TINY_LM_CONFIG["hidden_size"],
}
# One image token covers (patch_size * spatial_merge_size)^2 = 28 x 28 pixels.
IMAGE_MIN_PIXELS = 56 * 56
IMAGE_MAX_PIXELS = 224 * 224


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The cache directory: ``cache_dir``, else ``$FRESHRL_CACHE_DIR``, else ``~/.cache/freshrl/models``."""
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR
    return Path(cache_dir).expanduser()


def weights_digest(path: str | Path) -> str:
    """SHA-256 over the model's safetensors files (names and bytes), in name order."""
    digest = hashlib.sha256()
    for file in sorted(Path(path).glob("*.safetensors")):
        digest.update(file.name.encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def tiny_lm_path(
    seed: int = 0, cache_dir: str | Path | None = None, *, extra_corpus: Sequence[str] = ()
) -> Path:
    """Path of the tiny Qwen2 causal LM for ``seed`` (float32), building it if it is not cached."""
    return _cached_causal_lm("tiny-qwen2", TINY_LM_CONFIG, "float32", seed, cache_dir, extra_corpus)


def qwen25_05b_like_path(
    seed: int = 0, cache_dir: str | Path | None = None, *, extra_corpus: Sequence[str] = ()
) -> Path:
    """Path of a Qwen2.5-0.5B-shaped causal LM with random weights (bfloat16), building it if needed."""
    return _cached_causal_lm(
        "qwen2.5-0.5b-like", QWEN25_05B_CONFIG, "bfloat16", seed, cache_dir, extra_corpus
    )


def tiny_vlm_path(
    seed: int = 0, cache_dir: str | Path | None = None, *, extra_corpus: Sequence[str] = ()
) -> Path:
    """Path of the tiny Qwen2.5-VL model and its processor for ``seed`` (float32), building it if needed."""
    texts = corpus_texts(extra_corpus)
    key = {
        "kind": "tiny-qwen2.5-vl",
        "text": TINY_VLM_TEXT_CONFIG,
        "vision": TINY_VLM_VISION_CONFIG,
        "pixels": [IMAGE_MIN_PIXELS, IMAGE_MAX_PIXELS],
        "dtype": "float32",
    }

    def build(directory: Path) -> None:
        tokenizer = train_tokenizer(texts, TOKENIZER_VOCAB_SIZE)
        ids = {token: tokenizer.convert_tokens_to_ids(token) for token in (ENDOFTEXT, IM_END)}
        config = Qwen2_5_VLConfig(
            text_config={
                **TINY_VLM_TEXT_CONFIG,
                "vocab_size": len(tokenizer),
                "bos_token_id": ids[ENDOFTEXT],
                "eos_token_id": ids[IM_END],
                "pad_token_id": ids[ENDOFTEXT],
            },
            vision_config=TINY_VLM_VISION_CONFIG,
            image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_PAD),
            video_token_id=tokenizer.convert_tokens_to_ids(VIDEO_PAD),
            vision_start_token_id=tokenizer.convert_tokens_to_ids(VISION_START),
            vision_end_token_id=tokenizer.convert_tokens_to_ids(VISION_END),
            tie_word_embeddings=True,
        )
        model = _seeded(seed, lambda: Qwen2_5_VLForConditionalGeneration(config))
        _save(model, tokenizer, directory, torch.float32)
        processor = Qwen2_5_VLProcessor(
            image_processor=Qwen2VLImageProcessor(min_pixels=IMAGE_MIN_PIXELS, max_pixels=IMAGE_MAX_PIXELS),
            tokenizer=tokenizer,
            video_processor=Qwen2VLVideoProcessor(),
            chat_template=tokenizer.chat_template,
        )
        processor.save_pretrained(directory)

    return _cached(key, seed, texts, build, cache_dir)


def _cached_causal_lm(
    kind: str,
    config_kwargs: dict[str, Any],
    dtype: str,
    seed: int,
    cache_dir: str | Path | None,
    extra_corpus: Sequence[str],
) -> Path:
    texts = corpus_texts(extra_corpus)
    key = {"kind": kind, "config": config_kwargs, "dtype": dtype}

    def build(directory: Path) -> None:
        tokenizer = train_tokenizer(texts, TOKENIZER_VOCAB_SIZE)
        config = Qwen2Config(
            **config_kwargs,
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
            eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
            pad_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        )
        model = _seeded(seed, lambda: Qwen2ForCausalLM(config))
        _save(model, tokenizer, directory, getattr(torch, dtype))

    return _cached(key, seed, texts, build, cache_dir)


def _seeded(seed: int, make: Callable[[], PreTrainedModel]) -> PreTrainedModel:
    # fork_rng keeps the caller's global torch RNG untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


def _save(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, directory: Path, dtype: torch.dtype
) -> None:
    model = model.to(dtype)
    model.config.dtype = dtype
    # vLLM reads eos_token_id from generation_config.json: generation stops on <|im_end|>.
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def _cached(
    key: dict[str, Any],
    seed: int,
    texts: Sequence[str],
    build: Callable[[Path], None],
    cache_dir: str | Path | None,
) -> Path:
    corpus_hash = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    info = {"builder_version": BUILDER_VERSION, **key, "seed": seed, "corpus_sha256": corpus_hash}
    return cached_build(f"{key['kind']}-seed{seed}", info, build, cache_dir)


def cached_build(
    name: str,
    info: dict[str, Any],
    build: Callable[[Path], dict[str, Any] | None],
    cache_dir: str | Path | None = None,
) -> Path:
    """``<cache_root>/<name>-<hash of info>``, running ``build(directory)`` first if it is not cached.

    ``build`` writes the model into a fresh staging directory, which is renamed into place only after
    ``BUILD_INFO_FILE`` (``info`` plus whatever dict ``build`` returns) is written: a crash never leaves a
    half-built model, and two processes building the same model both end with one complete copy.
    """
    digest = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root(cache_dir)
    final = root / f"{name}-{digest}"
    if (final / BUILD_INFO_FILE).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        extra = build(staging) or {}
        text = json.dumps({**info, **extra}, indent=2, sort_keys=True)
        (staging / BUILD_INFO_FILE).write_text(text + "\n")
        try:
            staging.rename(final)
        except OSError:
            # Another process finished the same model first; its copy is identical.
            if not (final / BUILD_INFO_FILE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final
