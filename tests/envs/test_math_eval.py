"""avg@n and unbiased pass@k against brute force."""

from __future__ import annotations

import itertools
import math

import pytest

from envs.math_data import MathProblem
from envs.math_eval import evaluate, pass_at_k


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """The fraction of k-subsets of n samples (c correct) that hold at least one correct sample."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_matches_brute_force(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_large_n_is_finite_and_monotone():
    values = [pass_at_k(1024, 3, k) for k in (1, 8, 64, 512)]
    assert values == sorted(values) and 0 < values[0] < values[-1] <= 1
    assert pass_at_k(1024, 3, 1) == pytest.approx(3 / 1024)
    assert pass_at_k(32, 32, 32) == 1.0 and pass_at_k(32, 0, 1) == 0.0
    assert math.isclose(pass_at_k(32, 1, 32), 1.0)


def test_pass_at_k_rejects_bad_counts():
    for n, c, k in [(4, 5, 1), (4, 2, 0), (4, 2, 5), (4, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_evaluate_scores_a_scripted_sampler():
    problems = [MathProblem(prompt=f"Q{i}", answer=str(i)) for i in range(3)]
    correct_per_problem = {"Q0": 0, "Q1": 2, "Q2": 4}
    calls = []

    def sample(prompt: str, n: int) -> list[str]:
        calls.append((prompt, n))
        answer = prompt[1:]
        good = correct_per_problem[prompt]
        return [f"Answer: {answer}"] * good + ["Answer: -1"] * (n - good - 1) + ["no answer"]

    result = evaluate(problems, sample, n=5, ks=(1, 5))
    assert calls == [("Q0", 5), ("Q1", 5), ("Q2", 5)]
    assert result.correct == [0, 2, 4]
    assert result.avg_at_n == pytest.approx((0 + 2 / 5 + 4 / 5) / 3)
    assert result.pass_at[1] == pytest.approx(result.avg_at_n)
    assert result.pass_at[5] == pytest.approx(2 / 3)


def test_evaluate_accepts_boxed_and_symbolic_answers():
    problems = [MathProblem(prompt="half", answer="\\frac{1}{2}")]
    result = evaluate(
        problems, lambda prompt, n: ["so \\boxed{0.5}", "Answer: 1/2", "Answer: 2"], n=3, ks=(2,)
    )
    assert result.correct == [2]
    assert result.pass_at[2] == pytest.approx(1.0)


def test_evaluate_rejects_bad_arguments():
    problems = [MathProblem(prompt="Q", answer="1")]
    with pytest.raises(ValueError, match="responses"):
        evaluate(problems, lambda prompt, n: ["Answer: 1"], n=2)
    with pytest.raises(ValueError, match="every k"):
        evaluate(problems, lambda prompt, n: ["Answer: 1"] * n, n=2, ks=(3,))
    with pytest.raises(ValueError, match="no problems"):
        evaluate([], lambda prompt, n: [], n=1)
