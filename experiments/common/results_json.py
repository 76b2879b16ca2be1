"""Results files: strict JSON, each with the provenance of its numbers.

Python's ``json`` writes ``NaN`` by default, which is not JSON: ``jq``, JavaScript and most other readers
reject the whole file. Every JSON file the entry points write goes through :func:`write_json` (NaN and
infinities, a metric never measured, become null).

Every results file holds ``"provenance"``: :func:`provenance`, the one record of what made its numbers (the
command line, the git commit and whether the tree was dirty, the UTC date, the machine: cores, CPU model and
capability flags, allocator, GPU; and the dtypes the run resolved, :func:`dtype_record`: "auto" resolves by
the machine, so a number means little without them). ``python -m experiments.reproduce`` reads the commit
to say which recorded results are older than the code they depend on (docs/results/README.md).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.common.allocator import current_allocator

if TYPE_CHECKING:
    from algorithms.dapo import DAPOConfig


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by None, in dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def dumps(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``value`` (``allow_nan=False`` after :func:`json_safe`)."""
    return json.dumps(json_safe(value), indent=indent, allow_nan=False)


def write_json(path: str | Path, value: Any, indent: int | None = 2) -> None:
    Path(path).write_text(dumps(value, indent) + "\n")


def dtype_record(config: DAPOConfig) -> dict[str, str]:
    """The learner and engine dtypes ``config`` resolved to, with their reasons
    (``DAPOConfig.resolved_dtypes``), and torch's capability string of this CPU ("AVX2", "AVX512", ...)."""
    from models.dtype import cpu_capability

    return {"cpu_capability": cpu_capability(), **config.resolved_dtypes()}


REPOSITORY = Path(__file__).resolve().parents[2]
# The /proc/cpuinfo flags that change what the numbers are: the vector and matrix instruction sets that
# torch's and vLLM's CPU kernels dispatch on (bf16 is native only with AVX512_BF16 or AMX, models/dtype.py).
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "asimd", "sve")


def provenance(prog: str, argv: Sequence[str] | None, config: DAPOConfig | None = None) -> dict[str, Any]:
    """What made a results file's numbers: ``{"command", "commit", "dirty", "date", "machine"}``, and
    ``"dtypes"`` (:func:`dtype_record`) when the run has one ``config``. ``argv`` is the entry point's
    arguments (None: ``sys.argv[1:]``); the command is ``prog`` followed by them, quoted for a shell."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    commit, dirty = git_state()
    record: dict[str, Any] = {
        "command": shlex.join([*prog.split(), *arguments]),
        "commit": commit,
        "dirty": dirty,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
    }
    if config is not None:
        record["dtypes"] = dtype_record(config)
    return record


# Where runs write what they make: a change there is output, not code, so it does not make a tree dirty (a
# comparison resumed in its committed folder appends to its own tracked run.log).
OUTPUTS = "docs/results"


def git_state(root: Path = REPOSITORY) -> tuple[str | None, bool | None]:
    """The commit checked out at ``root`` and whether tracked files outside :data:`OUTPUTS` differ from it;
    (None, None) outside a git checkout or without git."""
    try:
        head = git_output(root, "rev-parse", "HEAD")
        status = git_output(
            root, "status", "--porcelain", "--untracked-files=no", "--", ".", f":(exclude){OUTPUTS}"
        )
    except (OSError, subprocess.SubprocessError):
        return None, None
    return head.strip(), bool(status.strip())


def git_output(root: Path, *arguments: str) -> str:
    """stdout of ``git -C root ...``; CalledProcessError when git fails (no checkout, unknown commit)."""
    done = subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True, timeout=60)
    done.check_returncode()
    return done.stdout


def machine() -> dict[str, Any]:
    """The hardware and allocator a run's numbers come from. ``gpu`` is the GPU torch sees, or None: none,
    or the run never imported torch (it computed on the CPU only)."""
    model, generation, flags = _cpuinfo()
    torch = sys.modules.get("torch")
    gpu = torch.cuda.get_device_name(0) if torch is not None and torch.cuda.is_available() else None
    return {
        "cores": os.cpu_count(),
        "architecture": platform.machine(),
        "cpu_model": model,
        # Under a hypervisor the model name can be as bare as "AMD EPYC"; family and model tell Zen 4 from 5.
        "cpu_generation": generation,
        "cpu_flags": [flag for flag in CPU_FLAGS if flag in flags],
        "allocator": current_allocator(),
        "gpu": gpu,
    }


def cpu_name(machine: dict[str, Any]) -> str:
    """A recorded machine's CPU model with its generation where recorded, ``AMD EPYC, family 26 model 2``
    (empty when neither is recorded)."""
    return ", ".join(filter(None, (machine.get("cpu_model"), machine.get("cpu_generation"))))


def _cpuinfo() -> tuple[str, str | None, set[str]]:
    """The CPU's model name, ``family F model M`` (None where not listed) and flags from /proc/cpuinfo
    (elsewhere: platform's processor name, None, no flags)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown", None, set()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    model = fields.get("model name") or fields.get("Model") or platform.processor() or "unknown"
    flags = fields.get("flags") or fields.get("Features") or ""
    generation = None
    if "cpu family" in fields and "model" in fields:
        generation = f"family {fields['cpu family']} model {fields['model']}"
    return model, generation, set(flags.split())


def value_at(results: Any, key: str) -> Any:
    """The value at a dotted ``key`` of a results file (``"after.success"``, ``"envs.FrozenLake.metrics"``;
    a list is indexed by number). KeyError names the part that is missing."""
    value = results
    for part in key.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(f"{key!r}: no {part!r} there")
    return value
