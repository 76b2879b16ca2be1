"""Math problems: loaders for DAPO-Math-17K and AIME files, and an offline generator with worked solutions.

Every source yields :class:`MathProblem` records whose ``prompt`` is the full user message.

- DAPO-Math-17K (parquet, as published): columns ``prompt`` (a list of chat messages whose user message
  already holds DAPO's instruction) and ``reward_model`` (``{"ground_truth": "34", "style": "rule"}``). The
  published file repeats each prompt many times; :func:`load_dapo_math` keeps the first of each by default.
- AIME 2024 / 2025 (jsonl, json or parquet): one problem and one answer column, under any of the common
  names (``problem``/``question``, ``answer``/``ground_truth``, case-insensitive); ``PROMPT_SUFFIX`` is
  appended.
  Files in DAPO's own format (such as its AIME-2024 parquet) load too.
- :func:`generate_problem`: integer-answer problems made from a seed, in four kinds (arithmetic, modular
  arithmetic, counting, small algebra) and three difficulty levels, each with a worked solution, ASCII only.
  :func:`problem_for_seed` keeps the train, validation and test splits of ``envs/seeds.py`` disjoint: a
  problem's text hashes to one split, and a seed of a split only yields problems of that split.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs.seeds import SPLITS, split_of_content

# DAPO's instruction (the DAPO-Math-17K prompts'), appended to every problem that does not carry it already.
PROMPT_SUFFIX = (
    "The last line of your response should be of the form Answer: $Answer (without quotes) "
    "where $Answer is the answer to the problem."
)
KINDS = ("arithmetic", "modular", "counting", "algebra")
DIFFICULTIES = (1, 2, 3)


@dataclass(frozen=True)
class MathProblem:
    """One problem: the user message, its ground-truth answer, and a worked solution when known."""

    prompt: str
    answer: str
    solution: str = ""
    source: str = ""


def demonstration(problem: MathProblem) -> str:
    """A response the env accepts as correct: the worked solution (if any), then ``Answer: <answer>``."""
    body = problem.solution.strip()
    return f"{body}\nAnswer: {problem.answer}" if body else f"Answer: {problem.answer}"


# --------------------------------------------------------------------------------------- files


def iter_records(path: str | Path, columns: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a ``.parquet``, ``.jsonl`` or ``.json`` file (a list of objects) as dicts, streamed.

    Parquet is read in record batches (only ``columns`` when given), so a large file is never held whole.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        present = [c for c in columns if c in parquet.schema_arrow.names] if columns else None
        for batch in parquet.iter_batches(batch_size=4096, columns=present):
            yield from batch.to_pylist()
    elif suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
    elif suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of objects")
        yield from data
    else:
        raise ValueError(f"{path}: unsupported file type {suffix!r}; use .parquet, .jsonl or .json")


def _field(row: dict[str, Any], names: Sequence[str]) -> Any:
    """The value of the first of ``names`` present in ``row``, matching names case-insensitively."""
    lowered = {str(k).lower(): v for k, v in row.items()}
    for name in names:
        if lowered.get(name) is not None:
            return lowered[name]
    return None


def _user_message(prompt: Any) -> str:
    """The content of the last user message of a chat prompt (or the prompt itself when it is text)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if users:
            return str(users[-1])
    raise ValueError(f"cannot read a user message from prompt {prompt!r:.200}")


def _ground_truth(reward_model: Any) -> str:
    truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else reward_model
    if isinstance(truth, dict):  # some exports nest it: {"target": ...}
        truth = truth.get("target")
    if isinstance(truth, list | tuple):
        truth = truth[0] if truth else None
    if truth is None:
        raise ValueError(f"no ground truth in reward_model {reward_model!r:.200}")
    return str(truth).strip()


def load_dapo_math(path: str | Path, *, dedupe: bool = True, limit: int | None = None) -> list[MathProblem]:
    """Problems of a DAPO-Math-17K file (``prompt`` and ``reward_model`` columns), in file order.

    Args:
        dedupe: keep only the first row of each distinct prompt (the published parquet repeats them).
        limit: stop after this many problems.
    """
    problems: list[MathProblem] = []
    seen: set[str] = set()
    for row in iter_records(path, columns=("prompt", "reward_model", "data_source")):
        if "prompt" not in row or "reward_model" not in row:
            raise ValueError(f"{path}: a DAPO row needs 'prompt' and 'reward_model'; got {sorted(row)}")
        prompt = _user_message(row["prompt"])
        if dedupe and prompt in seen:
            continue
        seen.add(prompt)
        source = str(row.get("data_source") or "dapo-math")
        problems.append(MathProblem(prompt=prompt, answer=_ground_truth(row["reward_model"]), source=source))
        if limit is not None and len(problems) >= limit:
            break
    return problems


_PROBLEM_COLUMNS = ("problem", "question", "prompt", "input")
_ANSWER_COLUMNS = ("answer", "ground_truth", "final_answer", "expected_answer", "target")
_SOLUTION_COLUMNS = ("solution", "reasoning")


def load_aime(path: str | Path, *, limit: int | None = None) -> list[MathProblem]:
    """Problems of an AIME-style file: a problem and an answer column (common names; see module docstring)."""
    problems: list[MathProblem] = []
    for row in iter_records(path):
        problem, answer = _field(row, _PROBLEM_COLUMNS), _field(row, _ANSWER_COLUMNS)
        if problem is None or answer is None:
            raise ValueError(
                f"{path}: need a problem column (one of {_PROBLEM_COLUMNS}) and an answer column "
                f"(one of {_ANSWER_COLUMNS}); got {sorted(row)}"
            )
        solution = _field(row, _SOLUTION_COLUMNS)
        problems.append(
            MathProblem(
                prompt=f"{str(problem).strip()}\n\n{PROMPT_SUFFIX}",
                answer=str(answer).strip(),
                solution="" if solution is None else str(solution).strip(),
                source="aime",
            )
        )
        if limit is not None and len(problems) >= limit:
            break
    return problems


def load_problems(path: str | Path, *, limit: int | None = None) -> list[MathProblem]:
    """Problems of a file in DAPO's format (``prompt`` + ``reward_model``) or AIME's (problem + answer)."""
    first = next(iter_records(path), None)
    if first is None:
        raise ValueError(f"{path}: no rows")
    if "prompt" in first and "reward_model" in first:
        return load_dapo_math(path, limit=limit)
    return load_aime(path, limit=limit)


# --------------------------------------------------------------------------------------- generator


def _signed(value: int) -> str:
    """``+ 3`` or ``- 3``: a term after another one."""
    return f"+ {value}" if value >= 0 else f"- {-value}"


def _arithmetic(rng: np.random.Generator, level: int) -> tuple[str, int, str]:
    if level == 1:
        a, b = (int(x) for x in rng.integers(1, 51, size=2))
        if rng.random() < 0.5:
            return f"What is {a} + {b}?", a + b, f"{a} + {b} = {a + b}."
        return f"What is {a} - {b}?", a - b, f"{a} - {b} = {a - b}."
    if level == 2:
        a, b = (int(x) for x in rng.integers(2, 31, size=2))
        c = int(rng.integers(1, 101))
        p = a * b
        return f"What is {a} * {b} + {c}?", p + c, f"{a} * {b} = {p}. {p} + {c} = {p + c}."
    a, b = (int(x) for x in rng.integers(10, 100, size=2))
    c, d = int(rng.integers(2, 20)), int(rng.integers(1, 1000))
    s = a + b
    text = f"What is ({a} + {b}) * {c} - {d}?"
    return text, s * c - d, f"{a} + {b} = {s}. {s} * {c} = {s * c}. {s * c} - {d} = {s * c - d}."


def _modular(rng: np.random.Generator, level: int) -> tuple[str, int, str]:
    if level == 1:
        a, m = int(rng.integers(10, 201)), int(rng.integers(2, 13))
        q, r = divmod(a, m)
        text = f"What is the remainder when {a} is divided by {m}?"
        return text, r, f"{a} = {m} * {q} + {r}, so the remainder is {r}."
    if level == 2:
        a, b = (int(x) for x in rng.integers(10, 100, size=2))
        m = int(rng.integers(3, 21))
        p = a * b
        q, r = divmod(p, m)
        text = f"What is the remainder when {a} * {b} is divided by {m}?"
        return text, r, f"{a} * {b} = {p}. {p} = {m} * {q} + {r}, so the remainder is {r}."
    a, k, m = int(rng.integers(2, 21)), int(rng.integers(5, 16)), int(rng.integers(3, 21))
    powers, value = [], 1
    for i in range(1, k + 1):
        value = value * a % m
        powers.append(f"{a}^{i} -> {value}")
    text = f"What is the remainder when {a}^{k} is divided by {m}?"
    return text, value, f"Remainders mod {m}, multiplying by {a} each time: " + ", ".join(powers) + "."


def _counting(rng: np.random.Generator, level: int) -> tuple[str, int, str]:
    if level == 1:
        a = int(rng.integers(1, 100))
        b = a + int(rng.integers(1, 100))
        text = f"How many integers are there from {a} to {b}, inclusive?"
        return text, b - a + 1, f"{b} - {a} + 1 = {b - a + 1}."
    if level == 2:
        k, n = int(rng.integers(2, 13)), int(rng.integers(20, 501))
        text = f"How many multiples of {k} are there from 1 to {n}?"
        return text, n // k, f"{n} / {k} = {n / k:.2f}, rounded down: {n // k}."
    n, k = int(rng.integers(5, 16)), int(rng.integers(2, 6))
    top = " * ".join(str(n - i) for i in range(k))
    bottom = " * ".join(str(i) for i in range(k, 0, -1))
    numerator, denominator = math.perm(n, k), math.factorial(k)
    text = f"In how many ways can a committee of {k} people be chosen from {n} people?"
    solution = f"C({n}, {k}) = ({top}) / ({bottom}) = {numerator} / {denominator} = {math.comb(n, k)}."
    return text, math.comb(n, k), solution


def _algebra(rng: np.random.Generator, level: int) -> tuple[str, int, str]:
    if level == 1:
        x, a = int(rng.integers(-20, 21)), int(rng.integers(1, 51))
        b = x + a
        return f"Solve for x: x + {a} = {b}.", x, f"x = {b} - {a} = {x}."
    if level == 2:
        x, a, b = int(rng.integers(-20, 21)), int(rng.integers(2, 13)), int(rng.integers(-50, 51))
        c = a * x + b
        text = f"Solve for x: {a}x {_signed(b)} = {c}."
        return text, x, f"{a}x = {c} {_signed(-b)} = {c - b}. x = {c - b} / {a} = {x}."
    r, s = sorted(int(v) for v in rng.choice(np.arange(-12, 13), size=2, replace=False))
    p, q = -(r + s), r * s
    linear = f" {_signed(p)}x" if p else ""
    constant = f" {_signed(q)}" if q else ""
    text = f"The equation x^2{linear}{constant} = 0 has two integer roots. What is the larger root?"
    solution = (
        f"The roots add up to {r + s} and multiply to {q}. They are {r} and {s}, so the larger root is {s}."
    )
    return text, s, solution


_GENERATORS = {"arithmetic": _arithmetic, "modular": _modular, "counting": _counting, "algebra": _algebra}


def generate_problem(rng: np.random.Generator, difficulty: int | None = 1) -> MathProblem:
    """One problem of a random kind at ``difficulty`` (1, 2 or 3; None draws the level too)."""
    level = int(rng.choice(DIFFICULTIES)) if difficulty is None else difficulty
    if level not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES} or None, got {difficulty!r}")
    kind = KINDS[int(rng.integers(len(KINDS)))]
    text, answer, solution = _GENERATORS[kind](rng, level)
    return MathProblem(
        prompt=f"{text}\n\n{PROMPT_SUFFIX}",
        answer=str(answer),
        solution=solution,
        source=f"generated/{kind}/{level}",
    )


def problem_split(problem: MathProblem) -> str:
    """The split a generated problem belongs to, from a stable hash of its text."""
    return split_of_content(problem.prompt)


def problem_for_seed(
    rng: np.random.Generator, difficulty: int | None = 1, split: str | None = None
) -> MathProblem:
    """A generated problem that belongs to ``split`` (any split when None), drawn from ``rng``."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {sorted(SPLITS)}")
    for _ in range(10_000):  # the smallest split holds 5% of problems: failing 10k draws is impossible
        problem = generate_problem(rng, difficulty)
        if split is None or problem_split(problem) == split:
            return problem
    raise RuntimeError(f"no {split} problem found at difficulty {difficulty}")
