"""``models.dtype``: "auto" is bfloat16 only where the hardware computes bf16 natively. The capability probes
are replaced, so the tests hold on any machine and compute nothing in bf16."""

from __future__ import annotations

import pytest
import torch

from models import dtype as dtypes
from models.dtype import resolve_dtype


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch):
    """``set(mkldnn_bf16, avx512_bf16=False, amx=False, machine="x86_64")``: what the CPU probes report."""

    def set_cpu(mkldnn_bf16: bool, avx512_bf16: bool = False, amx: bool = False, machine: str = "x86_64"):
        monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: mkldnn_bf16)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(dtypes.platform, "machine", lambda: machine)
        monkeypatch.setattr(dtypes, "cpu_capability", lambda: "AVX512" if mkldnn_bf16 else "AVX2")

    return set_cpu


def test_auto_is_bfloat16_on_a_cpu_with_native_bf16(cpu):
    cpu(mkldnn_bf16=True, avx512_bf16=True)
    assert resolve_dtype("auto") == ("bfloat16", "bfloat16: CPU has native bf16 (AVX512_BF16)")
    cpu(mkldnn_bf16=True, amx=True)
    assert resolve_dtype("auto").dtype == "bfloat16"
    cpu(mkldnn_bf16=True, machine="aarch64")  # oneDNN's bf16 check is the ISA check there
    assert resolve_dtype("auto").dtype == "bfloat16"


def test_auto_is_float32_where_bf16_would_be_emulated(cpu):
    cpu(mkldnn_bf16=False)
    reason = "float32: CPU has no native bf16 (AVX2), bf16 would be emulated"
    assert resolve_dtype("auto") == ("float32", reason)
    # oneDNN accepts bf16 from AVX512 on, converting through float32 without the bf16 instructions.
    cpu(mkldnn_bf16=True)
    resolved = resolve_dtype("auto")
    assert resolved.dtype == "float32"
    assert "no AVX512_BF16 or AMX" in resolved.reason


def test_auto_on_gpu_follows_the_gpu_not_the_cpu(cpu, monkeypatch: pytest.MonkeyPatch):
    cpu(mkldnn_bf16=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    resolved = resolve_dtype("auto", gpu=True)  # GPUs on other nodes: assumed bf16-capable
    assert resolved.dtype == "bfloat16"
    assert "GPUs requested" in resolved.reason
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Tesla V100")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert resolve_dtype("auto", gpu=True) == (
        "float32",
        "float32: CUDA GPU has no native bf16 (Tesla V100), bf16 would be emulated",
    )


@pytest.mark.parametrize("native", [True, False])
def test_an_explicit_dtype_wins(native: bool, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(dtypes, "cpu_native_bf16", lambda: (native, "probed"))
    assert resolve_dtype("float32") == ("float32", "float32: set explicitly")
    assert resolve_dtype("bfloat16", gpu=True) == ("bfloat16", "bfloat16: set explicitly")


def test_an_unknown_dtype_is_refused():
    with pytest.raises(ValueError, match="dtype must be one of .*'auto'.*got 'fp16'"):
        resolve_dtype("fp16")
