"""DAPOConfig's learner and engine dtypes: "auto" resolved once, in the driver, by validate(); an explicit
choice wins; GPU runs resolve for the GPU; the concrete dtypes are what the policy modules and the mismatch
correction see. The capability probes are replaced: nothing computes in bf16."""

from __future__ import annotations

import pickle

import pytest

import envs  # noqa: F401  (registers freshrl/FrozenLake-v0)
from algorithms.dapo import DAPOConfig, apply_algorithm, apply_scale
from models import dtype as dtypes

ENV = "freshrl/FrozenLake-v0"


@pytest.fixture
def native_bf16(monkeypatch: pytest.MonkeyPatch):
    """``set(cpu, gpu=True)``: whether the CPU (and the GPU) report native bf16."""

    def set_native(cpu: bool, gpu: bool = True) -> None:
        monkeypatch.setattr(dtypes, "cpu_native_bf16", lambda: (cpu, "CPU probe"))
        monkeypatch.setattr(dtypes, "cuda_native_bf16", lambda: (gpu, "GPU probe"))

    return set_native


def validated(config: DAPOConfig) -> DAPOConfig:
    config.validate()
    return config


def model_dtypes(config: DAPOConfig) -> tuple[str, str]:
    model_config = config.policy_model_config()
    return model_config["model_dtype"], model_config["engine_dtype"]


@pytest.mark.parametrize(("cpu", "expected"), [(True, "bfloat16"), (False, "float32")])
def test_auto_defaults_follow_the_cpu(native_bf16, cpu: bool, expected: str):
    native_bf16(cpu=cpu)
    config = validated(DAPOConfig().environment(ENV))
    assert (config.model_dtype, config.engine_dtype) == ("auto", "auto")  # the request stays as given
    assert model_dtypes(config) == (expected, expected)
    assert config.resolved_dtypes()["model_dtype_reason"] == f"{expected}: CPU probe"


@pytest.mark.parametrize("resources", [{"num_gpus_per_learner": 1}, {"num_gpus_per_env_runner": 1}])
def test_a_run_that_requests_gpus_resolves_for_the_gpu(native_bf16, resources: dict):
    native_bf16(cpu=False, gpu=True)
    config = DAPOConfig().environment(ENV)
    if "num_gpus_per_learner" in resources:
        config = config.learners(**resources)
    else:
        config = config.env_runners(num_env_runners=1, **resources)
    assert model_dtypes(validated(config)) == ("bfloat16", "bfloat16")
    assert config.resolved_dtypes()["engine_dtype_reason"] == "bfloat16: GPU probe"


@pytest.mark.parametrize("cpu", [True, False])
def test_an_explicit_dtype_wins(native_bf16, cpu: bool):
    native_bf16(cpu=cpu)
    config = validated(DAPOConfig().environment(ENV).training(model_dtype="float32", engine_dtype="bfloat16"))
    assert model_dtypes(config) == ("float32", "bfloat16")
    gpu = validated(
        DAPOConfig().environment(ENV).training(model_dtype="float32").learners(num_gpus_per_learner=1)
    )
    assert model_dtypes(gpu)[0] == "float32"


@pytest.mark.parametrize("key", ["model_dtype", "engine_dtype"])
@pytest.mark.parametrize("value", ["fp16", "float16", "bf16", None])
def test_validate_refuses_an_unknown_dtype(key: str, value):
    config = DAPOConfig().environment(ENV).training(**{key: value})
    with pytest.raises(ValueError, match=rf"{key} must be one of \('auto', 'float32', 'bfloat16'\).*got"):
        config.validate()


@pytest.mark.parametrize(("cpu", "correction"), [(True, True), (False, False)])
def test_mismatch_correction_auto_follows_the_resolved_dtypes(native_bf16, cpu: bool, correction: bool):
    native_bf16(cpu=cpu)
    # The smollm2 scale: learner "auto", engine float32; the correction is on only where the learner is bf16.
    config = validated(apply_scale(apply_algorithm(DAPOConfig().environment(ENV), "dapo"), "smollm2"))
    assert model_dtypes(config) == ("bfloat16" if cpu else "float32", "float32")
    assert config.resolved_mismatch_correction() is correction
    # Both "auto": the same dtype, so off.
    assert validated(DAPOConfig().environment(ENV)).resolved_mismatch_correction() is False


@pytest.mark.parametrize("cpu", [True, False])
def test_the_tiny_scale_is_float32_on_every_machine(native_bf16, cpu: bool):
    native_bf16(cpu=cpu)
    config = validated(apply_scale(apply_algorithm(DAPOConfig().environment(ENV), "dapo"), "tiny"))
    assert model_dtypes(config) == ("float32", "float32")
    assert config.resolved_mismatch_correction() is False


def test_workers_get_the_drivers_dtypes(native_bf16):
    """A learner or EnvRunner gets a copy of the driver's validated config: it keeps the driver's dtypes on
    a CPU that would resolve "auto" otherwise."""
    native_bf16(cpu=True)  # the driver's machine
    config = validated(DAPOConfig().environment(ENV))
    config.freeze()
    config.validate()  # again, frozen: keeps what it resolved
    native_bf16(cpu=False)  # the worker's machine
    worker_copy = pickle.loads(pickle.dumps(config))
    spec = worker_copy.get_default_rl_module_spec()
    assert (spec.model_config["model_dtype"], spec.model_config["engine_dtype"]) == ("bfloat16", "bfloat16")
    assert worker_copy.resolved_mismatch_correction() is False


def test_a_dtype_set_after_validate_is_resolved_afresh(native_bf16):
    native_bf16(cpu=True)
    config = validated(DAPOConfig().environment(ENV)).training(engine_dtype="float32")
    assert model_dtypes(config) == ("bfloat16", "float32")
    assert config.resolved_mismatch_correction() is True
