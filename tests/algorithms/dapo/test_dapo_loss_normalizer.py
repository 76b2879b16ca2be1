"""Dr. GRPO's seq-mean-token-sum-norm normaliser: all rows of the step x a fixed budget."""

from __future__ import annotations

import pytest
import torch

from algorithms.dapo.loss import loss_normalizer


def test_sum_norm_counts_every_row_times_the_fixed_budget():
    m1 = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])  # the second row is fully masked (e.g. overlong-filtered)
    m2 = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0]], dtype=torch.float32)
    assert loss_normalizer([m1, m2], "seq-mean-token-sum-norm", max_response_tokens=100) == 500.0
    # A step whose rows are all masked still divides by rows x budget (its loss is 0 either way).
    assert loss_normalizer([torch.zeros(3, 5)], "seq-mean-token-sum-norm", max_response_tokens=7) == 21.0
    # The other modes are unchanged: tokens, and sequences with tokens.
    assert loss_normalizer([m1, m2], "token-mean") == 12.0
    assert loss_normalizer([m1, m2], "seq-mean-token-mean") == 4.0


@pytest.mark.parametrize("budget", [None, 0])
def test_sum_norm_needs_a_fixed_budget(budget):
    with pytest.raises(ValueError, match="max_response_tokens"):
        loss_normalizer([torch.ones(2, 3)], "seq-mean-token-sum-norm", max_response_tokens=budget)
