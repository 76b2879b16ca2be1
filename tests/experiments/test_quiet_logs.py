"""What a run prints (experiments/common/quiet_logs.py): known-harmless library lines go to the run's log file
alone, anything else still shows; and the real command's console after building an engine."""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from experiments.common import quiet_logs
from experiments.common.quiet_logs import VERBOSE
from models.tiny import tiny_lm_path

REPO = Path(__file__).resolve().parents[2]
KNOWN_LOGGER = "vllm.config.vllm"
KNOWN = "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup."


def record(name: str, message: str, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_the_filter_hides_a_listed_message_and_lets_an_unlisted_one_or_an_error_through():
    entries = tuple(entry for entry in quiet_logs.KNOWN_HARMLESS if entry.logger == KNOWN_LOGGER)
    known = quiet_logs.KnownHarmless(entries)
    held = quiet_logs._Held()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quiet_logs, "_log", held)
        assert not known.filter(record(KNOWN_LOGGER, KNOWN))
        assert known.filter(record(KNOWN_LOGGER, "KV cache is too small for the longest request"))
        assert known.filter(record(KNOWN_LOGGER, KNOWN, logging.ERROR))
    assert [r.getMessage() for r in held.records] == [KNOWN]  # the hidden one, kept for the log file


@pytest.fixture
def fresh_policy(monkeypatch):
    """install() in this process, undone afterwards: its handlers, filters, levels and warnings hook."""
    root = logging.getLogger()
    monkeypatch.setattr(quiet_logs, "_console", None)
    monkeypatch.setattr(quiet_logs, "_log", quiet_logs._Held())
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    names = {entry.logger for entry in quiet_logs.KNOWN_HARMLESS} | {*quiet_logs.LIBRARY_LOGGERS}
    for logger in map(logging.getLogger, names):
        monkeypatch.setattr(logger, "filters", [])
        monkeypatch.setattr(logger, "handlers", list(logger.handlers))
        monkeypatch.setattr(logger, "level", logger.level)
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setattr(logging, "_warnings_showwarning", None)
    monkeypatch.delenv(quiet_logs.VERBOSE, raising=False)
    yield
    quiet_logs._log.close()


def test_the_console_lacks_a_known_message_and_the_log_file_keeps_it(fresh_policy, tmp_path, capsys):
    quiet_logs.install(None)  # as python -m experiments.<command> does before parsing its options
    logging.getLogger(KNOWN_LOGGER).warning("%s", KNOWN)
    log_file = quiet_logs.install(tmp_path / "run" / quiet_logs.LOG_FILE_NAME)
    logging.getLogger(KNOWN_LOGGER).warning("a warning nobody listed")
    warnings.warn("a Python warning nobody listed", UserWarning, stacklevel=1)
    logging.getLogger(KNOWN_LOGGER).error("%s", KNOWN)

    console = capsys.readouterr().err
    logged = log_file.read_text()
    assert KNOWN not in console.replace(f"ERROR {KNOWN_LOGGER}: {KNOWN}", "")
    assert "a warning nobody listed" in console and "a Python warning nobody listed" in console
    assert f"ERROR {KNOWN_LOGGER}: {KNOWN}" in console  # errors always show
    for line in (KNOWN, "a warning nobody listed", "a Python warning nobody listed"):
        assert line in logged
    held = next(line for line in logged.splitlines() if KNOWN in line)
    assert held.startswith(("20", "19")) and f"WARNING {KNOWN_LOGGER}" in held  # a timestamp, its logger


def test_verbose_shows_the_known_messages_too(fresh_policy, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(quiet_logs.VERBOSE, "1")
    log_file = quiet_logs.install(tmp_path / quiet_logs.LOG_FILE_NAME)
    logging.getLogger(KNOWN_LOGGER).warning("%s", KNOWN)
    assert KNOWN in capsys.readouterr().err
    assert KNOWN in log_file.read_text()
    assert "TORCH_CPP_LOG_LEVEL" not in quiet_logs.environment()


def test_ray_workers_get_the_settings_the_filter_and_the_log_file(tmp_path):
    runtime_env = quiet_logs.worker_runtime_env(tmp_path / quiet_logs.LOG_FILE_NAME)
    env_vars = runtime_env["env_vars"]
    assert env_vars["TORCH_CPP_LOG_LEVEL"] == os.environ.get("TORCH_CPP_LOG_LEVEL", "ERROR")
    assert env_vars["VLLM_CONFIGURE_LOGGING"] == os.environ.get("VLLM_CONFIGURE_LOGGING", "0")
    assert env_vars[quiet_logs.RUN_LOG] == str(tmp_path / quiet_logs.LOG_FILE_NAME)
    module, _, function = runtime_env["worker_process_setup_hook"].rpartition(".")
    assert getattr(importlib.import_module(module), function) is quiet_logs.install_in_worker


# Lines today's libraries print before a run's first result (docs/training.md): none may reach the console.
CONSOLE_NOISE = (
    "Started a local Ray instance",
    "on the new API stack",
    "RLModuleConfig",
    "Triton",
    "CUDA_HOME",
    "NUMA binding",
    "reduce_op",
    "Loading safetensors checkpoint shards",
    "Enforce eager set",
    "LD_PRELOAD",
    "torch.set_num_threads",
    "Trainable.setup took",
    "gputil",
)


def test_the_evaluate_command_shows_its_own_lines_and_logs_the_rest(tmp_path):
    """The real entry point (its process-wide settings, Ray, one engine) on 2 tasks of one env."""
    output = tmp_path / "evaluation"
    command = [
        sys.executable, "-m", "experiments.evaluate", "--envs", "FrozenLake", "--model", str(tiny_lm_path()),
        "--tasks", "2", "--set", "max_response_tokens=12", "--set", "engine_kv_cache_gib=0.5",
        "--output", str(output),
    ]  # fmt: skip
    environ = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", VERBOSE)}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), environ.get("PYTHONPATH")]))
    done = subprocess.run(command, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300)
    console = done.stdout + done.stderr
    assert done.returncode == 0, console
    assert "FrozenLake: success" in console
    assert [line for line in CONSOLE_NOISE if line in console] == []
    logged = (output / quiet_logs.LOG_FILE_NAME).read_text()
    for line in ("Started a local Ray instance", "on the new API stack", "Enforce eager set"):
        assert line in logged
