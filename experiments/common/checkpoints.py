"""Which file of an RLlib checkpoint folder is unreadable, and a restore that says so.

An RLlib checkpoint (``Algorithm.save_to_path``) is a tree of folders, one per component, each with
``metadata.json`` (the top one: ``rllib_checkpoint.json``) naming its state file (``state``,
``module_state``, ``algorithm_state``; ``.pkl`` or ``.msgpack``) and ``class_and_ctor_args.pkl``. A write cut
short (a full disk, a killed process) leaves one of them truncated or missing, and RLlib's restore then fails
with a bare ``EOFError`` or ``UnpicklingError`` that names no file. :func:`restore` finds the file.
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path
from typing import Any

TOP_METADATA = "rllib_checkpoint.json"
METADATA = "metadata.json"


def bad_file(folder: str | Path) -> tuple[Path, str] | None:
    """The first file of the checkpoint ``folder`` that is missing, empty or cannot be read back, with why;
    None where every file reads. Reads each file whole, as a restore would (unpickling needs the classes
    the checkpoint names, so run it where they import)."""
    folder = Path(folder)
    if not (folder / TOP_METADATA).is_file():
        return folder / TOP_METADATA, "missing: this is not an RLlib checkpoint folder"
    for metadata in [folder / TOP_METADATA, *sorted(folder.rglob(METADATA))]:
        problem = _unreadable(metadata)
        if problem:
            return metadata, problem
        named = json.loads(metadata.read_text())
        for stem in filter(None, (named.get("class_and_ctor_args_file"), named.get("state_file"))):
            # The state file is named without its suffix (.pkl or .msgpack), the other one with it.
            names = [stem] if Path(stem).suffix else [f"{stem}.pkl", f"{stem}.msgpack"]
            if not any((metadata.parent / name).is_file() for name in names):
                return metadata.parent / names[0], f"missing (named by {metadata.name})"
    for file in sorted(path for path in folder.rglob("*") if path.is_file()):
        problem = _unreadable(file)
        if problem:
            return file, problem
    return None


def _unreadable(file: Path) -> str | None:
    """Why ``file`` cannot be read back by the reader of its kind (None: it can, or it is of no kind read
    here)."""
    readers = {
        ".pkl": _read_pickle,
        ".json": lambda path: json.loads(path.read_text()),
        ".msgpack": _read_msgpack,
        ".pt": _read_torch,
        ".pth": _read_torch,
        ".safetensors": _read_safetensors_header,
    }
    reader = readers.get(file.suffix)
    if reader is None:
        return None
    if file.stat().st_size == 0:
        return "empty (0 bytes)"
    try:
        reader(file)
    except Exception as error:  # any failure to read is the answer; the caller names the file
        return f"unreadable ({type(error).__name__}: {error})" if str(error) else f"unreadable ({error!r})"
    return None


def _read_pickle(path: Path) -> Any:
    with path.open("rb") as handle:
        return pickle.load(handle)


def _read_msgpack(path: Path) -> Any:
    import msgpack

    with path.open("rb") as handle:
        return msgpack.unpack(handle, strict_map_key=False)


def _read_torch(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def _read_safetensors_header(path: Path) -> None:
    """The header parses and its tensors end where the file does (a truncated file's do not)."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    end = max((info["data_offsets"][1] for name, info in header.items() if name != "__metadata__"), default=0)
    if 8 + length + end != path.stat().st_size:
        raise ValueError(f"{path.stat().st_size} bytes, its header describes {8 + length + end}")


def corrupt_message(prog: str, folder: str | Path, file: Path, why: str, fix: str) -> str:
    return f"{prog}: the checkpoint {folder} cannot be restored: {file} is {why}. {fix}"


def check_restorable(prog: str, folder: str | Path, fix: str) -> None:
    """A ``SystemExit`` naming the unreadable file of the checkpoint ``folder`` and ``fix``, if there is
    one."""
    found = bad_file(folder)
    if found:
        raise SystemExit(corrupt_message(prog, folder, *found, fix))


def restore(prog: str, algo, folder: str | Path, fix: str) -> None:
    """``algo.restore_from_path(folder)``; where it fails, a ``SystemExit`` naming the checkpoint's bad file
    and ``fix`` (the original error is its cause; raised as it is where every file reads)."""
    folder = Path(folder).resolve()
    try:
        algo.restore_from_path(str(folder))
    except Exception as error:
        found = bad_file(folder)
        if found is None:
            raise
        raise SystemExit(corrupt_message(prog, folder, *found, fix)) from error
