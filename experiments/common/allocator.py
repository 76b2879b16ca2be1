"""The memory allocator of the entry points: tcmalloc where it is installed, glibc's malloc otherwise.

A training process frees and reallocates gigabytes every iteration (the engine's weights and KV cache
released for the update, the learner's activations and gradients); glibc's malloc keeps much of that memory
after it is freed, tcmalloc returns it. On ``dapo_step`` (0.5B shape) tcmalloc took our peak from 8.9 to
7.9 GiB with gradient checkpointing and from 9.9 to 9.0 without, at the same speed (README, Performance).
vLLM's CPU guide asks for the same ``LD_PRELOAD``, and torch's ``torch.backends.xeon.run_cpu`` launcher does
the same.

A preload must be in place when the process starts, so ``python -m experiments.<command>`` and ``python -m
benchmarks.<name>`` re-execute themselves once, with the library prepended to ``LD_PRELOAD``, before anything
heavy is imported (``experiments/__init__.py`` and ``benchmarks/__init__.py`` call
:func:`preload_for_entry_point`). The child processes it starts (Ray
workers, the benchmarks' spawned sides) inherit the variable. ``FRESHRL_MALLOC`` chooses:

- unset or ``auto``: tcmalloc where one of :data:`TCMALLOC_CANDIDATES` exists, glibc otherwise;
- ``system``: glibc's malloc, no preload;
- a path to a shared library (e.g. jemalloc's): that library; a missing file is an error.

Install tcmalloc with ``make tcmalloc`` (Debian/Ubuntu: ``apt-get install libtcmalloc-minimal4``).
``python -m experiments.which_allocator`` prints which allocator the commands get; ``train`` and ``dapo_step``
print it in their header.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

VARIABLE = "FRESHRL_MALLOC"
# Where distributions put gperftools' tcmalloc (minimal: no heap profiler, the variant vLLM recommends).
TCMALLOC_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib64/libtcmalloc_minimal.so.4",
    "/usr/lib/libtcmalloc_minimal.so.4",
)
INSTALL_HINT = "make tcmalloc   (Debian/Ubuntu: apt-get install libtcmalloc-minimal4)"
SYSTEM_MALLOC = "glibc malloc" if sys.platform.startswith("linux") else "the system's malloc"


class AllocatorError(SystemExit):
    """``FRESHRL_MALLOC`` names something that cannot be preloaded; exits with its message."""


def requested(environ: Mapping[str, str]) -> str:
    """What ``FRESHRL_MALLOC`` asks for: "auto" (also when unset or empty), "system", or a path."""
    return environ.get(VARIABLE, "").strip() or "auto"


def chosen_library(
    environ: Mapping[str, str], candidates: tuple[str, ...] = TCMALLOC_CANDIDATES
) -> str | None:
    """The library ``FRESHRL_MALLOC`` asks for (None: glibc's malloc). Raises AllocatorError for a missing
    path."""
    choice = requested(environ)
    if choice == "auto":
        return next((path for path in candidates if os.path.isfile(path)), None)
    if choice == "system":
        return None
    if not os.path.isfile(choice):
        raise AllocatorError(
            f"{VARIABLE}={choice!r}: no such file. Use 'auto' (tcmalloc where installed), 'system' (glibc's "
            f"malloc) or the path of a shared library; to install tcmalloc: {INSTALL_HINT}"
        )
    return choice


def preloaded_libraries(environ: Mapping[str, str]) -> list[str]:
    """The entries of ``LD_PRELOAD`` (separated by spaces or colons, as ld.so accepts)."""
    return environ.get("LD_PRELOAD", "").replace(":", " ").split()


def preload_with(library: str, environ: Mapping[str, str]) -> dict[str, str] | None:
    """The environment to re-execute with so that `library` is preloaded; None when it already is (the
    re-executed process, or a user's own LD_PRELOAD), so a process re-executes at most once. In ``auto``
    mode an allocator the user preloads (any ``*malloc*`` library, e.g. jemalloc) is kept as it is."""
    preloaded = preloaded_libraries(environ)
    names = [os.path.basename(entry) for entry in preloaded]
    if os.path.basename(library) in names:
        return None
    if requested(environ) == "auto" and any("malloc" in name for name in names):
        return None
    return {**environ, "LD_PRELOAD": " ".join([library, *preloaded])}


def preload_for_entry_point() -> None:
    """Re-executes ``python -m experiments.<command> ...`` (or ``benchmarks.<name>``) with the chosen
    allocator preloaded (see the module docstring). Only while ``-m`` is locating the module (``sys.argv[0] ==
    "-m"``, CPython's documented behaviour): importing ``experiments`` from tests or other programs never
    re-executes anything."""
    if sys.argv[:1] != ["-m"] or not hasattr(sys, "orig_argv"):
        return
    library = chosen_library(os.environ)
    if library is None:
        return
    environ = preload_with(library, os.environ)
    if environ is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environ)


def current_allocator() -> str:
    """The allocator preloaded into this process, or the system malloc: the ``LD_PRELOAD`` entries mapped into
    it (``/proc/self/maps``) that are an allocator (``*malloc*``) or the library ``FRESHRL_MALLOC`` names.
    Others are not allocators (vLLM's CPU setup adds torch's libgomp to ``LD_PRELOAD``)."""
    try:
        with open("/proc/self/maps") as maps:
            mapped = {os.path.realpath(fields[-1]) for fields in map(str.split, maps) if len(fields) >= 6}
    except OSError:  # no procfs (macOS): nothing is preloaded there either
        return SYSTEM_MALLOC
    named = requested(os.environ)
    loaded = [
        entry
        for entry in preloaded_libraries(os.environ)
        if os.path.realpath(entry) in mapped and ("malloc" in os.path.basename(entry) or entry == named)
    ]
    return ", ".join(loaded) if loaded else SYSTEM_MALLOC


def describe() -> str:
    """One line for a run's header: the allocator in use, and how to get tcmalloc when it is missing."""
    allocator = current_allocator()
    if allocator != SYSTEM_MALLOC:
        return f"memory allocator: {allocator} (preloaded)"
    if requested(os.environ) == "system":
        return f"memory allocator: {SYSTEM_MALLOC} ({VARIABLE}=system)"
    if chosen_library(os.environ) is None:
        return f"memory allocator: {SYSTEM_MALLOC} (no tcmalloc; it lowers peak memory: {INSTALL_HINT})"
    return f"memory allocator: {SYSTEM_MALLOC}"
