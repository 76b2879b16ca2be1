"""token_logprobs(pack_rows=True) against the padded forward: values, entropies and gradients, on the tiny
Qwen2 and a tiny Llama (SmolLM2's architecture), with and without a shared prefix, ``needed`` and
checkpointing; the packed layout itself; the models that keep the padded forward."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from models.logprobs import token_logprobs
from models.packed_rows import pack, right_padded_lengths

LENGTHS = (44, 35, 40, 26)  # real tokens of each row, the first 24 shared


@pytest.fixture(scope="module")
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """4 rows sharing their first 24 tokens, right-padded from 4 different lengths."""
    rng = np.random.default_rng(2)
    prefix = rng.integers(7, 3000, size=24)
    ids = np.stack([np.concatenate([prefix, rng.integers(7, 3000, size=max(LENGTHS) - 24)]) for _ in LENGTHS])
    mask = (np.arange(ids.shape[1])[None, :] < np.array(LENGTHS)[:, None]).astype(np.int64)
    ids[mask == 0] = 0
    return torch.from_numpy(ids), torch.from_numpy(mask)


@pytest.fixture(scope="module")
def qwen(lm_path: Path):
    return AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)


@pytest.fixture(scope="module")
def llama() -> LlamaForCausalLM:
    """SmolLM2's architecture (Llama, tied embeddings, 3:1 grouped-query attention) at a tiny size."""
    config = LlamaConfig(
        vocab_size=3072, hidden_size=96, intermediate_size=256, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=2, tie_word_embeddings=True, rope_theta=100_000.0, max_position_embeddings=512,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(config).float()


def _needed(mask: torch.Tensor) -> torch.Tensor:
    """Loss positions like a multi-turn episode's: two stretches of response tokens after the prompt, and a
    few prompt positions of one row (inside the shared prefix)."""
    needed = torch.zeros(mask.shape[0], mask.shape[1] - 1, dtype=torch.bool)
    needed[:, 26:31] = True
    needed[:, 34:] = True
    needed[0, 5:9] = True
    return needed & mask[:, 1:].bool()


def _values_and_gradients(model, ids, mask, **kwargs):
    weights = torch.linspace(-1, 1, ids.shape[1] - 1)
    model.zero_grad()
    logp, entropy = token_logprobs(model, ids, mask, chunk_size=16, with_entropy=True, **kwargs)
    needed = kwargs.get("needed")
    read = mask[:, 1:].bool() if needed is None else needed
    ((logp * weights * read).sum() + 0.1 * (entropy * read).sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), entropy.detach(), grads  # (a vision tower gets none from text-only rows)


def _assert_packed_equals_padded(model, ids, mask, **kwargs) -> None:
    padded_logp, padded_entropy, padded_grads = _values_and_gradients(model, ids, mask, **kwargs)
    logp, entropy, grads = _values_and_gradients(model, ids, mask, pack_rows=True, **kwargs)
    needed = kwargs.get("needed")
    read = mask[:, 1:].bool() if needed is None else needed
    assert logp.shape == entropy.shape == padded_logp.shape == (ids.shape[0], ids.shape[1] - 1)
    assert torch.allclose(logp[read], padded_logp[read], atol=1e-5)
    assert torch.allclose(entropy[read], padded_entropy[read], atol=1e-5)
    assert grads.keys() == padded_grads.keys()
    for name, grad in padded_grads.items():
        assert grad.abs().sum() > 0, name
        assert torch.allclose(grads[name], grad, atol=1e-5, rtol=1e-4), name


@pytest.mark.parametrize("checkpointed", [False, True], ids=["", "ckpt"])
@pytest.mark.parametrize("with_needed", [False, True], ids=["all", "needed"])
@pytest.mark.parametrize("share", [False, True], ids=["own", "shared"])
def test_packed_rows_equal_the_padded_forward_values_and_gradients(
    qwen, batch, share, with_needed, checkpointed
):
    ids, mask = batch
    needed = _needed(mask) if with_needed else None
    _assert_packed_equals_padded(
        qwen, ids, mask, share_prefix=share, needed=needed, checkpoint_layers=checkpointed
    )


@pytest.mark.parametrize("share", [False, True], ids=["own", "shared"])
def test_a_llama_like_smollm2_packs_to_the_same_values_and_gradients(llama, batch, share):
    ids, mask = batch
    _assert_packed_equals_padded(llama, ids, mask, share_prefix=share, needed=_needed(mask))


def test_a_vision_model_packs_its_text_only_rows(vlm_path: Path, batch):
    """Without images its multimodal positions are the 1D ones, which the packed row's position ids give."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(vlm_path, dtype=torch.float32)
    ids, mask = batch
    _assert_packed_equals_padded(model, ids, mask, share_prefix=True, needed=_needed(mask))


@pytest.mark.parametrize("share", [False, True], ids=["own", "shared"])
def test_the_model_runs_one_row_of_the_real_tokens_after_the_prefix(qwen, batch, share):
    """Packing is real: the continuation pass gets batch 1 and no padding; padded positions come back 0."""
    ids, mask = batch
    calls = []
    forward = qwen.model.forward

    def recorded(*args, **kwargs):
        calls.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    qwen.model.forward = recorded
    try:
        with torch.no_grad():
            logp, _ = token_logprobs(qwen, ids, mask, share_prefix=share, pack_rows=True)
    finally:
        del qwen.model.forward
    prefix = 24 if share else 0
    assert calls == ([(1, 24)] if share else []) + [(1, sum(LENGTHS) - 4 * prefix)]
    assert (logp[~mask[:, 1:].bool()] == 0).all()


def test_rows_without_padding_pack_too(qwen, batch):
    ids, _ = batch
    with torch.no_grad():
        packed, _ = token_logprobs(qwen, ids, pack_rows=True)
        padded, _ = token_logprobs(qwen, ids)
    assert torch.allclose(packed, padded, atol=1e-5)


def test_packing_under_bf16_autocast_stays_close_to_the_padded_forward(qwen, batch):
    ids, mask = batch
    real = mask[:, 1:].bool()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        packed, _ = token_logprobs(qwen, ids, mask, share_prefix=True, pack_rows=True)
        padded, _ = token_logprobs(qwen, ids, mask, share_prefix=True)
    assert (packed[real] - padded[real]).abs().mean() < 0.05


def test_the_layout_masks_other_rows_and_restarts_positions():
    """(Under RoPE a row's positions shifted all alike change nothing but its attention to the prefix: the
    shared-prefix equality tests above are the ones that catch wrong positions.)"""
    layout = pack(torch.tensor([5, 3, 4]), prefix=2)
    assert layout.rows.tolist() == [0, 0, 0, 1, 2, 2]
    assert layout.times.tolist() == [2, 3, 4, 2, 2, 3]
    assert layout.predicts.tolist() == [True, True, False, False, True, False]
    expected = torch.tensor(
        [  # 2 prefix keys, then the 6 packed tokens' keys
            [1, 1, 1, 0, 0, 0, 0, 0],
            [1, 1, 1, 1, 0, 0, 0, 0],
            [1, 1, 1, 1, 1, 0, 0, 0],
            [1, 1, 0, 0, 0, 1, 0, 0],
            [1, 1, 0, 0, 0, 0, 1, 0],
            [1, 1, 0, 0, 0, 0, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(layout.attention_mask, expected[None, None])
    assert pack(torch.tensor([2, 0, 1]), prefix=0).rows.tolist() == [0, 0, 2]  # an empty row adds nothing


def test_rows_must_be_right_padded(qwen, batch):
    ids, mask = batch
    assert right_padded_lengths(mask).tolist() == list(LENGTHS)
    with pytest.raises(ValueError, match="right-padded"):
        token_logprobs(qwen, ids, mask.flip(1), pack_rows=True)


@pytest.mark.parametrize("kind", ["sliding window", "eager attention"])
def test_models_that_cannot_take_the_mask_keep_the_padded_forward(lm_path: Path, batch, kind):
    """A sliding window would be lost under the block-diagonal mask and eager attention adds masks as
    floats: those models run padded (the same values as without ``pack_rows``)."""
    ids, mask = batch
    config = AutoConfig.from_pretrained(lm_path)
    if kind == "sliding window":
        config.use_sliding_window, config.sliding_window, config.max_window_layers = True, 8, 0
        config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    else:
        config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    calls = []
    forward = model.model.forward

    def recorded(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    model.model.forward = recorded
    with torch.no_grad():
        packed, _ = token_logprobs(model, ids, mask, pack_rows=True)
        padded, _ = token_logprobs(model, ids, mask)
    assert calls == [4, 4]
    assert torch.equal(packed, padded)


def test_the_config_key_reaches_the_policy_module():
    from algorithms.dapo import DAPOConfig

    assert DAPOConfig().policy_model_config()["pack_rows"] is False
    assert DAPOConfig().training(pack_rows=True).policy_model_config()["pack_rows"] is True
