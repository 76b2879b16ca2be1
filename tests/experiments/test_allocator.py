"""The entry points' allocator: ``python -m experiments.<command>`` re-executes once with the chosen library
preloaded; importing ``experiments`` anywhere else changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.common.allocator import (
    TCMALLOC_CANDIDATES,
    VARIABLE,
    AllocatorError,
    chosen_library,
    preload_with,
)

ROOT = Path(__file__).resolve().parents[2]


def a_shared_library() -> str:
    """A real library harmless to preload (zlib, on every Linux distribution): it stands in for an
    allocator, so the test runs where tcmalloc is not installed."""
    for directory in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if os.path.isfile(f"{directory}/libz.so.1"):
            return f"{directory}/libz.so.1"
    pytest.skip("no libz.so.1 in the usual places")


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``python *args`` from the repository root, with no preload or choice but `env`'s."""
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", VARIABLE)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_auto_picks_the_first_installed_candidate_and_none_without_one(tmp_path):
    present = tmp_path / "libtcmalloc_minimal.so.4"
    present.write_bytes(b"")
    assert chosen_library({}, (str(tmp_path / "missing.so"), str(present))) == str(present)
    assert chosen_library({VARIABLE: "auto"}, (str(tmp_path / "missing.so"),)) is None
    assert chosen_library({VARIABLE: "system"}, (str(present),)) is None


def test_a_missing_library_is_an_error_that_says_what_to_do(tmp_path):
    with pytest.raises(AllocatorError, match="no such file.*'system'.*make tcmalloc"):
        chosen_library({VARIABLE: str(tmp_path / "libjemalloc.so.2")})


def test_the_library_is_prepended_once_and_a_users_own_allocator_is_kept():
    tcmalloc = TCMALLOC_CANDIDATES[0]
    environ = preload_with(tcmalloc, {"LD_PRELOAD": "/opt/libfoo.so", "HOME": "/root"})
    assert environ == {"LD_PRELOAD": f"{tcmalloc} /opt/libfoo.so", "HOME": "/root"}
    assert preload_with(tcmalloc, environ) is None  # the re-executed process does not re-execute
    assert preload_with(tcmalloc, {"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}) is None
    chosen = {VARIABLE: tcmalloc, "LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}
    assert preload_with(tcmalloc, chosen)["LD_PRELOAD"] == f"{tcmalloc} /usr/lib/libjemalloc.so.2"


def test_an_entry_point_runs_with_the_chosen_library_preloaded():
    library = a_shared_library()
    out = run("-m", "experiments.which_allocator", **{VARIABLE: library})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"memory allocator: {library} (preloaded)"
    # A preloaded library that is not an allocator (vLLM's CPU setup preloads libgomp) is not reported as one.
    out = run("-m", "experiments.which_allocator", **{VARIABLE: "system", "LD_PRELOAD": library})
    assert out.stdout.strip() == f"memory allocator: glibc malloc ({VARIABLE}=system)"


def test_a_bad_choice_stops_an_entry_point_before_it_starts_but_not_an_import(tmp_path):
    missing = str(tmp_path / "nothing.so")
    out = run("-m", "experiments.train", **{VARIABLE: missing})
    assert out.returncode == 1 and "no such file" in out.stderr
    imported = run("-c", "import experiments.train", **{VARIABLE: missing})
    assert imported.returncode == 0, imported.stderr


@pytest.mark.skipif(chosen_library({}) is None, reason="tcmalloc is not installed (make tcmalloc)")
def test_entry_points_get_tcmalloc_by_default_where_it_is_installed():
    out = run("-m", "experiments.which_allocator")
    assert out.stdout.strip() == f"memory allocator: {chosen_library({})} (preloaded)"
