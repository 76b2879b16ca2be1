"""envs/ stays below the other layers: the grid envs, the contract check and the examples import no torch,
ray, vllm or transformers."""

import json
import subprocess
import sys


def test_grid_envs_import_no_heavy_frameworks():
    code = (
        "import json, sys, gymnasium as gym, envs, envs.group, envs.sokoban, envs.frozen_lake, envs.contract;"
        "import examples.guess_number, examples.color_vision;"
        "[gym.make(i).reset(seed=0) for i in ('freshrl/Sokoban-v0', 'freshrl/FrozenLakeVision-v0')];"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert not loaded & {"torch", "ray", "vllm", "transformers"}
