"""docs/scaling.md's GPU cluster configuration, checked without GPUs: it validates, and RLlib turns it into
the resource requests the page states. Nothing is started."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from algorithms.dapo import DAPO
from algorithms.dapo.learner import DAPOTorchLearner
from experiments import sweep
from experiments.common.run_config import build_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"


@pytest.fixture(scope="module")
def gpu_cluster_config():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    source = next(block for block in blocks if "def gpu_cluster_config" in block)
    namespace: dict = {}
    exec(compile(source, str(DOC), "exec"), namespace)
    return namespace["gpu_cluster_config"]


def test_gpu_cluster_config_validates_at_paper_scale(gpu_cluster_config):
    config = gpu_cluster_config("/models/Qwen2.5-7B-Instruct")
    config.validate()
    assert (config.group_size, config.prompts_per_iteration, config.max_response_tokens) == (16, 512, 20480)
    assert (config.lr, config.minibatch_size, config.eps_high, config.replay_mode) == (
        1e-6,
        512,
        0.28,
        "freshper",
    )
    assert config.max_context_tokens > config.max_response_tokens
    module = config.get_default_rl_module_spec()
    assert module.model_config["model_path"] == "/models/Qwen2.5-7B-Instruct"
    assert module.model_config["engine_dtype"] == module.model_config["model_dtype"] == "bfloat16"
    assert config.get_default_learner_class() is DAPOTorchLearner


def test_gpu_cluster_config_requests_one_gpu_per_runner_and_learner(gpu_cluster_config):
    config = gpu_cluster_config("/models/m", num_env_runners=4, num_learners=4)
    bundles = DAPO.default_resource_request(config).bundles
    driver, runners, learners = bundles[0], bundles[1:5], bundles[5:]
    assert driver == {"CPU": 1.0}
    assert runners == [{"CPU": 1.0, "GPU": 1.0}] * 4
    assert learners == [{"GPU": 1.0}] * 4
    assert sum(b.get("GPU", 0) for b in bundles) == 8  # "asks Ray for 8 GPUs"


def test_cli_gpu_flags_request_the_same_layout():
    args = sweep.parse_args(
        ["--model", "/models/m", "--gpu", "--num-env-runners", "2", "--num-learners", "3"]
    )
    config = build_config(args.run)
    assert (config.num_env_runners, config.num_gpus_per_env_runner) == (2, 1)
    assert (config.num_learners, config.num_gpus_per_learner) == (3, 1)
    bundles = DAPO.default_resource_request(config).bundles
    assert sum(b.get("GPU", 0) for b in bundles) == 5
