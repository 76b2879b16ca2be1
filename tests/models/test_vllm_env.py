"""vLLM's process environment and logging as models/vllm_env.py sets them."""

from __future__ import annotations

import logging

from models.vllm_env import RELOAD_LOGGER, configure_vllm_environment, quiet_expected_reload_warnings


def test_vllm_logs_warnings_and_errors_only_unless_the_user_says_otherwise(monkeypatch):
    monkeypatch.delenv("VLLM_LOGGING_LEVEL", raising=False)
    assert configure_vllm_environment()["VLLM_LOGGING_LEVEL"] == "WARNING"
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")
    assert configure_vllm_environment()["VLLM_LOGGING_LEVEL"] == "DEBUG"


def test_only_the_reload_warnings_of_layers_without_checkpoint_tensors_are_dropped():
    quiet_expected_reload_warnings()
    quiet_expected_reload_warnings()  # once is enough; twice adds nothing
    logger = logging.getLogger(RELOAD_LOGGER)
    assert len(logger.filters) == 1

    def shown(layer: str) -> bool:
        record = logger.makeRecord(
            logger.name, logging.WARNING, __file__, 0, "%s: Failed to load weights", (layer,), None
        )
        return bool(logger.filter(record))

    assert not shown("RotaryEmbedding")
    assert not shown("MRotaryEmbedding")
    assert not shown("FusedMMInputNorm")
    assert shown("QKVParallelLinear")  # a layer that really missed its weights still warns
