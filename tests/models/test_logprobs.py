"""token_logprobs against a full-logits reference: values, chunking, temperature, entropy, gradients."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

from models.chat import ChatRenderer
from models.logprobs import common_prefix_length, token_logprobs
from models.placeholders import SUPPRESSION_BIAS, suppressed_token_ids


def reference(model, input_ids, temperature=1.0, **kwargs):
    logits = model(input_ids=input_ids, **kwargs).logits[:, :-1].double() / temperature
    logp = logits.log_softmax(-1)
    chosen = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return chosen, entropy


@pytest.fixture(scope="module")
def lm(lm_path: Path):
    return AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def input_ids() -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(0).integers(7, 3000, size=(2, 50)))


@pytest.mark.parametrize("chunk_size", [1, 7, 1024])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_matches_full_logits_reference(lm, input_ids, chunk_size, temperature):
    with torch.no_grad():
        logp, entropy = token_logprobs(
            lm, input_ids, temperature=temperature, with_entropy=True, chunk_size=chunk_size
        )
        ref_logp, ref_entropy = reference(lm, input_ids, temperature)
    assert logp.shape == entropy.shape == (2, 49) and logp.dtype == torch.float32
    assert torch.allclose(logp.double(), ref_logp, atol=1e-5)
    assert torch.allclose(entropy.double(), ref_entropy, atol=1e-4)


def test_without_entropy_returns_none(lm, input_ids):
    with torch.no_grad():
        _, entropy = token_logprobs(lm, input_ids)
    assert entropy is None


def test_right_padding_leaves_real_positions_unchanged(lm, input_ids):
    mask = torch.ones_like(input_ids)
    mask[1, 30:] = 0
    with torch.no_grad():
        padded, _ = token_logprobs(lm, input_ids, mask)
        alone, _ = token_logprobs(lm, input_ids[1:, :30])
    assert torch.allclose(padded[1, :29], alone[0], atol=1e-5)


def test_gradients_flow_and_equal_the_unchunked_gradients(lm_path: Path, input_ids):
    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
    weights = torch.linspace(-1, 1, 49)
    logp, entropy = token_logprobs(model, input_ids, chunk_size=8, with_entropy=True)
    ((logp * weights).sum() + 0.1 * entropy.sum()).backward()
    chunked = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    ref_logp, ref_entropy = reference(model, input_ids)
    ((ref_logp.float() * weights).sum() + 0.1 * ref_entropy.float().sum()).backward()
    for name, p in model.named_parameters():
        assert chunked[name].abs().sum() > 0, name
        assert torch.allclose(chunked[name], p.grad, atol=1e-4, rtol=1e-3), name


def test_bfloat16_model_is_close_to_float32(lm_path: Path, lm, input_ids):
    bf16 = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        low, _ = token_logprobs(bf16, input_ids)
        high, _ = token_logprobs(lm, input_ids)
    assert low.dtype == torch.float32
    assert (low - high).abs().mean() < 0.05


def test_vision_model_matches_its_full_forward(vlm_path: Path):
    model = AutoModelForImageTextToText.from_pretrained(vlm_path, dtype=torch.float32).eval()
    renderer = ChatRenderer(vlm_path)
    image = np.random.default_rng(1).integers(0, 256, (112, 140, 3), dtype=np.uint8)
    segment = renderer.prompt({"text": "Where is the goal?", "image": image})
    ids = torch.tensor([segment.token_ids + renderer.tokenizer("<answer>Up</answer>")["input_ids"]])
    inputs = renderer.image_inputs(segment.images)
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, chunk_size=5, suppress_placeholders=False, **inputs)
        # The processor's own mm_token_type_ids make transformers compute the 3D (mRoPE) positions.
        types = (ids == model.config.image_token_id).int()
        ref_logp, _ = reference(model, ids, mm_token_type_ids=types, **inputs)
        flat_logp, _ = reference(model, ids, **inputs)
    assert torch.allclose(logp.double(), ref_logp, atol=1e-5)
    # Without the 3D positions the text after the image would be scored differently.
    assert not torch.allclose(flat_logp, ref_logp, atol=1e-3)


def test_vision_placeholders_are_suppressed_like_in_the_engine(vlm_path: Path, lm):
    model = AutoModelForImageTextToText.from_pretrained(vlm_path, dtype=torch.float32).eval()
    placeholders = suppressed_token_ids(model.config)
    assert len(placeholders) == 4 and model.config.image_token_id in placeholders
    ids = torch.tensor([[1, 401, 205, 300, 301, 302, model.config.image_token_id, 303]])
    with torch.no_grad():
        logp, _ = token_logprobs(model, ids, temperature=0.8)
        free, _ = token_logprobs(model, ids, temperature=0.8, suppress_placeholders=False)
        logits = model(input_ids=ids).logits[0, :-1].double()
    logits[:, placeholders] += SUPPRESSION_BIAS
    expected = (logits / 0.8).log_softmax(-1).gather(-1, ids[0, 1:, None]).squeeze(-1)
    assert torch.allclose(logp[0].double(), expected, atol=1e-5)
    assert logp[0, 5] < -90 < free[0, 5]
    assert (logp[0, :5] > free[0, :5]).all()  # renormalised over the remaining tokens
    assert suppressed_token_ids(lm.config) == []


def test_rejects_bad_arguments(lm, input_ids):
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(lm, input_ids, temperature=0.0)
    with pytest.raises(ValueError, match="batch, time"):
        token_logprobs(lm, input_ids[0])


@pytest.fixture(scope="module")
def shared_prefix_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """4 rows sharing their first 24 tokens, then different continuations, right-padded to 3 lengths."""
    rng = np.random.default_rng(1)
    prefix = rng.integers(7, 3000, size=24)
    ids = np.stack([np.concatenate([prefix, rng.integers(7, 3000, size=20)]) for _ in range(4)])
    mask = np.ones_like(ids)
    mask[1, 35:] = 0
    mask[3, 26:] = 0
    ids[mask == 0] = 0
    return torch.from_numpy(ids), torch.from_numpy(mask)


def test_common_prefix_length_counts_real_tokens_only(shared_prefix_batch):
    ids, mask = shared_prefix_batch
    assert common_prefix_length(ids, mask) == 24
    assert common_prefix_length(ids[:1], mask[:1]) == 43  # one row: all but its last token
    same = ids[:1].repeat(3, 1)
    assert common_prefix_length(same) == ids.shape[1] - 1
    assert common_prefix_length(torch.tensor([[5, 6], [7, 6]])) == 0


def _values_and_gradients(model, ids, mask, **kwargs):
    real = mask[:, 1:].bool()
    weights = torch.linspace(-1, 1, ids.shape[1] - 1) * real
    model.zero_grad()
    logp, entropy = token_logprobs(model, ids, mask, chunk_size=16, with_entropy=True, **kwargs)
    ((logp * weights).sum() + 0.1 * (entropy * real).sum()).backward()
    return logp.detach(), entropy.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize(
    "share, checkpointed", [(True, False), (False, True), (True, True)], ids=["shared", "ckpt", "shared+ckpt"]
)
def test_shared_prefix_and_checkpointing_equal_the_plain_forward_values_and_gradients(
    lm_path: Path, shared_prefix_batch, share, checkpointed
):
    ids, mask = shared_prefix_batch
    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
    real = mask[:, 1:].bool()
    plain_logp, plain_entropy, plain_grads = _values_and_gradients(model, ids, mask)
    logp, entropy, grads = _values_and_gradients(
        model, ids, mask, share_prefix=share, checkpoint_layers=checkpointed
    )
    assert logp.shape == plain_logp.shape == (4, ids.shape[1] - 1)
    assert torch.allclose(logp[real], plain_logp[real], atol=1e-5)
    assert torch.allclose(entropy[real], plain_entropy[real], atol=1e-4)
    for name, grad in plain_grads.items():
        assert grad.abs().sum() > 0, name
        assert torch.allclose(grads[name], grad, atol=1e-5, rtol=1e-4), name


@pytest.mark.parametrize("share", [False, True])
def test_checkpointing_keeps_layer_inputs_only_and_replays_each_layer(
    lm_path: Path, shared_prefix_batch, share, monkeypatch
):
    """What the backward pass keeps (the tensors autograd saves outside checkpointed regions) shrinks, and
    each layer's MLP runs again in the backward pass: the recomputation is real."""
    ids, mask = shared_prefix_batch
    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
    mlp = model.model.layers[0].mlp
    calls = []
    forward = mlp.forward

    def counted(*args, **kwargs):  # (a forward hook does not fire in a checkpoint's recomputation)
        calls.append(1)
        return forward(*args, **kwargs)

    monkeypatch.setattr(mlp, "forward", counted)
    kept = {}
    for checkpointed in (False, True):
        saved = []

        def pack(tensor, saved=saved):
            saved.append(tensor.numel() * tensor.element_size())
            return tensor

        calls.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            logp, _ = token_logprobs(model, ids, mask, share_prefix=share, checkpoint_layers=checkpointed)
        forward_calls = len(calls)
        logp.sum().backward()
        kept[checkpointed] = sum(saved)
        passes = 2 if share else 1  # the prefix pass and the continuation pass
        assert forward_calls == passes
        assert len(calls) == passes * (2 if checkpointed else 1)
    assert kept[True] < 0.5 * kept[False], kept


@pytest.mark.parametrize("share", [False, True])
def test_needed_positions_equal_the_full_call_values_and_gradients(lm_path: Path, shared_prefix_batch, share):
    ids, mask = shared_prefix_batch
    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
    needed = torch.zeros(ids.shape[0], ids.shape[1] - 1, dtype=torch.bool)
    needed[:, 30:] = mask[:, 31:].bool()  # "responses" after the shared prefix
    needed[0, 5:9] = True  # and a few prompt positions of one row (inside the shared prefix)
    weights = torch.linspace(-1, 1, ids.shape[1] - 1) * needed
    results = {}
    for where in (None, needed):
        model.zero_grad()
        logp, entropy = token_logprobs(
            model, ids, mask, chunk_size=8, with_entropy=True, share_prefix=share, needed=where
        )
        ((logp * weights).sum() + 0.1 * (entropy * needed).sum()).backward()
        results[where is None] = (
            logp.detach(),
            entropy.detach(),
            {n: p.grad.clone() for n, p in model.named_parameters()},
        )
    (logp, entropy, grads), (full_logp, full_entropy, full_grads) = results[False], results[True]
    assert torch.allclose(logp[needed], full_logp[needed], atol=1e-5)
    assert torch.allclose(entropy[needed], full_entropy[needed], atol=1e-4)
    if not share:  # (a shared prefix's values are computed once for all rows where any row needs them)
        assert (logp[~needed] == 0).all() and (entropy[~needed] == 0).all()
    for name, grad in full_grads.items():
        assert grad.abs().sum() > 0, name
        assert torch.allclose(grads[name], grad, atol=1e-5, rtol=1e-4), name


def test_needed_must_match_the_predicted_positions(lm, input_ids):
    with pytest.raises(ValueError, match="needed must be"):
        token_logprobs(lm, input_ids, needed=torch.ones_like(input_ids, dtype=torch.bool))


def test_a_sliding_window_model_runs_the_plain_forward_instead_of_sharing(lm_path: Path, shared_prefix_batch):
    """The prefix layers stand in for plain growing caches only; a model with sliding-window layers gets the
    plain forward (the same values), not a prefix pass its cache layers were not written for."""
    from transformers import AutoConfig

    from models import logprobs

    ids, mask = shared_prefix_batch
    config = AutoConfig.from_pretrained(lm_path)
    config.use_sliding_window, config.sliding_window, config.max_window_layers = True, 8, 0
    config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    assert not logprobs._plain_cache_layers(model.model)
    assert logprobs._plain_cache_layers(AutoModelForCausalLM.from_pretrained(lm_path).model)
    calls = []
    forward = model.model.forward

    def counted(*args, **kwargs):
        calls.append(kwargs.get("use_cache"))
        return forward(*args, **kwargs)

    model.model.forward = counted
    with torch.no_grad():
        shared, _ = token_logprobs(model, ids, mask, share_prefix=True)
        plain, _ = token_logprobs(model, ids, mask)
    assert calls == [False, False]  # plain calls only, no prefix pass
    real = mask[:, 1:].bool()
    assert torch.equal(shared[real], plain[real])


def _decoder_accumulations(model, ids, mask, **kwargs) -> set[int]:
    """How many times each decoder parameter's ``.grad`` was added to in one backward pass (the set over
    parameters), and that the gradients equal the plain forward's."""
    decoder = dict(model.model.layers.named_parameters())
    counts = dict.fromkeys(decoder, 0)
    hooks = [
        parameter.register_post_accumulate_grad_hook(
            lambda _, name=name: counts.update({name: counts[name] + 1})
        )
        for name, parameter in decoder.items()
    ]
    _, _, grads = _values_and_gradients(model, ids, mask, **kwargs)
    for hook in hooks:
        hook.remove()
    _, _, plain = _values_and_gradients(model, ids, mask)
    for name, grad in plain.items():
        assert torch.allclose(grads[name], grad, atol=1e-5, rtol=1e-4), name
    return set(counts.values())


@pytest.mark.parametrize("distributed", [False, True], ids=["separate", "joint (DDP)"])
def test_the_rest_adds_its_weight_gradients_before_the_prefix_backward(
    lm_path: Path, shared_prefix_batch, monkeypatch, distributed
):
    """With a shared prefix, the prefix's backward is a pass of its own, so the rest's gradient of each
    decoder weight goes into ``.grad`` when it is computed (a second accumulation follows for the prefix's)
    instead of being held, a second copy of the gradients, until the prefix's arrives. Under DDP, which must
    see each gradient once, autograd sums them first. Both give the plain forward's gradients."""
    from models import logprobs

    monkeypatch.setattr(logprobs, "_distributed", lambda: distributed)
    ids, mask = shared_prefix_batch
    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
    for checkpointed in (False, True):
        counts = _decoder_accumulations(model, ids, mask, share_prefix=True, checkpoint_layers=checkpointed)
        assert counts == {1 if distributed else 2}


def test_a_process_group_of_one_leaves_the_prefix_backward_separate(
    lm_path: Path, shared_prefix_batch, tmp_path: Path
):
    """An in-process vLLM engine sets up a torch.distributed group of one in the learner's process (EnvRunner
    and learner in one process, as in every CPU run); that is no DDP, and the separate backward stays."""
    dist = torch.distributed
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'group'}", rank=0, world_size=1)
    try:
        assert dist.get_world_size() == 1
        ids, mask = shared_prefix_batch
        model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
        assert _decoder_accumulations(model, ids, mask, share_prefix=True) == {2}
    finally:
        if created:
            dist.destroy_process_group()


@pytest.mark.parametrize("distributed", [False, True], ids=["separate", "joint (DDP)"])
def test_checkpointing_under_autocast_casts_where_used_and_keeps_the_gradients(
    lm_path: Path, shared_prefix_batch, monkeypatch, distributed
):
    """Checkpointed layers run without autocast's cache of bf16 weight copies (the recomputation casts
    again; the cache kept a copy of the model through the forward pass), except where the prefix's and the
    rest's gradients are summed by autograd (DDP): there one cached cast sums them in bf16 instead of fp32.
    Values and gradients equal those of the same bf16 forward without checkpointing."""
    from models import logprobs

    monkeypatch.setattr(logprobs, "_distributed", lambda: distributed)
    ids, mask = shared_prefix_batch
    real = mask[:, 1:].bool()
    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32)
    layer = model.model.layers[0]
    forward = layer.forward
    caching = []

    def observed(*args, **kwargs):
        caching.append(torch.is_autocast_cache_enabled())
        return forward(*args, **kwargs)

    layer.forward = observed
    results = {}
    for checkpointed in (False, True):
        caching.clear()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            results[checkpointed] = _values_and_gradients(
                model, ids, mask, share_prefix=True, checkpoint_layers=checkpointed
            )
        # The prefix pass and the rest, each recomputed in the backward pass when checkpointed.
        assert caching == ([distributed] * 4 if checkpointed else [True, True]), caching
    (logp, entropy, grads), (plain_logp, plain_entropy, plain_grads) = results[True], results[False]
    assert torch.equal(logp[real], plain_logp[real]) and torch.equal(entropy[real], plain_entropy[real])
    for name, grad in plain_grads.items():
        assert grad.abs().sum() > 0, name
        assert torch.allclose(grads[name], grad, atol=1e-3, rtol=2e-2), name
