"""The ecosystem adapters stay optional and light: ``import envs`` imports none of the libraries, and making
an adapted env imports no torch, ray, vllm or transformers."""

import json
import subprocess
import sys

import pytest

from envs.ecosystem import ALL_IDS, ECOSYSTEM_IDS


def loaded_after(code: str) -> set[str]:
    code += ";import json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_import_envs_imports_no_ecosystem_library():
    loaded = loaded_after("import envs, envs.contract")
    assert not loaded & {"reasoning_gym", "textarena", "minigrid"}


def test_adapted_envs_import_no_heavy_frameworks():
    if len(ECOSYSTEM_IDS) < len(ALL_IDS):
        pytest.skip("the ecosystem extra is not installed (make test installs it)")
    one_per_library = {env_id.split("/")[0]: env_id for env_id in ECOSYSTEM_IDS}.values()
    makes = ";".join(f"gym.make({env_id!r}).reset(seed=0)" for env_id in one_per_library)
    loaded = loaded_after(f"import gymnasium as gym, envs;{makes}")
    assert not loaded & {"torch", "ray", "vllm", "transformers"}
