"""The disk a run's checkpoints need, checked before ``experiments.train`` and ``experiments.sweep`` write
them, and the message a full disk ends a run with.

A DAPO checkpoint holds the learner's trainable parameters in float32 (the learner keeps float32 master
weights whatever its compute dtype, models/policy_module.py) and AdamW's two float32 moments of each: 12
bytes per trainable parameter (with LoRA the adapters alone: the frozen base is the model directory's). On
top of that come the weights a tied model saves twice, the replay buffer and the RNG states
(``CHECKPOINT_OVERHEAD``), and for the run as a whole its logs and results (``MARGIN_BYTES``): SmolLM2-135M's
checkpoint is estimated at 134.5M x 12 x 1.25 = 2.0 GB.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

BYTES_PER_PARAMETER = 12  # float32 master weight (4) + AdamW's two float32 moments (8)
CHECKPOINT_OVERHEAD = 1.25  # tied weights saved twice, the replay buffer, RNG states
MARGIN_BYTES = 512 * 10**6  # logs, metrics, TensorBoard files, summaries
# Words of a full disk in errors that lost their errno on the way (Ray task errors, Tune's error files).
DISK_FULL_WORDS = ("No space left on device", f"[Errno {errno.ENOSPC}]")


def model_parameters(model_dir: str | Path) -> dict[str, tuple[int, ...]] | None:
    """Every tensor's shape in a local model directory's safetensors files (their headers only: nothing is
    loaded); None where there are none (a hub id, another format)."""
    files = sorted(Path(model_dir).glob("*.safetensors")) if Path(model_dir).is_dir() else []
    if not files:
        return None
    shapes = {}
    for file in files:
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        shapes.update({name: tuple(info["shape"]) for name, info in header.items() if name != "__metadata__"})
    return shapes


def trainable_parameters(shapes: dict[str, tuple[int, ...]], lora_rank: int = 0) -> int:
    """Parameters the learner trains: all of them, or with LoRA rank r an upper bound of the adapters'
    (r x (in + out) for every linear weight but the embeddings and the output head, peft's "all-linear")."""
    if not lora_rank:
        return sum(math.prod(shape) for shape in shapes.values())
    linear = [
        shape
        for name, shape in shapes.items()
        if len(shape) == 2 and "embed" not in name and "lm_head" not in name
    ]
    return sum(lora_rank * (rows + columns) for rows, columns in linear)


def checkpoint_bytes(model: str | None, lora_rank: int = 0) -> int | None:
    """Estimated size of one checkpoint of a run training ``model`` (a DAPOConfig's ``model_path``: a name,
    a local directory, None for the tiny model); None when the model's size cannot be read (a hub id, no
    safetensors files)."""
    from models.names import resolve_model_path

    shapes = model_parameters(resolve_model_path(model))
    if shapes is None:
        return None
    return int(trainable_parameters(shapes, lora_rank) * BYTES_PER_PARAMETER * CHECKPOINT_OVERHEAD)


def needed_bytes(checkpoint: int | None, copies: int) -> int:
    """The disk a run needs: ``copies`` checkpoints that can exist at once, plus the margin."""
    return (checkpoint or 0) * copies + MARGIN_BYTES


def _existing(folder: str | Path) -> Path:
    """``folder``, or where it does not exist yet its nearest existing parent (on the disk it will be on)."""
    path = Path(folder).resolve()
    while not path.exists():
        path = path.parent
    return path


def free_bytes(folder: str | Path) -> int:
    """Free space on the disk that holds (or will hold) ``folder``."""
    return shutil.disk_usage(_existing(folder)).free


def same_disk(a: str | Path, b: str | Path) -> bool:
    """Whether two folders are on one filesystem."""
    return _existing(a).stat().st_dev == _existing(b).stat().st_dev


def size(count: int | float) -> str:
    """Bytes for a person: ``2.1 GB``, ``512 MB``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} B"


def check_free_space(prog: str, folder: str | Path, checkpoint: int | None, copies: int, fix: str) -> int:
    """The bytes the run needs in ``folder``; a ``SystemExit`` naming the folder, the space needed and free,
    and ``fix`` (the command's own ways out) where the disk has less free."""
    needed = needed_bytes(checkpoint, copies)
    free = free_bytes(folder)
    if free < needed:
        what = (
            f"{copies} checkpoint(s) of about {size(checkpoint)} at once plus {size(MARGIN_BYTES)} for logs "
            "and results"
            if checkpoint
            else f"{size(MARGIN_BYTES)} for logs and results (the model's size is unknown)"
        )
        raise SystemExit(
            f"{prog}: not enough disk space in {folder}: the run needs about {size(needed)} ({what}), "
            f"{size(free)} is free. Free space on that disk, or {fix}."
        )
    return needed


def disk_full(error: BaseException | str | None) -> bool:
    """Whether ``error`` (or an error it was raised from, or the text of one that crossed a process, such as
    Tune's error.txt) is a full disk."""
    if isinstance(error, str):
        return any(words in error for words in DISK_FULL_WORDS)
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            return True
        if any(words in str(error) for words in DISK_FULL_WORDS):
            return True
        error = error.__cause__ or error.__context__
    return False


def disk_full_message(prog: str, folder: str | Path, needed: int, after: str) -> str:
    """What a run that filled its disk ends with: the folder, the space it needs and has, and ``after``
    (what was kept and how to go on)."""
    return (
        f"{prog}: the disk of {folder} is full ({size(free_bytes(folder))} free; the run needs about "
        f"{size(needed)} there). {after}"
    )


@contextlib.contextmanager
def exit_when_full(prog: str, folder: str | Path, needed: int, after: str) -> Iterator[None]:
    """Turns a full disk inside the block into :func:`disk_full_message`'s ``SystemExit``."""
    try:
        yield
    except OSError as error:
        if not disk_full(error):
            raise
        raise SystemExit(disk_full_message(prog, folder, needed, after)) from error
