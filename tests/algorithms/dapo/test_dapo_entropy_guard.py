"""Clip-Cov and KL-Cov (algorithms/dapo/entropy_guard.py): the tokens they select on a hand-worked step, their
effect on the loss and its gradient, step-split invariance, masking, and their configuration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from algorithms.dapo import DAPOConfig
from algorithms.dapo.entropy_guard import ClipCov, EntropyGuard, KLCov, select_tokens
from algorithms.dapo.loss import LossConfig, loss_normalizer, policy_loss
from experiments.common.run_config import RunSettings, build_config, config_keys

NAN = float("nan")
# Three rows; row 0's last position is masked and holds NaN. Over the N = 5 response tokens mean logp = -2 and
# mean A = 0.5, so Cov_i = (logp_i + 2)(A_i - 0.5):
#   row 0: (1.5)(1.5) = 2.25, (-0.5)(1.5) = -0.75;  row 1: (1)(-1.5) = -1.5, (-2)(-1.5) = 3.0;  row 2: 0.
LOGP_OLD = [[-0.5, -2.5, NAN], [-1.0, -4.0], [-2.0]]
ADV = [[2.0, 2.0, NAN], [-1.0, -1.0], [0.5]]
MASK = [[1, 1, 0], [1, 1], [1]]


def guard(mode: str, ratio: float, low: float = 1.0, high: float = 5.0, kl_coef: float = 1.0) -> EntropyGuard:
    if mode == "clip_cov":
        return ClipCov(ratio=ratio, cov_low=low, cov_high=high)
    return KLCov(ratio=ratio, beta=kl_coef)


def select(cfg: EntropyGuard, seed: int = 0, logp_old=LOGP_OLD, adv=ADV, mask=MASK):
    rows = [np.asarray(x, dtype=np.float32) for x in logp_old]
    advantages = [np.asarray(a, np.float32) for a in adv]
    return select_tokens(rows, advantages, mask, cfg, np.random.default_rng(seed))


def selected(tokens) -> list[list[int]]:
    return [np.flatnonzero(row).tolist() for row in tokens.selected]


def test_kl_cov_takes_the_tokens_of_largest_covariance():
    two = select(guard("kl_cov", 0.4))  # floor(0.4 x 5) = 2: Cov 3.0 (row 1, t 1) and 2.25 (row 0, t 0)
    assert selected(two) == [[0], [1], []]
    assert two.metrics == {
        "entropy_guard/selected_frac": 0.4,
        "entropy_guard/cov_mean": 0.6,  # (2.25 - 0.75 - 1.5 + 3.0 + 0) / 5
        "entropy_guard/cov_max": 3.0,
        "entropy_guard/cov_selected_mean": 2.625,
    }
    assert selected(select(guard("kl_cov", 0.01))) == [[], [1], []]  # at least one token, as verl


def test_clip_cov_draws_within_the_open_band():
    # (1, 5) holds Cov 2.25 and 3.0; floor(0.2 x 5) = 1 is drawn, a different one for different seeds.
    draws = {tuple(map(tuple, selected(select(guard("clip_cov", 0.2), seed)))) for seed in range(20)}
    assert draws == {((0,), (), ()), ((), (1,), ())}
    one = select(guard("clip_cov", 0.2), seed=3)
    assert one.metrics["entropy_guard/band_frac"] == 0.4
    assert one.metrics["entropy_guard/selected_frac"] == 0.2
    assert selected(select(guard("clip_cov", 0.2), seed=3)) == selected(one)  # the seed decides the draw
    assert selected(select(guard("clip_cov", 1.0))) == [[0], [1], []]  # fewer in the band than asked for
    assert selected(select(guard("clip_cov", 1.0, low=2.5))) == [[], [1], []]
    empty = select(guard("clip_cov", 1.0, low=2.25, high=3.0))  # both ends excluded, as verl's band
    assert selected(empty) == [[], [], []]
    assert empty.metrics["entropy_guard/selected_frac"] == 0.0
    assert empty.metrics["entropy_guard/cov_selected_mean"] == 0.0


def test_masked_positions_are_never_selected_or_read():
    # Row 0's masked slot holds NaN in logp_old and A: it would have the largest Cov of all were it read.
    tokens = select(guard("kl_cov", 1.0))
    assert not tokens.selected[0][2]
    assert all(math.isfinite(v) for v in tokens.metrics.values())
    assert tokens.metrics["entropy_guard/selected_frac"] == 1.0
    nothing = select(guard("kl_cov", 1.0), mask=[[0, 0, 0], [0, 0], [0]])
    assert selected(nothing) == [[], [], []] and nothing.metrics == {}


def padded(rows, fill=0.0) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [fill] * (width - len(r)) for r in rows], dtype=torch.float64)


def loss_config(guard_cfg: EntropyGuard | None) -> LossConfig:
    return LossConfig(
        eps_low=0.2, eps_high=0.28, dual_clip_c=None, loss_agg_mode="token-mean", kl_coef=0.0,
        max_response_tokens=None, tis_cap=2.0, entropy_guard=guard_cfg,
    )  # fmt: skip


# logp - logp_old per token: within the clip range, so every token keeps its gradient -A r / N unguarded.
DELTA = [[0.1, 0.1, NAN], [0.1, -0.2], [0.1]]


def hand_step(guard_cfg: EntropyGuard | None, seed: int = 0):
    mask = padded(MASK).bool()
    logp_old, adv = padded(LOGP_OLD), padded(ADV)
    logp = (logp_old + padded(DELTA)).requires_grad_(True)
    tokens = None if guard_cfg is None else select(guard_cfg, seed).batch([0, 1, 2], like=mask)
    norm = loss_normalizer([mask], "token-mean")
    loss, metrics = policy_loss(
        logp, logp_old, adv, mask, normalizer=norm, cfg=loss_config(guard_cfg), guard_tokens=tokens
    )
    loss.backward()
    return loss.item(), logp.grad, metrics


E1, E2 = math.exp(0.1), math.exp(-0.2)
# Unguarded: each token's loss -A r and gradient -A r, over N = 5.
PLAIN_LOSS = (-2 * E1 - 2 * E1 + E1 + E2 - 0.5 * E1) / 5
PLAIN_GRAD = [[-2 * E1 / 5, -2 * E1 / 5, 0.0], [E1 / 5, E2 / 5, 0.0], [-0.5 * E1 / 5, 0.0, 0.0]]


def test_unguarded_hand_step():
    loss, grad, metrics = hand_step(None)
    assert loss == pytest.approx(PLAIN_LOSS, rel=1e-12)
    np.testing.assert_allclose(grad.numpy(), PLAIN_GRAD, rtol=1e-12)
    assert "entropy_guard_tokens" not in metrics


def test_clip_cov_removes_the_selected_tokens_loss_and_gradient_only():
    loss, grad, metrics = hand_step(guard("clip_cov", 1.0, low=2.5))  # row 1, t 1 (A = -1, r = e^-0.2)
    assert loss == pytest.approx(PLAIN_LOSS - E2 / 5, rel=1e-12)
    assert grad[1, 1] == 0.0
    want = torch.tensor(PLAIN_GRAD, dtype=torch.float64)
    keep = torch.ones_like(want, dtype=torch.bool)
    keep[1, 1] = False
    torch.testing.assert_close(grad[keep], want[keep], rtol=1e-12, atol=0.0)
    assert torch.equal(grad[keep], hand_step(None)[1][keep])  # the other tokens exactly as unguarded
    assert int(metrics["entropy_guard_tokens"]) == 1 and "entropy_guard_penalty" not in metrics


def test_kl_cov_adds_beta_abs_log_ratio_on_the_selected_tokens():
    # k = 0.4: row 0 t 0 (log ratio +0.1) and row 1 t 1 (-0.2); beta = 0.5.
    loss, grad, metrics = hand_step(guard("kl_cov", 0.4, kl_coef=0.5))
    assert loss == pytest.approx(PLAIN_LOSS + 0.5 * (0.1 + 0.2) / 5, rel=1e-12)
    want = np.array(PLAIN_GRAD)
    want[0, 0] += 0.5 / 5  # d|x|/dx = +1 where logp rose
    want[1, 1] -= 0.5 / 5  # -1 where it fell
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-12, atol=1e-15)
    assert int(metrics["entropy_guard_tokens"]) == 2
    assert metrics["entropy_guard_penalty"].item() == pytest.approx(0.5 * 0.15, rel=1e-12)


def test_kl_cov_penalty_is_zero_with_zero_gradient_at_ratio_one():
    mask = padded(MASK).bool()
    logp = padded(LOGP_OLD).requires_grad_(True)
    args = (logp, logp.detach(), padded(ADV), mask)
    tokens = select(guard("kl_cov", 1.0)).batch([0, 1, 2], like=mask)
    cfg = loss_config(guard("kl_cov", 1.0))
    guarded, _ = policy_loss(*args, normalizer=5.0, cfg=cfg, guard_tokens=tokens)
    (grad,) = torch.autograd.grad(guarded, logp)
    plain, _ = policy_loss(*args, normalizer=5.0, cfg=loss_config(None))
    (plain_grad,) = torch.autograd.grad(plain, logp)
    assert torch.equal(guarded, plain) and torch.equal(grad, plain_grad)


@pytest.mark.parametrize("mode", ["clip_cov", "kl_cov"])
def test_no_selected_token_is_bit_identical_to_no_guard(mode):
    rng = np.random.default_rng(0)
    mask = torch.tensor(rng.random((6, 9)) < 0.7)
    logp_old = torch.tensor(-rng.uniform(0.1, 3.0, (6, 9)))
    logp_all = logp_old + torch.tensor(rng.normal(0, 0.4, (6, 9)))
    adv = torch.tensor(rng.normal(0, 1, 6))
    results = []
    for cfg, tokens in ((loss_config(None), None), (loss_config(guard(mode, 0.1)), torch.zeros_like(mask))):
        logp = logp_all.clone().requires_grad_(True)
        loss, _ = policy_loss(logp, logp_old, adv, mask, normalizer=7.0, cfg=cfg, guard_tokens=tokens)
        loss.backward()
        results.append((loss, logp.grad))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_nan_in_masked_positions_never_reaches_the_guarded_loss():
    mask = padded(MASK).bool()
    logp_old, adv = padded(LOGP_OLD, NAN), padded(ADV, NAN)
    logp = (logp_old + padded(DELTA, NAN)).requires_grad_(True)
    tokens = torch.ones_like(mask)  # even where masked: the loss ignores a selected masked slot
    for guard_cfg in (guard("clip_cov", 1.0), guard("kl_cov", 1.0)):
        loss, metrics = policy_loss(
            logp, logp_old, adv, mask, normalizer=5.0, cfg=loss_config(guard_cfg), guard_tokens=tokens
        )
        (grad,) = torch.autograd.grad(loss, logp)
        assert torch.isfinite(loss) and torch.isfinite(grad).all() and (grad[~mask] == 0).all()
        assert int(metrics["entropy_guard_tokens"]) == 5


SPLITS = ([10], [3, 3, 4], [1, 5, 2, 2], [1] * 10)


@pytest.mark.parametrize("mode", ["clip_cov", "kl_cov"])
def test_guarded_gradient_accumulation_is_split_invariant(mode):
    """The tokens are selected once for the whole step; each micro-batch applies its rows' share, so the
    loss and gradient of any split are the full step's. Selecting per micro-batch (verl) would not be."""
    rng = np.random.default_rng(1)
    n_rows, n_cols = 10, 16
    lengths = rng.integers(1, n_cols + 1, n_rows)
    mask = torch.arange(n_cols)[None, :] < torch.tensor(lengths)[:, None]
    logp_old = torch.tensor(-rng.uniform(0.1, 4.0, (n_rows, n_cols)))
    logp_all = logp_old + torch.tensor(rng.normal(0, 0.2, (n_rows, n_cols)))
    adv = torch.tensor(rng.normal(0, 1.5, (n_rows, n_cols)))
    guard_cfg = guard(mode, 0.1, low=0.5, high=5.0)
    cfg = loss_config(guard_cfg)
    rows = [np.arange(n_rows)]

    def step(split, per_micro_batch=False):
        logp = logp_all.clone().requires_grad_(True)
        bounds = np.cumsum([0, *split])
        parts = [np.arange(a, b) for a, b in itertools.pairwise(bounds)]
        whole = select_rows(rows[0], guard_cfg, logp_old, adv, mask, lengths)
        total = 0.0
        for part in parts:
            width = int(lengths[part].max())
            local = mask[part, :width]
            tokens = select_rows(part, guard_cfg, logp_old, adv, mask, lengths) if per_micro_batch else whole
            positions = list(range(len(part))) if per_micro_batch else part.tolist()
            loss, _ = policy_loss(
                logp[part, :width], logp_old[part, :width], adv[part, :width], local,
                normalizer=float(mask.sum()), cfg=cfg, guard_tokens=tokens.batch(positions, like=local),
            )  # fmt: skip
            loss.backward()
            total += loss.item()
        return total, logp.grad.clone()

    results = [step(split) for split in SPLITS]
    for total, grad in results[1:]:
        assert total == pytest.approx(results[0][0], rel=1e-12)
        torch.testing.assert_close(grad, results[0][1], rtol=1e-12, atol=1e-15)
    plain = logp_all.clone().requires_grad_(True)
    loss, _ = policy_loss(plain, logp_old, adv, mask, normalizer=float(mask.sum()), cfg=loss_config(None))
    loss.backward()
    assert not torch.allclose(plain.grad, results[0][1])  # the guard acted
    assert not torch.allclose(step([3, 3, 4], per_micro_batch=True)[1], results[0][1])


def select_rows(rows: np.ndarray, guard_cfg, logp_old, adv, mask, lengths):
    """select_tokens on ``rows``, each as long as its sequence (as the learner passes them)."""
    return select_tokens(
        *([x[i, : lengths[i]].numpy() for i in rows] for x in (logp_old, adv, mask)),
        guard_cfg, np.random.default_rng(0),
    )  # fmt: skip


@pytest.mark.parametrize(
    "settings",
    [
        {"entropy_guard": "clipcov"},
        {"clip_cov_ratio": 0.0},
        {"clip_cov_ratio": 1.5},
        {"clip_cov_low": 5.0, "clip_cov_high": 1.0},
        {"clip_cov_low": -math.inf},
        {"kl_cov_ratio": 0.0},
        {"kl_cov_ratio": "0.002"},
        {"kl_cov_coef": 0.0},
        {"kl_cov_coef": math.inf},
    ],
)
def test_bad_guard_settings_are_rejected_by_dapo_configs_validator(settings):
    with pytest.raises(ValueError, match=f"^DAPOConfig: {next(iter(settings))}"):
        DAPOConfig().training(**settings).validate()


def test_the_guard_is_off_by_default_and_reachable_from_set():
    assert LossConfig.from_config(DAPOConfig()).entropy_guard is None
    keys = ("entropy_guard", "clip_cov_ratio", "clip_cov_low", "clip_cov_high", "kl_cov_ratio", "kl_cov_coef")
    assert set(keys) <= set(config_keys())
    config = build_config(RunSettings(overrides={"entropy_guard": "kl_cov", "kl_cov_ratio": 0.01}))
    assert LossConfig.from_config(config).entropy_guard == guard("kl_cov", 0.01, kl_coef=1.0)
    config = build_config(RunSettings(overrides={"entropy_guard": "clip_cov"}))
    assert LossConfig.from_config(config).entropy_guard == guard("clip_cov", 2e-4)
