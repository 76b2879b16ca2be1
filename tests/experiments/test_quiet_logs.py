"""What a run prints (experiments/common/quiet_logs.py): known-harmless library lines go to the run's log file
alone, anything else still shows. The real command's console and run.log: tests/experiments/test_evaluate.py.
"""

from __future__ import annotations

import importlib
import logging
import os
import warnings
from pathlib import Path

import pytest

from experiments.common import quiet_logs

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
    # vLLM's logger as `python -m experiments.<command>` leaves it (VLLM_CONFIGURE_LOGGING=0, set before vLLM
    # is imported): no handler of its own, propagating to the root. In this test process vLLM may have been
    # imported first, with its own handler on stdout.
    vllm_logger = logging.getLogger("vllm")
    monkeypatch.setattr(vllm_logger, "handlers", [])
    monkeypatch.setattr(vllm_logger, "propagate", True)
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
