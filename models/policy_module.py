"""The policy as an RLlib ``TorchRLModule``: an HF model on learners, a vLLM engine on EnvRunners.

The learner-side module wraps any HF causal LM (``AutoModelForCausalLM``) or image-text model
(``AutoModelForImageTextToText``) and computes per-token logprobs and entropies of a padded batch of
trajectories, chunked so that no full-vocabulary softmax outlives its chunk (models/logprobs.py).
Parameters stay float32 (the optimizer's master weights); ``model_dtype="bfloat16"`` runs the forward pass
under autocast.

The inference-only module (``inference_only=True``, built by EnvRunners) holds no torch weights: it owns the
:class:`RolloutEngine` and :class:`ChatRenderer`, and ``set_state`` pushes the learner's weights into vLLM.
State dicts are torch tensors, not numpy, so bf16 survives RLlib's weight sync and checkpoints. A weight sync
(``get_state(inference_only=True)``) carries the engine's dtype: a bf16 engine receives half the bytes.

With ``lora_rank > 0`` the learner's model carries LoRA adapters (models/lora.py) and only they train; a
weight sync carries the merged weights (the engine sees an ordinary model), and a checkpoint the adapters.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch
from ray.rllib.core.rl_module.torch import TorchRLModule

from models.logprobs import token_logprobs
from models.names import resolve_model_path


def is_vision_model(model_path: str) -> bool:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path)
    return hasattr(config, "vision_config")


def load_hf_model(model_path: str) -> torch.nn.Module:
    """Load an HF policy in float32 (trainable master weights)."""
    if not Path(model_path).exists() and "/" not in model_path:
        raise FileNotFoundError(
            f"model path {model_path!r} does not exist. Pass a local model directory (or a hub id), or "
            "None for the offline tiny model (models.tiny.tiny_lm_path())."
        )
    if is_vision_model(model_path):
        from transformers import AutoModelForImageTextToText as auto_class
    else:
        from transformers import AutoModelForCausalLM as auto_class
    return auto_class.from_pretrained(model_path, dtype=torch.float32)


class LLMPolicyModule(TorchRLModule):
    """model_config keys: model_path, model_dtype, engine_dtype, max_context_tokens, engine_kv_cache_gib,
    system_prompt, temperature, share_prefix, pack_rows, gradient_checkpointing, seed, lora_rank, lora_alpha,
    lora_dropout, lora_target_modules (see DAPOConfig)."""

    def setup(self) -> None:
        config = self.model_config or {}
        self.model_path = resolve_model_path(config.get("model_path"), int(config.get("seed", 0)))
        self.model_dtype = config.get("model_dtype", "float32")
        engine_dtype = getattr(torch, str(config.get("engine_dtype", "float32")), None)
        # None ("auto"): weights are synced as they are and the engine casts them.
        self._sync_dtype = engine_dtype if isinstance(engine_dtype, torch.dtype) else None
        self.temperature = float(config.get("temperature", 1.0))
        self.share_prefix = bool(config.get("share_prefix", False))
        self.pack_rows = bool(config.get("pack_rows", False))
        self.gradient_checkpointing = bool(config.get("gradient_checkpointing", False))
        self.vision = is_vision_model(self.model_path)
        self.lora_rank = int(config.get("lora_rank", 0))
        self._lora_dropout = float(config.get("lora_dropout", 0.0))
        if self.inference_only:
            from models.chat import ChatRenderer
            from models.engine import RolloutEngine

            self.engine = RolloutEngine(
                self.model_path,
                dtype=config.get("engine_dtype", "float32"),
                max_model_len=int(config.get("max_context_tokens", 4096)),
                seed=int(config.get("seed", 0)),
                kv_cache_gib=config.get("engine_kv_cache_gib"),
            )
            self.renderer = ChatRenderer(self.model_path, system_prompt=config.get("system_prompt"))
        else:
            self.model = load_hf_model(self.model_path)
            self.model.config.use_cache = False
            if self.lora_rank > 0:
                from models.lora import ALL_LINEAR, add_lora

                add_lora(
                    self.model,
                    rank=self.lora_rank,
                    alpha=float(config.get("lora_alpha", 2 * self.lora_rank)),
                    dropout=self._lora_dropout,
                    target_modules=config.get("lora_target_modules", ALL_LINEAR),
                    seed=int(config.get("seed", 0)),
                )

    # ------------------------------------------------------------------ learner forward
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return self.compute_logprobs(batch, with_entropy=False)

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return self.compute_logprobs(batch, with_entropy=True)

    def compute_logprobs(self, batch: dict[str, Any], *, with_entropy: bool) -> dict[str, torch.Tensor]:
        """Per-token logprobs (and entropy) of ``batch["input_ids"][:, 1:]`` given their prefixes; where the
        batch has a ``loss_mask`` (collate), at its positions only (0 elsewhere: the LM head skips prompt and
        observation tokens, models/logprobs.py)."""
        autocast = (
            torch.autocast(device_type=batch["input_ids"].device.type, dtype=torch.bfloat16)
            if self.model_dtype == "bfloat16"
            else contextlib.nullcontext()
        )
        if self.lora_rank > 0 and self._lora_dropout > 0:
            from models.lora import set_dropout_active

            # Dropout in the loss's forward only: pi_old and the reference must be the engine's policy.
            set_dropout_active(self.model, torch.is_grad_enabled())
        with autocast:
            logp, entropy = token_logprobs(
                self.model,
                batch["input_ids"],
                batch["attention_mask"],
                pixel_values=batch.get("pixel_values"),
                image_grid_thw=batch.get("image_grid_thw"),
                temperature=self.temperature,
                with_entropy=with_entropy,
                share_prefix=self.share_prefix,
                pack_rows=self.pack_rows,
                needed=batch.get("loss_mask"),
                checkpoint_layers=self.gradient_checkpointing,
            )
        out = {"logp": logp.float()}
        if entropy is not None:
            out["entropy"] = entropy.float()
        return out

    # ------------------------------------------------------------------ state (torch tensors, bf16-safe)
    def get_state(self, components=None, *, not_components=None, inference_only: bool = False, **kwargs):
        """The HF state dict as fresh CPU tensors; ``inference_only=True`` (RLlib's weight sync to the
        EnvRunners) casts floating-point tensors to the engine's dtype, which the engine would do on loading
        anyway. For a bf16 engine and a 0.5B model that halved the sync's CPU time (clone, ray.put, load).
        With LoRA: the merged weights for the sync, the adapters alone otherwise (checkpoints)."""
        if self.inference_only:
            return {}
        if self.lora_rank > 0:
            from models.lora import adapter_state_dict, merged_state_dict

            return (
                merged_state_dict(self.model, self._sync_dtype)
                if inference_only
                else adapter_state_dict(self.model)
            )
        state = {}
        for name, tensor in self.model.state_dict().items():
            dtype = self._sync_dtype if inference_only and tensor.is_floating_point() else None
            state[name] = tensor.detach().to(device="cpu", dtype=dtype, copy=True)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        tensors = {name: torch.as_tensor(value) for name, value in state.items()}
        if self.inference_only:
            self.engine.load_weights(tensors)
        elif self.lora_rank > 0:
            from models.lora import load_adapter_state_dict

            load_adapter_state_dict(self.model, tensors)
        else:
            self.model.load_state_dict(tensors)
