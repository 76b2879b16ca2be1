"""avg@n and pass@k of a sampler over math problems (DAPO reports avg@32 on AIME).

The sampler is any callable ``sample(prompt, n) -> n responses``, so this module depends on no model library:
wrap vLLM, transformers or an API client in a function. Responses are scored by ``envs.math_equivalence``
(the last ``Answer:`` line or ``\\boxed{}``, strict or lenient, as the env scores them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from envs.math_data import MathProblem
from envs.math_equivalence import DEFAULT_TIMEOUT_S, score_response


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct: ``1 - C(n - c, k) / C(n, k)``.

    Computed as ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)`` (Chen et al., 2021), which stays accurate in
    floating point where the binomials overflow.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


@dataclass
class EvalResult:
    """Scores of one evaluation.

    ``avg_at_n``: mean over problems of the fraction of the ``n`` responses that are correct (DAPO's avg@32).
    ``pass_at``: k -> mean over problems of the unbiased pass@k.
    ``correct``: per problem, how many of the ``n`` responses were correct.
    """

    n: int
    avg_at_n: float
    pass_at: dict[int, float]
    correct: list[int] = field(default_factory=list)


def evaluate(
    problems: Sequence[MathProblem],
    sample: Callable[[str, int], Sequence[str]],
    *,
    n: int = 32,
    ks: Sequence[int] = (1,),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> EvalResult:
    """Draw ``n`` responses per problem with ``sample(prompt, n)`` and score them.

    Args:
        problems: the problems (for example ``envs.math_data.load_aime(path)``).
        sample: returns exactly ``n`` responses for one prompt (the problem's full user message).
        n: responses per problem (32 for DAPO's avg@32).
        ks: the k of each pass@k to report; each must be at most ``n``.
        timeout_s: bound on each symbolic equivalence check.
    """
    if not problems:
        raise ValueError("no problems to evaluate")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    bad = [k for k in ks if not 1 <= k <= n]
    if bad:
        raise ValueError(f"every k must be in [1, n={n}], got {bad}")
    correct: list[int] = []
    for problem in problems:
        responses = list(sample(problem.prompt, n))
        if len(responses) != n:
            raise ValueError(f"sample returned {len(responses)} responses, expected {n}")
        correct.append(sum(score_response(r, problem.answer, timeout_s=timeout_s) for r in responses))
    return EvalResult(
        n=n,
        avg_at_n=sum(c / n for c in correct) / len(correct),
        pass_at={k: sum(pass_at_k(n, c, k) for c in correct) / len(correct) for k in ks},
        correct=correct,
    )
