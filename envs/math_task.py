"""Math problems with a rule-based verifier (DAPO), single turn or with retries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral
from os import PathLike
from pathlib import Path
from typing import Any

from envs.base import MAX_TEXT_CHARS, MultiTurnEnv, Outcome, Parsed, check_real
from envs.math_data import (
    DIFFICULTIES,
    MathProblem,
    demonstration,
    load_problems,
    problem_for_seed,
)
from envs.math_equivalence import DEFAULT_TIMEOUT_S, extract_answer, is_equivalent
from envs.seeds import SPLITS, split_of_reset_seed

CORRECT_REWARD = 1.0
WRONG_REWARD = -1.0
FORMAT_REMINDER = "End your response with a line of the form Answer: <answer>."
# Answers echoed back in feedback are cut to this length so that the observation stays short.
_ECHO_CHARS = 80
# A problem's prompt leaves room for the reprompt line above it within the observation bound.
MAX_PROMPT_CHARS = MAX_TEXT_CHARS - 1024
# The longest symbolic check worth waiting for: real answers take milliseconds, pathological ones forever.
MAX_CHECK_TIMEOUT_S = 60.0

MathDataset = str | PathLike | Sequence[MathProblem] | Callable[[], Sequence[MathProblem]]


class MathEnv(MultiTurnEnv):
    """Solve a math problem; the last line of the response states the answer.

    ## Description
    The observation is a math problem followed by DAPO's instruction: "The last line of your response should
    be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem." The response
    is checked by ``envs.math_equivalence``: integers exactly (``042``, ``42.0`` and ``$42$`` equal 42), other
    answers symbolically with ``math-verify``, every check bounded in time. By default the problems come from
    an offline generator (arithmetic, modular arithmetic, counting and small algebra, with integer answers);
    ``dataset`` points the env at DAPO-Math-17K, AIME or any list of problems.

    With ``max_turns`` above 1 a wrong answer is answered with feedback ("Your answer 41 is incorrect. Try
    again.") and the model may try again, up to ``max_turns`` answers.

    ## Action Space
    Any string. Strict format: the last non-empty line is ``Answer: <answer>`` or holds
    ``\\boxed{<answer>}``. Lenient fallback: the later of the last ``Answer:`` line and the last
    ``\\boxed{...}`` anywhere (the answer is scored, ``info["format_ok"]`` is False). A response with neither
    is invalid.

    ## Observation Space
    ``AnyText``: the problem text at reset; after a step, feedback ("Correct.", "Your answer ... is
    incorrect. Try again.") or, for an invalid response, what the ``invalid_output`` policy shows.

    ## Starting State
    ``reset(seed=s)`` picks the problem from ``s``. Generated problems: a seed of a split of ``envs/seeds.py``
    only yields problems whose text hashes to that split, so train, validation and test problems never
    overlap; ``seed=None`` draws train problems. A dataset: a seed of a split picks problem
    ``(s - split.start) % len(dataset)``, so ``seeds("test", len(dataset))`` visits each problem once;
    ``seed=None`` picks one at random. Keep separate files for training and evaluation (DAPO-Math-17K for
    training, AIME for testing, as DAPO does). A seed outside every split range is a ``ValueError``.

    ## Rewards
    DAPO's rule: +1 for an equivalent answer, -1 otherwise. An episode's return is +1 if solved and -1 if
    not, plus ``invalid_penalty`` for each response without an answer: a wrong answer before the last turn
    gets 0 (and feedback), the last wrong answer -1, and an invalid response ``invalid_penalty``, and -1 more
    when it ends the episode.

    ## Episode End
    Terminated: a correct answer; any response on the last allowed turn (the attempts are part of the task,
    so the episode never truncates); an invalid response under ``invalid_output="terminate"``.

    ## Arguments
    ```python
    import gymnasium as gym
    import envs

    env = gym.make(
        "freshrl/Math-v0",
        dataset=None,              # None: the generator; or a .parquet/.jsonl/.json path, a list of
                                   # MathProblem, or a callable returning one (prompts of at most
                                   # MAX_PROMPT_CHARS, non-empty answers)
        difficulty=1,              # generator level 1, 2 or 3; None mixes them (ignored for datasets)
        max_turns=1,               # answers allowed, an int >= 1; above 1, a wrong answer gets feedback
        invalid_output="reprompt", # "noop" | "reprompt" | "terminate"
        invalid_penalty=0.0,       # any finite number, added for each response without an answer
        check_timeout_s=1.0,       # bound on one symbolic equivalence check, in (0, 60] seconds
        render_mode=None,          # None or "ansi" (renders the problem)
    )
    ```
    A bad argument is a ``ValueError`` (``TypeError`` for a dataset of the wrong kind) naming the argument
    and what it may be.
    ``info`` adds ``source`` (where the problem comes from, such as ``generated/modular/2``; every step),
    ``answer`` (the parsed answer, "" when none) and ``correct``.
    ``env.unwrapped.oracle_responses()`` returns the responses an oracle gives from the current state (the
    worked solution, then the answer line).

    ## Version History
    - v0: first version.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        dataset: MathDataset | None = None,
        difficulty: int | None = 1,
        max_turns: int = 1,
        invalid_output: str = "reprompt",
        invalid_penalty: float = 0.0,
        check_timeout_s: float = DEFAULT_TIMEOUT_S,
        render_mode: str | None = None,
    ):
        super().__init__(
            max_turns=max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        if difficulty is not None and (
            isinstance(difficulty, bool)
            or not isinstance(difficulty, Integral)
            or difficulty not in DIFFICULTIES
        ):
            raise ValueError(f"difficulty must be one of {DIFFICULTIES} or None (mixed), got {difficulty!r}")
        self.difficulty = None if difficulty is None else int(difficulty)
        self.check_timeout_s = check_real("check_timeout_s", check_timeout_s)
        if not 0 < self.check_timeout_s <= MAX_CHECK_TIMEOUT_S:
            raise ValueError(
                f"check_timeout_s must be in (0, {MAX_CHECK_TIMEOUT_S}] seconds, got {check_timeout_s!r}"
            )
        self.problems = _resolve_dataset(dataset)
        self.problem: MathProblem | None = None
        self._seed: int | None = None
        self._split = "train"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._split = split_of_reset_seed(seed)  # first: a bad seed leaves the env as it was
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def oracle_responses(self) -> list[str]:
        """The oracle's responses from the current state (a demonstration): one correct, well-formed answer,
        with the worked solution when the problem has one; [] once the episode ended."""
        if self.problem is None:
            raise RuntimeError("call reset() before oracle_responses()")
        return [] if self._done else [demonstration(self.problem)]

    def format_reminder(self) -> str:
        return FORMAT_REMINDER

    # ----------------------------------------------------------------- hooks
    def _new_task(self) -> str:
        if self.problems is None:
            self.problem = problem_for_seed(self.np_random, self.difficulty, self._split)
        else:
            if self._seed is None:
                index = int(self.np_random.integers(len(self.problems)))
            else:
                index = (self._seed - SPLITS[self._split].start) % len(self.problems)
            self.problem = self.problems[index]
        return self.problem.prompt

    def _parse(self, response: str) -> Parsed:
        extracted = extract_answer(response)
        if extracted is None:
            return Parsed(format_ok=False, valid=False, error="no final answer found")
        return Parsed(format_ok=extracted.strict, valid=True, action=extracted.answer)

    def _apply(self, action: str) -> Outcome:
        info = {"answer": action, "correct": False}
        if is_equivalent(action, self.problem.answer, timeout_s=self.check_timeout_s):
            info["correct"] = True
            return Outcome(CORRECT_REWARD, "Correct.", terminated=True, success=True, info=info)
        if self.turn >= self.max_turns:
            return Outcome(WRONG_REWARD, "Incorrect.", terminated=True, info=info)
        shown = action if len(action) <= _ECHO_CHARS else action[:_ECHO_CHARS] + "..."
        left = self.max_turns - self.turn
        tries = "1 try" if left == 1 else f"{left} tries"
        message = f"Your answer {shown} is incorrect. Try again ({tries} left)."
        return Outcome(0.0, f"{message} {FORMAT_REMINDER}", info=info)

    def _task_info(self) -> dict[str, Any]:
        return {"source": self.problem.source}

    def _state_text(self) -> str:
        return self.problem.prompt if self.problem is not None else ""

    def _invalid_outcome(self, parsed: Parsed) -> Outcome:
        # An invalid response that ends the episode also fails the problem: -1 on top of the penalty, so the
        # return stays "+1 solved, -1 not" plus penalties, under every policy. The attempts are part of the
        # task, so running out of them terminates rather than truncates.
        outcome = super()._invalid_outcome(parsed)
        if outcome.terminated or self.turn >= self.max_turns:
            outcome.reward += WRONG_REWARD
            outcome.terminated = True
        outcome.info.update(answer="", correct=False)
        return outcome


def _resolve_dataset(dataset: MathDataset | None) -> list[MathProblem] | None:
    """The problems of ``dataset``, each checked; errors name the argument and what it may be."""
    if dataset is None:
        return None
    if isinstance(dataset, str | PathLike):
        if not Path(dataset).is_file():
            raise FileNotFoundError(
                f"dataset: no file at {str(dataset)!r}; give a .parquet, .jsonl or .json file"
            )
        problems = load_problems(dataset)
    elif callable(dataset):
        problems = dataset()
    else:
        problems = dataset
    if isinstance(problems, str | bytes) or not isinstance(problems, Sequence):
        raise TypeError(
            "dataset must be None, a .parquet/.jsonl/.json path, a list of MathProblem or a callable "
            f"returning one; got {type(problems).__name__}"
        )
    problems = list(problems)
    if not problems:
        raise ValueError("dataset is empty; give at least one MathProblem")
    for index, problem in enumerate(problems):
        if not isinstance(problem, MathProblem):
            raise TypeError(
                f"dataset[{index}] is a {type(problem).__name__}; a math dataset holds MathProblem records "
                "(see envs.math_data)"
            )
        if not isinstance(problem.prompt, str) or not 0 < len(problem.prompt) <= MAX_PROMPT_CHARS:
            raise ValueError(
                f"dataset[{index}].prompt must be a string of 1 to {MAX_PROMPT_CHARS} characters"
            )
        if not isinstance(problem.answer, str) or not problem.answer.strip():
            raise ValueError(f"dataset[{index}].answer must be a non-empty string, got {problem.answer!r}")
    return problems
