"""The DAPO policy loss against an independent float64 reference, and its step-split invariance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from algorithms.dapo.loss import LOSS_AGG_MODES, LossConfig, loss_normalizer, policy_loss

# The loss settings these tests start from: DAPO's (DAPOConfig's defaults, the dual clip off as on-policy).
DAPO_LOSS = {
    "eps_low": 0.2,
    "eps_high": 0.28,
    "dual_clip_c": None,
    "loss_agg_mode": "token-mean",
    "kl_coef": 0.0,
    "max_response_tokens": None,
    "tis_cap": 2.0,
    "entropy_guard": None,
}


def loss_config(**changes) -> LossConfig:
    return LossConfig(**{**DAPO_LOSS, **changes})


def reference_loss(logp, logp_old, adv, mask, cfg, weights=None, logp_ref=None, logp_sampler=None):
    """Loss, d loss / d logp and metrics of a whole optimizer step, token by token in Python floats.

    Written from the equations, not from the implementation: per token pick the unclipped or clipped term of
    -min(rA, clip(r)A) (a tie keeps the unclipped term), apply the dual clip, weight by the truncated
    mismatch ratio min(pi_old / pi_sampler, C) when logp_sampler is given, add the KL, then reduce.
    """
    lo, hi, c = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high, cfg.dual_clip_c
    n_rows, n_cols = logp.shape
    total, pg_total = 0.0, 0.0
    grad = np.zeros((n_rows, n_cols))
    ratios, clip_low, clip_high, dual, approx_kl, kl_ref = [], 0, 0, 0, 0.0, 0.0
    tis_ratios, tis_clipped, mismatch_kl = [], 0, 0.0
    lengths = [sum(1 for t in range(n_cols) if mask[i, t]) for i in range(n_rows)]
    for i in range(n_rows):
        w = 1.0 if weights is None else float(weights[i])
        scale = 1.0 / lengths[i] if cfg.loss_agg_mode == "seq-mean-token-mean" and lengths[i] else 1.0
        for t in range(n_cols):
            if not mask[i, t]:
                continue
            a = float(adv[i]) if adv.ndim == 1 else float(adv[i, t])
            d = float(logp[i, t]) - float(logp_old[i, t])
            r = math.exp(d)
            ratios.append(r)
            approx_kl += (r - 1.0) - d
            unclipped, clipped = -r * a, -min(max(r, lo), hi) * a
            if unclipped >= clipped:
                loss, g = unclipped, -a * r
            else:
                loss, g = clipped, 0.0
                clip_high += a > 0
                clip_low += a < 0
            if c is not None and a < 0 and -c * a < loss:
                loss, g = -c * a, 0.0
                dual += 1
            if logp_sampler is not None:
                m = float(logp_old[i, t]) - float(logp_sampler[i, t])
                rho = math.exp(m)
                tis_ratios.append(rho)
                tis_clipped += rho > cfg.tis_cap
                mismatch_kl += (rho - 1.0) - m
                loss, g = loss * min(rho, cfg.tis_cap), g * min(rho, cfg.tis_cap)
            pg_total += w * scale * loss
            if logp_ref is not None:
                k = float(logp_ref[i, t]) - float(logp[i, t])
                kl_ref += math.exp(k) - k - 1.0
                loss += cfg.kl_coef * (math.exp(k) - k - 1.0)
                g += cfg.kl_coef * (1.0 - math.exp(k))
            total += w * scale * loss
            grad[i, t] = w * scale * g
    nonempty = sum(1 for n in lengths if n)
    if cfg.loss_agg_mode == "token-mean":
        norm = sum(lengths)
    elif cfg.loss_agg_mode == "seq-mean-token-mean":
        norm = nonempty
    else:  # Dr. GRPO: every row, fully masked ones too, times the fixed budget (Dr. GRPO)
        norm = n_rows * cfg.max_response_tokens
    norm = norm or 1
    n = max(len(ratios), 1)
    metrics = {
        "clipfrac_low": clip_low / n,
        "clipfrac_high": clip_high / n,
        "dual_clip_frac": dual / n,
        "approx_kl": approx_kl / n,
        "ratio_min": min(ratios, default=1.0),
        "ratio_max": max(ratios, default=1.0),
        "ratio_mean": sum(ratios) / n if ratios else 1.0,
        "pg_loss": pg_total / norm,
        "tokens": len(ratios),
    }
    if logp_ref is not None:
        metrics["kl_ref"] = kl_ref / n
    if logp_sampler is not None:
        metrics["mismatch_kl"] = mismatch_kl / n
        metrics["mismatch_ratio_min"] = min(tis_ratios, default=1.0)
        metrics["mismatch_ratio_max"] = max(tis_ratios, default=1.0)
        metrics["tis_clip_frac"] = tis_clipped / n
    return total / norm, grad / norm, metrics


def random_step(seed, n_rows=7, n_cols=11, token_adv=False):
    """Random float64 inputs with ratios across all clip regions, an empty row, a full row, and NaN/inf
    stored in masked positions."""
    rng = np.random.default_rng(seed)
    logp_old = -rng.uniform(0.05, 4.0, (n_rows, n_cols))
    log_ratio = rng.normal(0.0, 0.35, (n_rows, n_cols))
    log_ratio[rng.random((n_rows, n_cols)) < 0.15] *= 5.0  # some ratios beyond a dual clip c of 3
    logp = logp_old + log_ratio
    logp_ref = logp + rng.normal(0.0, 0.3, (n_rows, n_cols))
    mask = rng.random((n_rows, n_cols)) < 0.7
    mask[0] = False
    mask[1] = True
    adv = rng.normal(0.0, 1.0, (n_rows, n_cols) if token_adv else n_rows)
    adv[2] = 0.0
    weights = rng.uniform(0.1, 1.0, n_rows)
    for x, bad in ((logp, np.nan), (logp_old, -np.inf), (logp_ref, np.inf)):
        x[~mask] = bad
    if token_adv:
        adv[~mask] = np.nan
    return logp, logp_old, adv, mask, weights, logp_ref


def run_torch(
    logp, logp_old, adv, mask, cfg, weights=None, logp_ref=None, dtype=torch.float64, logp_sampler=None
):
    t = {
        k: torch.tensor(v, dtype=dtype)
        for k, v in (
            ("logp_old", logp_old),
            ("adv", adv),
            ("w", weights),
            ("ref", logp_ref),
            ("sampler", logp_sampler),
        )
        if v is not None
    }
    logp_t = torch.tensor(logp, dtype=dtype, requires_grad=True)
    mask_t = torch.tensor(mask)
    norm = loss_normalizer([mask_t], cfg.loss_agg_mode, cfg.max_response_tokens)
    loss, metrics = policy_loss(
        logp_t,
        t["logp_old"],
        t["adv"],
        mask_t,
        normalizer=norm,
        cfg=cfg,
        weights=t.get("w"),
        logp_ref=t.get("ref"),
        logp_sampler=t.get("sampler"),
    )
    loss.backward()
    return loss, logp_t.grad, metrics


CASES = list(
    itertools.product(
        LOSS_AGG_MODES, (None, 3.0, 1.5), (False, True), ("none", "ref-only", "kl"), (False, True)
    )
)


@pytest.mark.parametrize(("mode", "dual_c", "weighted", "kl", "token_adv"), CASES)
def test_loss_grad_and_metrics_match_reference(mode, dual_c, weighted, kl, token_adv):
    cfg = loss_config(
        dual_clip_c=dual_c,
        loss_agg_mode=mode,
        kl_coef=0.1 if kl == "kl" else 0.0,
        max_response_tokens=(16 if weighted else 11) if mode.endswith("norm") else None,
    )
    for seed in range(3):
        logp, logp_old, adv, mask, weights, logp_ref = random_step(seed, token_adv=token_adv)
        w = weights if weighted else None
        ref = logp_ref if kl != "none" else None
        want_loss, want_grad, want_metrics = reference_loss(logp, logp_old, adv, mask, cfg, w, ref)
        loss, grad, metrics = run_torch(logp, logp_old, adv, mask, cfg, w, ref)
        assert torch.isfinite(loss) and torch.isfinite(grad).all()
        assert loss.item() == pytest.approx(want_loss, rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-12, atol=1e-15)
        assert (grad.numpy()[~mask] == 0).all()
        assert set(metrics) == set(want_metrics)
        for name, want in want_metrics.items():
            assert metrics[name].item() == pytest.approx(want, rel=1e-12, abs=1e-14), name
            assert not metrics[name].requires_grad


def sampler_logprobs(seed, logp_old, mask):
    """Engine logprobs that differ from the learner's by a bf16-like jitter, some by far more than the cap,
    with NaN in masked positions."""
    rng = np.random.default_rng(1000 + seed)
    gap = rng.normal(0.0, 0.05, logp_old.shape)
    far = rng.random(logp_old.shape) < 0.2
    gap[far] = rng.uniform(-3.0, 3.0, int(far.sum()))  # pi_old / pi_sampler from e^-3 to e^3
    return np.where(mask, logp_old - gap, np.nan)


TIS_CASES = list(itertools.product(LOSS_AGG_MODES, (None, 3.0), (False, True), (False, True), (2.0, 1.0)))


@pytest.mark.parametrize(("mode", "dual_c", "kl", "token_adv", "cap"), TIS_CASES)
def test_mismatch_weight_matches_reference(mode, dual_c, kl, token_adv, cap):
    """Truncated IS: ratio against the learner's pi_old, each token's PG loss times min(pi_old/pi_vllm, C)."""
    cfg = loss_config(
        dual_clip_c=dual_c,
        loss_agg_mode=mode,
        kl_coef=0.1 if kl else 0.0,
        tis_cap=cap,
        max_response_tokens=16 if mode.endswith("norm") else None,
    )
    for seed in range(3):
        logp, logp_old, adv, mask, weights, logp_ref = random_step(seed, token_adv=token_adv)
        logp_sampler = sampler_logprobs(seed, logp_old, mask)
        ref = logp_ref if kl else None
        want_loss, want_grad, want_metrics = reference_loss(
            logp, logp_old, adv, mask, cfg, weights, ref, logp_sampler
        )
        assert want_metrics["tis_clip_frac"] > 0 and want_metrics["mismatch_ratio_min"] < 1.0
        loss, grad, metrics = run_torch(
            logp, logp_old, adv, mask, cfg, weights, ref, logp_sampler=logp_sampler
        )
        assert torch.isfinite(loss) and torch.isfinite(grad).all()
        assert loss.item() == pytest.approx(want_loss, rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-12, atol=1e-15)
        assert set(metrics) == set(want_metrics)
        for name, want in want_metrics.items():
            assert metrics[name].item() == pytest.approx(want, rel=1e-12, abs=1e-14), name
        plain_loss, _, _ = run_torch(logp, logp_old, adv, mask, cfg, weights, ref)
        assert loss.item() != plain_loss.item()  # the weight does act


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_mismatch_correction_with_identical_logprobs_is_bit_identical(mode):
    """pi_vllm == pi_old_learner: every weight is exactly 1, so the loss and gradient equal the uncorrected
    ones bit for bit (the correction costs nothing in exactness where the engine agrees)."""
    cfg = loss_config(dual_clip_c=3.0, loss_agg_mode=mode, kl_coef=0.05, max_response_tokens=16)
    logp, logp_old, adv, mask, weights, logp_ref = random_step(7)
    plain_loss, plain_grad, plain_metrics = run_torch(logp, logp_old, adv, mask, cfg, weights, logp_ref)
    loss, grad, metrics = run_torch(logp, logp_old, adv, mask, cfg, weights, logp_ref, logp_sampler=logp_old)
    assert loss.item() == plain_loss.item()
    assert torch.equal(grad, plain_grad)
    assert metrics["mismatch_kl"].item() == 0.0 and metrics["tis_clip_frac"].item() == 0.0
    assert metrics["mismatch_ratio_min"].item() == metrics["mismatch_ratio_max"].item() == 1.0
    for name, value in plain_metrics.items():
        assert torch.equal(metrics[name], value), name


def test_reference_sees_every_clip_region():
    """The random cases exercise the branches the comparison is about."""
    cfg = loss_config(dual_clip_c=3.0)
    totals = np.zeros(3)
    for seed in range(3):
        *_, m = reference_loss(*random_step(seed)[:4], cfg)
        totals += [m["clipfrac_low"], m["clipfrac_high"], m["dual_clip_frac"]]
    assert (totals > 0).all()


def test_float32_matches_reference():
    cfg = loss_config(dual_clip_c=3.0, kl_coef=0.05)
    logp, logp_old, adv, mask, weights, logp_ref = random_step(5)
    want_loss, want_grad, _ = reference_loss(logp, logp_old, adv, mask, cfg, weights, logp_ref)
    loss, grad, _ = run_torch(logp, logp_old, adv, mask, cfg, weights, logp_ref, dtype=torch.float32)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(want_loss, rel=1e-5)
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-4, atol=1e-6)


def boundary_step(log_ratios, adv):
    log_ratios = np.asarray(log_ratios, dtype=np.float64)[None, :]
    logp_old = np.zeros_like(log_ratios)
    return log_ratios, logp_old, np.asarray([adv], dtype=np.float64), np.ones_like(log_ratios, dtype=bool)


@pytest.mark.parametrize("adv", [1.0, -1.0])
@pytest.mark.parametrize("dual_c", [None, 3.0])
def test_ratios_at_and_around_clip_boundaries(adv, dual_c):
    cfg = loss_config(dual_clip_c=dual_c)
    d = 1e-9  # decisively on one side of each bound; the exact bounds are the next test's job
    log_ratios = [
        math.log(0.8) - d,
        math.log(0.8) + d,
        0.0,
        math.log(1.28) - d,
        math.log(1.28) + d,
        math.log(3.0) - d,
        math.log(3.0) + d,
    ]
    step = boundary_step(log_ratios, adv)
    want_loss, want_grad, want_metrics = reference_loss(*step, cfg)
    loss, grad, metrics = run_torch(*step, cfg)
    assert loss.item() == pytest.approx(want_loss, rel=1e-12)
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-12, atol=1e-15)
    for name in ("clipfrac_low", "clipfrac_high", "dual_clip_frac"):
        assert metrics[name].item() == pytest.approx(want_metrics[name]), name
    # Tokens beyond a bound that binds for the sign of A have no gradient; the others keep -A r / n.
    zero = (grad.numpy()[0] == 0).tolist()
    if adv > 0:
        assert zero == [False, False, False, False, True, True, True]
    else:
        assert zero == [True, False, False, False, False, False, dual_c is not None]


def test_ratio_exactly_on_the_bounds_keeps_its_gradient():
    """r is bit-exactly 1 + eps_high (A > 0), 1 - eps_low (A < 0) or c (A < 0): not clipped."""
    r_hi = torch.exp(torch.tensor(0.25, dtype=torch.float64))
    r_lo = torch.exp(torch.tensor(-0.25, dtype=torch.float64))
    r_c = torch.exp(torch.tensor(1.5, dtype=torch.float64))
    cfg = loss_config(eps_low=1.0 - r_lo.item(), eps_high=r_hi.item() - 1.0, dual_clip_c=r_c.item())
    assert 1.0 + cfg.eps_high == r_hi.item() and 1.0 - cfg.eps_low == r_lo.item()
    logp = torch.tensor([[0.25, -0.25, 1.5]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0, -1.0, -1.0]], dtype=torch.float64)
    mask = torch.ones(1, 3, dtype=torch.bool)
    logp_old = torch.zeros(1, 3, dtype=torch.float64)
    loss, metrics = policy_loss(logp, logp_old, adv, mask, normalizer=3.0, cfg=cfg)
    loss.backward()
    ratio = torch.stack([r_hi, r_lo, r_c])
    torch.testing.assert_close(logp.grad[0], -adv[0] * ratio / 3.0, rtol=0, atol=1e-15)
    torch.testing.assert_close(loss, (-adv[0] * ratio).sum() / 3.0)
    for name in ("clipfrac_low", "clipfrac_high", "dual_clip_frac"):
        assert metrics[name].item() == 0.0


def test_zero_width_clip_range():
    """eps_low = eps_high = 0: r = 1 exactly is on both bounds; r an ulp away is clipped on one side."""
    cfg = loss_config(eps_low=0.0, eps_high=0.0)
    step = boundary_step([0.0, 1e-12, -1e-12, 0.0, 1e-12, -1e-12], 0.0)
    adv = np.array([[2.0, 2.0, 2.0, -2.0, -2.0, -2.0]])
    step = (step[0], step[1], adv, step[3])
    want_loss, want_grad, want_metrics = reference_loss(*step, cfg)
    loss, grad, metrics = run_torch(*step, cfg)
    assert loss.item() == pytest.approx(want_loss, rel=1e-12)
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-12)
    assert (grad.numpy()[0] == 0).tolist() == [False, True, False, False, False, True]
    assert metrics["clipfrac_high"].item() == pytest.approx(1 / 6)
    assert metrics["clipfrac_low"].item() == pytest.approx(1 / 6)


def test_clip_fractions_on_constructed_tokens():
    #          high-clipped  unclipped  low-clipped  unclipped  dual   A = 0   masked
    ratio = [1.5, 0.5, 0.5, 1.5, 4.0, 2.0, 100.0]
    adv = [[1.0, 1.0, -1.0, -1.0, -1.0, 0.0, 1.0]]
    logp = torch.tensor(np.log([ratio]), dtype=torch.float64, requires_grad=True)
    logp_old = torch.zeros_like(logp)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    adv_t = torch.tensor(adv, dtype=torch.float64)
    for dual_c, want_dual in ((None, 0.0), (3.0, 1 / 6)):
        cfg = loss_config(dual_clip_c=dual_c)
        loss, m = policy_loss(logp, logp_old, adv_t, mask, normalizer=6.0, cfg=cfg)
        assert m["clipfrac_high"].item() == pytest.approx(1 / 6)
        assert m["clipfrac_low"].item() == pytest.approx(1 / 6)
        assert m["dual_clip_frac"].item() == pytest.approx(want_dual)
        assert m["ratio_min"].item() == pytest.approx(0.5)
        assert m["ratio_max"].item() == pytest.approx(4.0)
        assert m["ratio_mean"].item() == pytest.approx(sum(ratio[:6]) / 6)
        assert m["tokens"].item() == 6
        # per token: -1.28, -0.5, +0.8, +1.5, min(4, 3) or 4, 0
        want = (-1.28 - 0.5 + 0.8 + 1.5 + (4.0 if dual_c is None else 3.0)) / 6
        assert loss.item() == pytest.approx(want)


def test_empty_micro_batch_gives_zero_loss_and_neutral_metrics():
    logp = torch.full((2, 3), float("nan"), dtype=torch.float64, requires_grad=True)
    mask = torch.zeros(2, 3, dtype=torch.bool)
    cfg = loss_config(kl_coef=0.1, loss_agg_mode="seq-mean-token-mean")
    loss, m = policy_loss(
        logp,
        logp.detach(),
        torch.ones(2),
        mask,
        normalizer=4.0,
        cfg=cfg,
        weights=torch.full((2,), float("nan")),
        logp_ref=logp.detach(),
    )
    loss.backward()
    assert loss.item() == 0.0 and (logp.grad == 0).all()
    assert m["ratio_min"].item() == m["ratio_max"].item() == m["ratio_mean"].item() == 1.0
    assert m["approx_kl"].item() == m["kl_ref"].item() == m["clipfrac_high"].item() == 0.0


def test_nan_in_masked_positions_equals_zero_padding():
    logp, logp_old, adv, mask, weights, logp_ref = random_step(9, token_adv=True)
    cfg = loss_config(kl_coef=0.2, dual_clip_c=3.0)
    loss_nan, grad_nan, _ = run_torch(logp, logp_old, adv, mask, cfg, weights, logp_ref)
    clean = [np.where(mask, x, 0.0) for x in (logp, logp_old, adv)]
    loss_zero, grad_zero, _ = run_torch(*clean, mask, cfg, weights, np.where(mask, logp_ref, 0.0))
    assert loss_nan.item() == loss_zero.item()
    assert torch.equal(grad_nan, grad_zero)


def test_float_mask_and_sequence_advantages_broadcast():
    logp, logp_old, adv, mask, weights, _ = random_step(4)
    cfg = loss_config(loss_agg_mode="seq-mean-token-mean")
    loss_bool, grad_bool, _ = run_torch(logp, logp_old, adv, mask, cfg, weights)
    loss_float, grad_float, _ = run_torch(logp, logp_old, adv, mask.astype(np.float32), cfg, weights)
    adv_tokens = np.repeat(adv[:, None], logp.shape[1], axis=1)
    loss_tok, grad_tok, _ = run_torch(logp, logp_old, adv_tokens, mask, cfg, weights)
    assert loss_bool.item() == loss_float.item() == loss_tok.item()
    assert torch.equal(grad_bool, grad_float) and torch.equal(grad_bool, grad_tok)


SPLITS = ([12], [3, 3, 3, 3], [1, 5, 2, 4], [11, 1], [1] * 12)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("max_tokens", [30, 40])
def test_gradient_accumulation_is_split_invariant(mode, max_tokens):
    """Summing micro-batch losses with the step-wide normalizer gives the full-step loss and gradient, for
    any split and with each micro-batch padded only to its own longest sequence."""
    rng = np.random.default_rng(0)
    n_rows, n_cols = 12, 30
    lengths = rng.integers(1, n_cols + 1, n_rows)
    lengths[3] = 0
    mask = torch.arange(n_cols)[None, :] < torch.tensor(lengths)[:, None]
    logp_old = torch.tensor(-rng.uniform(0.1, 3.0, (n_rows, n_cols)))
    logp_all = logp_old + torch.tensor(rng.normal(0, 0.3, (n_rows, n_cols)))
    adv = torch.tensor(rng.normal(0, 1, n_rows))
    weights = torch.tensor(rng.uniform(0.2, 1.0, n_rows))
    logp_ref = logp_all + 0.1
    cfg = loss_config(loss_agg_mode=mode, dual_clip_c=3.0, kl_coef=0.05, max_response_tokens=max_tokens)

    results = []
    for split in SPLITS:
        logp = logp_all.clone().requires_grad_(True)
        bounds = np.cumsum([0, *split])
        parts = [slice(a, b) for a, b in itertools.pairwise(bounds)]
        widths = [max(int(lengths[p].max()), 1) for p in parts]
        norm = loss_normalizer([mask[p, :w] for p, w in zip(parts, widths, strict=True)], mode, max_tokens)
        total = 0.0
        for p, w in zip(parts, widths, strict=True):
            loss, _ = policy_loss(
                logp[p, :w],
                logp_old[p, :w],
                adv[p],
                mask[p, :w],
                normalizer=norm,
                cfg=cfg,
                weights=weights[p],
                logp_ref=logp_ref[p, :w],
            )
            loss.backward()
            total += loss.item()
        results.append((total, logp.grad.clone()))
    for total, grad in results[1:]:
        assert total == pytest.approx(results[0][0], rel=1e-12)
        torch.testing.assert_close(grad, results[0][1], rtol=1e-12, atol=1e-15)
    want_loss, want_grad, _ = reference_loss(
        logp_all.numpy(), logp_old.numpy(), adv.numpy(), mask.numpy(), cfg, weights.numpy(), logp_ref.numpy()
    )
    assert results[0][0] == pytest.approx(want_loss, rel=1e-12)
    np.testing.assert_allclose(results[0][1].numpy(), want_grad, rtol=1e-12, atol=1e-15)


def test_per_micro_batch_normalizer_would_change_the_gradient():
    """The invariance test has teeth: normalizing each micro-batch by its own token count (verl's legacy
    actor) gives a different gradient."""
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    logp = torch.zeros(2, 4, dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([1.0, 1.0], dtype=torch.float64)
    cfg = loss_config()
    for rows in (slice(0, 1), slice(1, 2)):
        local = loss_normalizer([mask[rows]], cfg.loss_agg_mode)
        loss, _ = policy_loss(
            logp[rows], logp[rows].detach(), adv[rows], mask[rows], normalizer=local, cfg=cfg
        )
        loss.backward()
    grad_local = logp.grad.clone()
    logp.grad = None
    step_norm = loss_normalizer([mask], "token-mean")
    loss, _ = policy_loss(logp, logp.detach(), adv, mask, normalizer=step_norm, cfg=cfg)
    loss.backward()
    assert not torch.allclose(grad_local, logp.grad)
    assert torch.allclose(logp.grad[mask], torch.full((5,), -0.2, dtype=torch.float64))


def test_loss_normalizer_values():
    m1 = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0]])
    m2 = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0]], dtype=torch.float32)
    assert loss_normalizer([m1, m2], "token-mean") == 12.0
    assert loss_normalizer([m1, m2], "seq-mean-token-mean") == 4.0
    # Dr. GRPO: all 5 rows (the empty one too) times the fixed budget, which it requires.
    assert loss_normalizer([m1, m2], "seq-mean-token-sum-norm", max_response_tokens=100) == 500.0
    with pytest.raises(ValueError, match="max_response_tokens"):
        loss_normalizer([m1, m2], "seq-mean-token-sum-norm")
    assert loss_normalizer([torch.zeros(3, 5)], "token-mean") == 1.0
    assert loss_normalizer([], "seq-mean-token-mean") == 1.0
    with pytest.raises(ValueError, match="mode"):
        loss_normalizer([m1], "token-sum")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"eps_low": 1.0},
        {"eps_low": -0.1},
        {"eps_high": -0.01},
        {"dual_clip_c": 1.0},
        {"loss_agg_mode": "seq-mean-token-sum"},
        {"kl_coef": -1.0},
        {"max_response_tokens": 0},
        {"tis_cap": 0.5},
    ],
)
def test_bad_loss_settings_are_rejected_by_dapo_configs_validator(kwargs):
    from algorithms.dapo import DAPOConfig

    with pytest.raises(ValueError, match=f"DAPOConfig: {next(iter(kwargs))}"):
        DAPOConfig().training(**kwargs).validate()


def test_the_loss_settings_come_from_the_config():
    from algorithms.dapo import DAPOConfig

    assert LossConfig.from_config(DAPOConfig()) == loss_config(max_response_tokens=20480)
    replayed = LossConfig.from_config(DAPOConfig().replay(mode="freshper").training(eps_high=0.3))
    assert (replayed.dual_clip_c, replayed.eps_high) == (3.0, 0.3)


def test_argument_validation():
    x = torch.zeros(2, 3)
    mask = torch.ones(2, 3)
    cfg = loss_config()
    with pytest.raises(ValueError, match="logp_ref"):
        policy_loss(x, x, torch.zeros(2), mask, normalizer=1.0, cfg=loss_config(kl_coef=0.1))
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(x, x, torch.zeros(3), mask, normalizer=1.0, cfg=cfg)
    with pytest.raises(ValueError, match="weights"):
        policy_loss(x, x, torch.zeros(2), mask, normalizer=1.0, cfg=cfg, weights=torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask"):
        policy_loss(x, x, torch.zeros(2), torch.ones(2, 4), normalizer=1.0, cfg=cfg)
    with pytest.raises(ValueError, match="normalizer"):
        policy_loss(x, x, torch.zeros(2), mask, normalizer=0.0, cfg=cfg)
    with pytest.raises(ValueError, match="logp_sampler"):
        policy_loss(x, x, torch.zeros(2), mask, normalizer=1.0, cfg=cfg, logp_sampler=torch.zeros(2, 4))
