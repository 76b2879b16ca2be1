"""The statistics of freshrl's reports: each test states its unit (what is sampled independently) and uses it.

- **Task** (before/after on the same tasks: ``experiments.train``'s line, :func:`success_change`): an
  evaluation's per-task outcomes (``task_seeds``, ``task_successes``, ``algorithms/dapo/evaluation.py``) are
  paired by task seed. McNemar's exact test for one sample a task (:func:`mcnemar_exact`), the paired t-test
  over the per-task differences of success rates for k > 1 (:func:`paired_t_test`). Records without per-task
  outcomes (older than them) get the unpaired two-proportion z-test over episodes (:data:`UNPAIRED`), which
  ignores the pairing and so overstates the variance of the difference: conservative.
- **Seed** (arms over training seeds: ``experiments.compare``, ``experiments.sweep``): one value per seed
  run; the mean with a t interval over seeds (:func:`mean_over_seeds`), and :func:`paired_seed_test`, paired
  by seed where both arms ran the same seeds, Welch's t-test otherwise (:func:`welch_test`). A comparison's
  report also gives a curve's mean and range over seeds (:func:`curve_over_seeds`), the mean over seeds of
  each run's mean over its iterations (:func:`mean_of_means`) and the range of a cost
  (:func:`measured_range`).

A table of several tests adjusts their p-values together with Holm's step-down procedure (:func:`holm`). Each
test also gives the smallest difference it would detect at 80% power with a two-sided alpha of 0.05
(``detectable``; :func:`paired_detectable`, :func:`two_sample_detectable`): a difference below it is not
separated by a study of this size. A test returns a :class:`Significance` (a dict, so it goes into the results
files as it is).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any, NotRequired, TypedDict

import numpy as np

ALPHA = 0.05  # two-sided significance level of every test and of the detectable difference
POWER = 0.8  # the power at which the detectable difference is detected
MCNEMAR = "McNemar's exact test"
PAIRED_T = "paired t-test"
WELCH = "Welch's t-test"
UNPAIRED = "unpaired two-proportion (no per-task outcomes)"


class Significance(TypedDict):
    """The result of one test: its name, its unit and how many units it saw (``n``; both samples together
    for Welch's), the difference it tests (the second argument minus the first for before/after, the first
    minus the second for two arms), its two-sided p-value and the smallest difference it would detect (None
    where there are too few units, or no spread to estimate it from)."""

    test: str
    unit: str
    n: int
    difference: float
    p_value: float | None
    detectable: float | None
    # The 95% t interval of the paired difference over its units (paired tests; None under 2 units).
    difference_ci95_low: NotRequired[float | None]
    difference_ci95_high: NotRequired[float | None]
    t: NotRequired[float | None]  # the t statistic of a t-test (None: no spread)
    z: NotRequired[float]  # the z statistic of the two-proportion test
    gained: NotRequired[int]  # McNemar: tasks failed before and solved after
    lost: NotRequired[int]  # McNemar: tasks solved before and failed after


# ------------------------------------------------------------------------------------------ detectable
def paired_detectable(sd: float, n: int) -> float | None:
    """The smallest mean difference a paired design over ``n`` units detects at :data:`POWER` (two-sided
    :data:`ALPHA`), given the standard deviation ``sd`` of the differences: (t_{1-a/2, n-1} + t_{0.8, n-1}) x
    sd / sqrt(n), the t-based approximation of the power of the one-sample t-test (Cohen 1988). None for
    fewer than 2 units or no spread (sd 0: nothing to scale it by)."""
    from scipy import stats

    if n < 2 or sd == 0:
        return None
    quantiles = stats.t.ppf(1 - ALPHA / 2, n - 1) + stats.t.ppf(POWER, n - 1)
    return float(quantiles * sd / math.sqrt(n))


def two_sample_detectable(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The smallest difference of means two independent samples ``a`` and ``b`` detect at :data:`POWER`
    (two-sided :data:`ALPHA`): (t_{1-a/2, df} + t_{0.8, df}) x Welch's standard error, on Welch's degrees of
    freedom (Welch 1947). None for fewer than 2 in either sample, or where neither spreads."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return None
    se, df = _welch_se_df(a, b)
    if se == 0:
        return None
    return float((stats.t.ppf(1 - ALPHA / 2, df) + stats.t.ppf(POWER, df)) * se)


def _welch_se_df(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's standard error of mean(a) - mean(b) and the Welch-Satterthwaite degrees of freedom (NaN
    where neither sample spreads)."""
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    se = float(np.sqrt(va + vb))
    if se == 0:
        return 0.0, float("nan")
    return se, float((va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)))


# ------------------------------------------------------------------------------------------ tests
def paired_t_test(before: Sequence[float], after: Sequence[float], *, unit: str) -> Significance:
    """The paired t-test (Student 1908) of the differences after - before of ``unit``s matched by position:
    t = mean(d) / (sd(d) / sqrt(n)) on n - 1 degrees of freedom. Where the differences do not spread, p is 1
    for no difference and 0 for any other (the limit of t). p None for fewer than 2 units."""
    from scipy import stats

    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    n, difference = len(d), float(np.mean(d))
    interval = paired_interval(d)
    if n < 2:
        return _result(PAIRED_T, unit, n, difference, None, None, t=None, **interval)
    sd = float(np.std(d, ddof=1))
    if sd == 0:
        p = 1.0 if difference == 0 else 0.0
        return _result(PAIRED_T, unit, n, difference, p, None, t=None, **interval)
    t = difference / (sd / math.sqrt(n))
    p = float(2 * stats.t.sf(abs(t), n - 1))
    return _result(PAIRED_T, unit, n, difference, p, paired_detectable(sd, n), t=t, **interval)


def paired_interval(differences: Sequence[float]) -> dict[str, float | None]:
    """The 95% t interval of the mean of paired ``differences`` (one per unit): mean +- t_{0.975, n-1} x
    sd / sqrt(n), the interval that matches the paired t-test. A gain's interval: what a claim about a gain
    is checked against. None bounds for fewer than 2 units."""
    from algorithms.dapo.evaluation import t_half_width

    half = t_half_width(differences)
    if half is None:
        return {"difference_ci95_low": None, "difference_ci95_high": None}
    mean = float(np.mean(differences))
    return {"difference_ci95_low": mean - half, "difference_ci95_high": mean + half}


def mcnemar_exact(before: Sequence[bool | int], after: Sequence[bool | int]) -> Significance:
    """McNemar's (1947) test of paired binary outcomes (one sample per task, matched by position), in its
    exact form: under H0 a discordant task is equally likely to be gained or lost, so p is the two-sided
    binomial test of the gained among the discordant at 1/2, min(1, 2 x P(X <= min(gained, lost))); 1
    without discordant tasks. ``detectable``: the paired t approximation over the per-task differences
    (-1, 0 or 1)."""
    from scipy import stats

    if len(before) != len(after):
        raise ValueError(f"McNemar's test pairs outcomes: got {len(before)} before and {len(after)} after")
    gained = sum(1 for a, b in zip(before, after, strict=True) if b and not a)
    lost = sum(1 for a, b in zip(before, after, strict=True) if a and not b)
    n, discordant = len(before), gained + lost
    p = 1.0 if discordant == 0 else min(1.0, float(2 * stats.binom.cdf(min(gained, lost), discordant, 0.5)))
    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    detectable = paired_detectable(float(np.std(d, ddof=1)), n) if n > 1 else None
    return _result(
        MCNEMAR, "task", n, (gained - lost) / n, p, detectable, gained=gained, lost=lost, **paired_interval(d)
    )


def welch_test(a: Sequence[float], b: Sequence[float], *, unit: str = "seed") -> Significance:
    """Welch's (1947) two-sided t-test of mean(a) - mean(b) for two independent samples of ``unit``s, with
    the smallest difference it would detect (:func:`two_sample_detectable`). Where neither sample spreads, p
    is 1 for equal means and 0 for any other; p None for fewer than 2 in either sample."""
    from scipy import stats

    difference, n = float(np.mean(a) - np.mean(b)), len(a) + len(b)
    if len(a) < 2 or len(b) < 2:
        return _result(WELCH, unit, n, difference, None, None, t=None)
    se, df = _welch_se_df(a, b)
    if se == 0:
        return _result(WELCH, unit, n, difference, 1.0 if difference == 0 else 0.0, None, t=None)
    t = difference / se
    p = float(2 * stats.t.sf(abs(t), df))
    return _result(WELCH, unit, n, difference, p, two_sample_detectable(a, b), t=t)


def paired_seed_test(a_by_seed: Mapping[int, float], b_by_seed: Mapping[int, float]) -> Significance:
    """Arm a against arm b over training seeds (one value per seed run; ``difference`` = a minus b): the
    paired t-test by seed where both arms ran the same seeds (a seed shares its starting model and data
    order between arms), Welch's t-test otherwise (e.g. a comparison with runs still missing)."""
    if set(a_by_seed) == set(b_by_seed):
        seeds = sorted(a_by_seed)
        return paired_t_test([b_by_seed[s] for s in seeds], [a_by_seed[s] for s in seeds], unit="seed")
    return welch_test(list(a_by_seed.values()), list(b_by_seed.values()))


def two_proportion_test(
    successes_a: int, trials_a: int, successes_b: int, trials_b: int
) -> tuple[float, float]:
    """z and the two-sided p-value of the pooled two-proportion z-test of H0: rate a == rate b. (0, 1) when
    either side has no trials or the pooled rate is 0 or 1 (no variance: nothing separates them)."""
    if trials_a <= 0 or trials_b <= 0:
        return 0.0, 1.0
    pooled = (successes_a + successes_b) / (trials_a + trials_b)
    variance = pooled * (1 - pooled) * (1 / trials_a + 1 / trials_b)
    if variance <= 0:
        return 0.0, 1.0
    z = (successes_b / trials_b - successes_a / trials_a) / math.sqrt(variance)
    return z, math.erfc(abs(z) / math.sqrt(2))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's (1979) step-down adjustment of a family of p-values, in their order: the i-th smallest of m
    becomes max over j <= i of min(1, (m - j + 1) x p_(j)), so the adjusted values keep the order of the raw
    ones and never exceed 1; rejecting where adjusted < alpha bounds the family-wise error rate by alpha. A
    None (a test that could not be run) stays None and is not counted in m."""
    ranked = sorted((p, index) for index, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(ranked):
        running = max(running, min(1.0, (len(ranked) - rank) * p))
        adjusted[index] = running
    return adjusted


def _result(
    test: str,
    unit: str,
    n: int,
    difference: float,
    p_value: float | None,
    detectable: float | None,
    **extra: Any,
) -> Significance:
    return Significance(
        test=test, unit=unit, n=n, difference=difference, p_value=p_value, detectable=detectable, **extra
    )


# ------------------------------------------------------------------------------------------ before/after
def task_outcomes(metrics: Mapping[str, Any]) -> dict[int, float] | None:
    """An evaluation's success rate per task, by task seed (``task_seeds``, ``task_successes`` /
    ``samples_per_task``); None for a record without per-task outcomes. ValueError when the lists disagree in
    length or a seed repeats (no pairing by seed then)."""
    if "task_seeds" not in metrics or "task_successes" not in metrics:
        return None
    seeds, successes = metrics["task_seeds"], metrics["task_successes"]
    if len(seeds) != len(successes) or len(set(seeds)) != len(seeds):
        raise ValueError(
            f"per-task outcomes need one success count per distinct task seed: got {len(successes)} counts "
            f"for {len(seeds)} seeds, {len(set(seeds))} distinct"
        )
    k = int(metrics["samples_per_task"])
    return {int(seed): count / k for seed, count in zip(seeds, successes, strict=True)}


def task_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> Significance:
    """The paired test of two evaluations' per-task outcomes, matched by task seed: McNemar's exact test
    where both took one sample a task, else the paired t-test over the per-task differences of success rates
    (each task one unit, whatever its k). ValueError when the two task sets differ: a paired test needs the
    same tasks."""
    rates_before, rates_after = task_outcomes(before), task_outcomes(after)
    if rates_before is None or rates_after is None:
        raise ValueError("a paired test by task needs both evaluations' task_seeds and task_successes")
    if set(rates_before) != set(rates_after):
        only_before = len(set(rates_before) - set(rates_after))
        only_after = len(set(rates_after) - set(rates_before))
        raise ValueError(
            f"the two evaluations played different tasks ({only_before} task seeds only before, {only_after} "
            "only after): a paired test needs the same tasks (the same split and number of tasks)"
        )
    seeds = list(rates_before)
    paired_before, paired_after = [rates_before[s] for s in seeds], [rates_after[s] for s in seeds]
    if int(before["samples_per_task"]) == int(after["samples_per_task"]) == 1:
        return mcnemar_exact(paired_before, paired_after)
    return paired_t_test(paired_before, paired_after, unit="task")


def success_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The change from ``before`` to ``after`` (``algo.evaluate_policy()`` results): the paired test by task
    (:func:`task_change`) where both carry per-task outcomes, else the unpaired two-proportion z-test over
    episodes (:data:`UNPAIRED`, with its ``z``; detectable difference at the pooled rate); and whether the
    two 95% intervals overlap."""
    if task_outcomes(before) is not None and task_outcomes(after) is not None:
        return {**task_change(before, after), "intervals_overlap": intervals_overlap(before, after)}
    n_before, n_after = int(before["num_episodes"]), int(after["num_episodes"])
    successes_before, successes_after = round(before["success"] * n_before), round(after["success"] * n_after)
    z, p_value = two_proportion_test(successes_before, n_before, successes_after, n_after)
    pooled = (successes_before + successes_after) / (n_before + n_after)
    normal = NormalDist()
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_before + 1 / n_after)) if n_before and n_after else 0.0
    detectable = (normal.inv_cdf(1 - ALPHA / 2) + normal.inv_cdf(POWER)) * se if se > 0 else None
    difference = after["success"] - before["success"]
    test = _result(UNPAIRED, "episode", n_before + n_after, difference, p_value, detectable, z=z)
    return {**test, "intervals_overlap": intervals_overlap(before, after)}


def intervals_overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether the 95% success intervals (``success_ci95_low`` / ``success_ci95_high``) of two evaluations
    overlap, in either direction."""
    return a["success_ci95_low"] <= b["success_ci95_high"] and b["success_ci95_low"] <= a["success_ci95_high"]


# ------------------------------------------------------------------------------------------ reports
def mean_over_seeds(values: list[float]) -> dict[str, float | int | None]:
    """Mean, standard deviation and the half-width of the 95% t interval of the mean of one figure over
    seeds, the seed being the unit (``ci95`` None from one seed: no interval)."""
    from algorithms.dapo.evaluation import t_half_width

    n = len(values)
    std = float(np.std(values, ddof=1)) if n > 1 else 0.0
    return {"mean": float(np.mean(values)), "std": std, "n": n, "ci95": t_half_width(values)}


def curve_over_seeds(curves: Sequence[Sequence[float]]) -> dict[str, list[float]]:
    """A curve measured once per seed (the seeds' curves, at the same points): at each point, the mean over
    seeds and the range (``min``, ``max``)."""
    values = np.array(curves)
    return {
        "mean": values.mean(axis=0).tolist(),
        "min": values.min(axis=0).tolist(),
        "max": values.max(axis=0).tolist(),
    }


def mean_of_means(samples: Iterable[Sequence[float]]) -> float | None:
    """The mean over units (seeds) of each unit's own mean (a run's over its iterations), so that every unit
    weighs the same whatever its number of values; a unit without values is left out, None where none has
    any."""
    means = [float(np.mean(values)) for values in samples if len(values)]
    return float(np.mean(means)) if means else None


def measured_range(values: Sequence[float | None]) -> dict[str, Any] | None:
    """Mean, min and max of the measured ``values`` (None: not measured, e.g. peak memory without ``/proc``
    or in a run saved before it was recorded), with how many were measured (``n``) of how many (``of``);
    None where none was."""
    known = [value for value in values if value is not None]
    if not known:
        return None
    return {
        "mean": float(np.mean(known)),
        "min": float(min(known)),
        "max": float(max(known)),
        "n": len(known),
        "of": len(values),
    }


def success_line(metrics: Mapping[str, Any]) -> str:
    """An evaluation for a person: "0.332 (95% CI 0.293-0.374, 512 episodes)"."""
    return (
        f"{metrics['success']:.3f} (95% CI {metrics['success_ci95_low']:.3f}-"
        f"{metrics['success_ci95_high']:.3f}, {metrics['num_episodes']} episodes)"
    )


def change_sentence(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """One line for a person naming the test, e.g. "validation success rose from 24.6% to 36.5% (+11.9
    points); the 95% intervals do not overlap and McNemar's exact test over 512 tasks (79 gained, 18 lost)
    gives p = 2.7e-10: more than noise". More than noise where p < :data:`ALPHA`; otherwise the sentence
    says how large a change the test would detect."""
    change = success_change(before, after)
    points = 100 * change["difference"]
    if points == 0:
        head = f"validation success stayed at {after['success']:.1%} (+0.0 points)"
    else:
        verb = "rose" if points > 0 else "fell"
        head = (
            f"validation success {verb} from {before['success']:.1%} to {after['success']:.1%} "
            f"({points:+.1f} points)"
        )
    if change["test"] == MCNEMAR:
        test = f"{MCNEMAR} over {change['n']} tasks ({change['gained']} gained, {change['lost']} lost)"
    elif change["test"] == PAIRED_T:
        samples = dict.fromkeys([before["samples_per_task"], after["samples_per_task"]])
        test = f"a paired t-test over {change['n']} tasks ({' and '.join(map(str, samples))} samples each)"
    else:
        episodes = (
            f"{before['num_episodes']} episodes each"
            if before["num_episodes"] == after["num_episodes"]
            else f"{before['num_episodes']} and {after['num_episodes']} episodes"
        )
        test = f"an unpaired two-proportion test (no per-task outcomes; {episodes})"
    p_value = "n/a" if change["p_value"] is None else f"{change['p_value']:.2g}"
    overlap = "overlap" if change["intervals_overlap"] else "do not overlap"
    said = f"{head}; the 95% intervals {overlap} and {test} gives p = {p_value}"
    if change["p_value"] is not None and change["p_value"] < ALPHA:
        return f"{said}: more than noise"
    detectable = change["detectable"]
    power = "" if detectable is None else f" (it detects changes of {100 * detectable:.1f} points or more)"
    return f"{said}: not separated from the noise{power}"


def prediction_band(curves: Sequence[Sequence[float]], coverage: float = 1 - ALPHA) -> dict[str, Any]:
    """Where a new seed's curve should fall, from the seeds' ``curves`` (one value per seed at each of the
    same m points): at each point, mean +- t_{1-a/(2m), n-1} x sd x sqrt(1 + 1/n), the t prediction
    interval of one new observation (Hahn & Meeker 1991, eq. 4.6) with Bonferroni's correction over the m
    points, so that a new seed's whole curve lies inside with probability >= ``coverage`` when seeds are
    exchangeable and roughly normal at each point. ``low``/``high`` are None for fewer than 2 seeds (no
    spread to predict from)."""
    from scipy import stats

    values = np.asarray(curves, dtype=float)
    n, m = values.shape
    mean = values.mean(axis=0)
    if n < 2:
        return {"mean": mean.tolist(), "low": None, "high": None, "n": n, "coverage": coverage}
    quantile = stats.t.ppf(1 - (1 - coverage) / (2 * m), n - 1)
    half = quantile * values.std(axis=0, ddof=1) * math.sqrt(1 + 1 / n)
    low, high = (mean - half).tolist(), (mean + half).tolist()
    return {"mean": mean.tolist(), "low": low, "high": high, "n": n, "coverage": coverage}
