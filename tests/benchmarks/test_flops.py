"""benchmarks/flops.py against hand counts on a tiny decoder."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import models.logprobs
from benchmarks.flops import (
    ModelShape,
    causal_pairs,
    counting_flops,
    matmul_rate,
    model_shape,
    token_logprobs_flops,
)

# Per layer: q 8x8 + k 8x4 + v 8x4 + o 8x8 + gate, up, down 8x16 each = 576 weights; the head 32 x 8.
LAYER_LINEAR, HEAD = 576, 256


@pytest.fixture(scope="module")
def model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=32,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config)


def test_the_model_shape_is_its_linear_weights_layers_and_attention_width(model):
    assert model_shape(model) == ModelShape(
        trained_linear=2 * LAYER_LINEAR,
        frozen_linear=0,
        head=HEAD,
        head_trains=True,
        layers=2,
        attention_width=8,
    )


def test_causal_pairs_count_each_query_with_itself_and_the_keys_before_it():
    assert causal_pairs(0, 5) == 1 + 2 + 3 + 4 + 5
    assert causal_pairs(2, 5) == 3 + 4 + 5


def test_a_forward_counts_linear_weights_per_token_causal_attention_and_the_head_where_needed():
    shape = ModelShape(2 * LAYER_LINEAR, 0, HEAD, True, layers=2, attention_width=8)
    flops = token_logprobs_flops(shape, [5, 3], head_positions=3)
    # 8 real tokens; 15 + 6 causal pairs, QK^T and AV, 2 layers; the head at 3 positions.
    assert flops == {"linear": 2 * 1152 * 8, "attention": 2 * 2 * 8 * 21 * 2, "head": 2 * HEAD * 3}


def test_a_backward_adds_two_products_per_trained_weight_and_one_per_frozen_and_the_heads_recomputation():
    full = ModelShape(2 * LAYER_LINEAR, 0, HEAD, True, layers=2, attention_width=8)
    flops = token_logprobs_flops(full, [5, 3], head_positions=3, grad=True)
    assert flops == {"linear": 6 * 1152 * 8, "attention": 3 * 1344, "head": 4 * 2 * HEAD * 3}
    frozen = ModelShape(100, 1052, HEAD, False, layers=2, attention_width=8)
    flops = token_logprobs_flops(frozen, [5, 3], head_positions=3, grad=True, checkpoint_layers=True)
    linear_forward = 2 * 1152 * 8
    assert flops["linear"] == 2 * linear_forward + 2 * (2 * 100 + 1052) * 8
    assert flops["attention"] == 4 * 1344
    assert flops["head"] == 3 * 2 * HEAD * 3


def test_a_shared_prefix_runs_once_and_the_rest_of_each_row_attends_to_it():
    shape = ModelShape(2 * LAYER_LINEAR, 0, HEAD, True, layers=2, attention_width=8)
    flops = token_logprobs_flops(shape, [5, 3], head_positions=3, prefix=2)
    # Tokens: the prefix's 2 once, then 3 and 1; pairs: 1 + 2, then 3 + 4 + 5 and 3.
    assert flops["linear"] == 2 * 1152 * 6
    assert flops["attention"] == 2 * 2 * 8 * 18 * 2


def test_counting_reads_real_lengths_and_the_needed_positions_of_a_padded_batch(model):
    ids = torch.tensor([[1, 2, 3, 4, 5], [1, 6, 7, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    needed = torch.tensor([[0, 0, 1, 1], [0, 1, 0, 0]])
    with counting_flops() as counts:
        logprobs, _ = models.logprobs.token_logprobs(model, ids, mask, needed=needed)
        logprobs.sum().backward()
    expected = token_logprobs_flops(model_shape(model), [5, 3], head_positions=3, grad=True)
    assert counts == {**expected, "total": sum(expected.values())}
    assert models.logprobs.token_logprobs.__name__ == "token_logprobs"  # put back


def test_the_matmul_rate_is_a_positive_flop_rate():
    assert matmul_rate(64, 32, 16, torch.float32, repeats=1, seconds=0.001) > 0
