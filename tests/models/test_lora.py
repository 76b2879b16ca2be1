"""LoRA on the tiny LM (models/lora.py): the merged weights are the adapted model's and reach the engine; the
adapters get every gradient through each path of models/logprobs.py; bad targets fail clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from models.chat import ChatRenderer
from models.engine import Prompt, RolloutEngine, SamplingConfig
from models.logprobs import token_logprobs
from models.lora import (
    adapter_state_dict,
    adapters_disabled,
    add_lora,
    load_adapter_state_dict,
    merged_state_dict,
    set_dropout_active,
)

TOLERANCE = 1e-3  # fp32 engine vs fp32 transformers, as tests/algorithms/test_weight_sync.py
OBSERVATIONS = ["FrozenLake 4x4.\nSFFF\nFHFH\nFFFH\nHFFG\nMove: Up, Down, Left or Right?", "Solve 12 + 7."]


def base_model(lm_path: Path) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32).eval()


def lora_model(lm_path: Path, rank: int = 4, **kwargs) -> torch.nn.Module:
    """The tiny LM with adapters whose B is nonzero (as after training), so the update is not the identity."""
    settings = {"alpha": 2.0 * rank, "dropout": 0.0, "target_modules": "all-linear", **kwargs}
    model = add_lora(base_model(lm_path), rank=rank, **settings)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".lora_B." in name:
                parameter.copy_(0.05 * torch.randn(parameter.shape, generator=generator))
    return model


def logprobs(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return token_logprobs(model, ids)[0]


def sample_ids(lm_path: Path) -> torch.Tensor:
    renderer = ChatRenderer(lm_path)
    ids = [renderer.prompt(text).token_ids for text in OBSERVATIONS]
    length = min(len(row) for row in ids)
    return torch.tensor([row[:length] for row in ids])


def test_only_adapters_train_and_zero_adapters_are_the_base_model(lm_path: Path):
    model = add_lora(base_model(lm_path), rank=4, alpha=8.0, dropout=0.0, target_modules="all-linear")
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_A." in name or ".lora_B." in name for name in trainable)
    # 7 projections in each of 4 layers, A and B each.
    assert len(trainable) == 2 * 7 * 4
    # B starts at zero (Hu et al. 2021, section 4.1): the merged weights are the base model's, bit for bit.
    base = base_model(lm_path).state_dict()
    merged = merged_state_dict(model)
    assert merged.keys() == base.keys()
    assert all(torch.equal(merged[name], tensor) for name, tensor in base.items())


def test_merged_weights_are_the_adapted_model_and_leave_it_unchanged(lm_path: Path):
    model = lora_model(lm_path)
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    merged = merged_state_dict(model, dtype=torch.float32)
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())
    plain = base_model(lm_path)
    plain.load_state_dict(merged)
    ids = sample_ids(lm_path)
    assert torch.allclose(logprobs(plain, ids), logprobs(model, ids), atol=1e-5)
    assert (logprobs(base_model(lm_path), ids) - logprobs(model, ids)).abs().max() > 10 * TOLERANCE
    assert merged_state_dict(model, dtype=torch.bfloat16)["model.layers.0.mlp.up_proj.weight"].dtype == (
        torch.bfloat16
    )


def test_disabled_adapters_give_the_base_model_and_stay_trainable(lm_path: Path):
    model = lora_model(lm_path)
    ids = sample_ids(lm_path)
    with adapters_disabled(model):
        assert torch.equal(logprobs(model, ids), logprobs(base_model(lm_path), ids))
    assert not torch.equal(logprobs(model, ids), logprobs(base_model(lm_path), ids))
    assert all(p.requires_grad for name, p in model.named_parameters() if ".lora_" in name)


@pytest.mark.parametrize(
    "share_prefix, checkpoint_layers", [(True, False), (False, True), (True, True)], ids=str
)
def test_every_logprobs_path_trains_the_adapters_alone(lm_path: Path, share_prefix, checkpoint_layers):
    """Shared-prefix and gradient-checkpointed forwards give the adapters the plain forward's gradients, and
    the frozen base none."""
    model = lora_model(lm_path)
    renderer = ChatRenderer(lm_path)
    prompt = renderer.prompt(OBSERVATIONS[0]).token_ids
    ids = torch.tensor([prompt + [5, 6, 7, 8], prompt + [9, 10, 11, 12]])  # a shared prompt, two responses

    def gradients(**kwargs) -> dict[str, torch.Tensor | None]:
        model.zero_grad(set_to_none=True)
        logp, _ = token_logprobs(model, ids, **kwargs)
        logp[:, len(prompt) - 1 :].sum().backward()
        return {name: p.grad for name, p in model.named_parameters()}

    plain = gradients()
    other = gradients(share_prefix=share_prefix, checkpoint_layers=checkpoint_layers)
    for name, grad in plain.items():
        if ".lora_" in name:
            assert grad is not None and grad.abs().max() > 0, name
            assert torch.allclose(other[name], grad, atol=1e-5, rtol=1e-4), name
        else:
            assert grad is None and other[name] is None, name


def test_dropout_acts_only_where_turned_on(lm_path: Path):
    model, ids = lora_model(lm_path, dropout=0.5), sample_ids(lm_path)
    undropped = logprobs(lora_model(lm_path), ids)
    assert torch.equal(logprobs(model, ids), undropped)
    set_dropout_active(model, True)
    assert not torch.equal(logprobs(model, ids), undropped)
    set_dropout_active(model, False)
    assert torch.equal(logprobs(model, ids), undropped)


def test_vision_model_merges_under_its_own_names(vlm_path: Path):
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(vlm_path, dtype=torch.float32)
    names = base.state_dict().keys()
    merged = merged_state_dict(add_lora(base, rank=4, alpha=8.0, dropout=0.0, target_modules="all-linear"))
    assert merged.keys() == names


def test_adapter_state_round_trips_and_refuses_other_states(lm_path: Path):
    model = lora_model(lm_path)
    state = adapter_state_dict(model)
    assert state and all(".lora_" in name for name in state)
    fresh = add_lora(base_model(lm_path), rank=4, alpha=8.0, dropout=0.0, target_modules="all-linear", seed=3)
    load_adapter_state_dict(fresh, state)
    assert all(torch.equal(fresh.state_dict()[name], tensor) for name, tensor in state.items())
    with pytest.raises(ValueError, match="same lora_rank and lora_target_modules"):
        load_adapter_state_dict(fresh, base_model(lm_path).state_dict())


def test_adapters_are_drawn_from_the_seed(lm_path: Path):
    def adapters(seed: int) -> dict[str, torch.Tensor]:
        model = add_lora(
            base_model(lm_path), rank=4, alpha=8.0, dropout=0.0, target_modules="all-linear", seed=seed
        )
        return adapter_state_dict(model)

    first, again, other = adapters(0), adapters(0), adapters(1)
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert not all(torch.equal(first[name], other[name]) for name in first)


@pytest.mark.parametrize(
    "targets, message",
    [
        (["no_such_module"], "no_such_module"),
        (["embed_tokens"], "only linear layers"),
        (["q_proj", "lm_head"], "ties its input and output embeddings"),
    ],
)
def test_bad_targets_fail_clearly(lm_path: Path, targets, message):
    with pytest.raises(ValueError, match=message):
        add_lora(base_model(lm_path), rank=4, alpha=8.0, dropout=0.0, target_modules=targets)


def test_engine_samples_from_the_merged_weights(lm_engine: RolloutEngine, lm_path: Path):
    """The weight sync's payload: after loading the merged weights, the engine's fp32 logprobs are the
    adapted model's, and no longer the base model's."""
    renderer = ChatRenderer(lm_path)
    prompts = [Prompt(renderer.prompt(text).token_ids) for text in OBSERVATIONS]
    sampling = SamplingConfig(n=2, max_tokens=24, seed=1)
    model, base = lora_model(lm_path), base_model(lm_path)

    def gap(reference: torch.nn.Module, results) -> float:
        gaps = []
        for prompt, completions in zip(prompts, results, strict=True):
            for completion in completions:
                ids = torch.tensor([prompt.token_ids + completion.token_ids])
                expected = logprobs(reference, ids)[0, len(prompt.token_ids) - 1 :]
                gaps.append((expected - torch.tensor(completion.logprobs)).abs().max())
        return float(max(gaps))

    before = lm_engine.generate(prompts, sampling)
    assert gap(base, before) < TOLERANCE
    lm_engine.load_weights(merged_state_dict(model))
    after = lm_engine.generate(prompts, sampling)
    assert gap(model, after) < TOLERANCE
    assert gap(base, after) > 10 * TOLERANCE
