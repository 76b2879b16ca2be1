"""The dtype ``"auto"`` stands for: bfloat16 where the hardware computes it natively, float32 elsewhere.

bf16 is only a saving where the hardware has bf16 arithmetic. A CUDA GPU of compute capability 8.0 or more
has it; a CPU has it with AVX512_BF16 or AMX (x86) or bf16 instructions (aarch64), which torch's oneDNN
path uses. Elsewhere oneDNN and vLLM emulate bf16 through float32 conversions: on an AVX2-only CPU a
SmolLM2-shaped forward and backward took ~20 s under bf16 autocast against 0.7-0.9 s in float32, and vLLM
generated ~4x slower in bf16. With AVX512_BF16 the same learner step was 1.6x faster in bf16 than in float32
(docs/performance.md, the learner on SmolLM2).

``resolve_dtype`` turns a requested dtype ("auto", "float32" or "bfloat16") into a concrete one and a
one-line reason; an explicit choice is returned as it is. The probes (``cpu_native_bf16``,
``cuda_native_bf16``) are module functions so that tests can replace them.
"""

from __future__ import annotations

import platform
from typing import NamedTuple

import torch

DTYPES = ("auto", "float32", "bfloat16")


class ResolvedDtype(NamedTuple):
    """A concrete dtype ("float32" or "bfloat16") and why it was chosen, e.g. "float32: CPU has no native
    bf16 (AVX2), bf16 would be emulated"."""

    dtype: str
    reason: str


def cpu_capability() -> str:
    """torch's name for the widest vector instruction set of this CPU ("AVX2", "AVX512", "DEFAULT", ...)."""
    return torch.backends.cpu.get_cpu_capability()


def cpu_native_bf16() -> tuple[bool, str]:
    """Whether this CPU computes bf16 natively, and what says so (the reason's words after the dtype)."""
    capability = cpu_capability()
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return False, f"CPU has no native bf16 ({capability}), bf16 would be emulated"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True, f"CPU has native bf16 (oneDNN bf16 on {platform.machine()})"
    # On x86 oneDNN reports bf16 support from AVX512 (avx512_core) on, where it converts through float32
    # without the bf16 dot-product instructions: native only with AVX512_BF16 or AMX.
    flags = [
        name
        for name, present in (
            ("AMX", torch.cpu._is_amx_tile_supported()),
            ("AVX512_BF16", torch.cpu._is_avx512_bf16_supported()),
        )
        if present
    ]
    if not flags:
        return False, f"CPU has no native bf16 ({capability}, no AVX512_BF16 or AMX), bf16 would be emulated"
    return True, f"CPU has native bf16 ({', '.join(flags)})"


def cuda_native_bf16() -> tuple[bool, str]:
    """Whether the run's CUDA GPUs compute bf16 natively, and what says so. Judged from this process's first
    GPU; a driver that sees none (GPUs on other nodes) assumes a GPU of compute capability 8.0 or more."""
    if not torch.cuda.is_available():
        return True, "GPUs requested, none visible to the driver: assumed native bf16 (compute capability 8+)"
    name = torch.cuda.get_device_name(0)
    if torch.cuda.is_bf16_supported(including_emulation=False):
        return True, f"CUDA GPU has native bf16 ({name})"
    return False, f"CUDA GPU has no native bf16 ({name}), bf16 would be emulated"


def resolve_dtype(requested: str, *, gpu: bool = False) -> ResolvedDtype:
    """``requested`` as a concrete dtype: "auto" is bfloat16 where the device that computes (a CUDA GPU
    when ``gpu``, else this CPU) has native bf16, float32 elsewhere; "float32" and "bfloat16" stay."""
    if requested not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {requested!r}")
    if requested != "auto":
        return ResolvedDtype(requested, f"{requested}: set explicitly")
    native, why = cuda_native_bf16() if gpu else cpu_native_bf16()
    dtype = "bfloat16" if native else "float32"
    return ResolvedDtype(dtype, f"{dtype}: {why}")
