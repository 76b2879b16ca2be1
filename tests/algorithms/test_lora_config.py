"""DAPOConfig's LoRA keys: defaults, what reaches the policy module, and validation with clear messages."""

from __future__ import annotations

import pytest

from algorithms.dapo import DAPOConfig


def config(**training) -> DAPOConfig:
    return DAPOConfig().environment("freshrl/FrozenLake-v0").training(**training)


def test_defaults_are_full_fine_tuning_and_reach_the_module():
    default = config()
    default.validate()
    assert default.policy_model_config()["lora_rank"] == 0
    lora = config(lora_rank=16, lora_target_modules=["q_proj", "v_proj"])
    lora.validate()
    module_config = lora.policy_model_config()
    assert module_config["lora_rank"] == 16
    assert module_config["lora_alpha"] == 32.0  # None: 2 x rank
    assert module_config["lora_dropout"] == 0.0
    assert module_config["lora_target_modules"] == ["q_proj", "v_proj"]
    assert config(lora_rank=16, lora_alpha=8).policy_model_config()["lora_alpha"] == 8.0


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"lora_rank": -1}, "lora_rank must be an integer >= 0"),
        ({"lora_rank": 4.5}, "lora_rank must be an integer >= 0"),
        ({"lora_rank": True}, "lora_rank must be an integer >= 0"),
        ({"lora_alpha": 0}, "lora_alpha must be a number > 0, or None"),
        ({"lora_alpha": "16"}, "lora_alpha must be a number > 0, or None"),
        ({"lora_dropout": 1.0}, r"lora_dropout must be in \[0, 1\)"),
        ({"lora_dropout": -0.1}, r"lora_dropout must be in \[0, 1\)"),
        ({"lora_target_modules": []}, "lora_target_modules must be 'all-linear' or a non-empty list"),
        ({"lora_target_modules": "q_proj"}, "lora_target_modules must be 'all-linear' or a non-empty list"),
        ({"lora_target_modules": ["q_proj", ""]}, "lora_target_modules must be 'all-linear' or a non-empty"),
    ],
)
def test_bad_lora_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        config(**{"lora_rank": 8, **settings}).validate()
