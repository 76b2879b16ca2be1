"""benchmarks/gpu_check.sh, checked without a GPU: it runs from the repository root wherever it is called
from, and stops with a clear message on a machine without an NVIDIA GPU."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def test_the_script_changes_to_the_repository_root() -> None:
    match = re.search(r'^cd "\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)/([^"]*)"', SCRIPT.read_text(), re.M)
    assert match, "gpu_check.sh should cd relative to its own folder"
    assert (SCRIPT.parent / match.group(1)).resolve() == ROOT


def test_without_a_gpu_it_stops_naming_the_reason(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")  # present, but finds no GPU
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "finds no NVIDIA GPU" in done.stderr
    assert not (tmp_path / "docs").exists()  # it writes no log outside the repository
