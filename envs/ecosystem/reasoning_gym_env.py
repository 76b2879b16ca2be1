"""reasoning-gym datasets as single-answer text envs (reasoning-gym 0.1.25, the ``ecosystem`` extra)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from envs.base import DEFAULT_INVALID_PENALTY, MultiTurnEnv, Outcome, Parsed, check_bool, draw_in_split
from envs.gridworld import last_answer
from envs.seeds import split_of_reset_seed

# An answer longer than this is not scored: some scorers parse with sympy or regexes that slow down on long
# input, and no exposed dataset's reference answer comes near it.
MAX_ANSWER_CHARS = 2_000


def _exact_text(answer: str, item: dict[str, Any]) -> float:
    """1.0 when ``answer`` is the reference answer (case and surrounding space ignored), else 0.0."""
    return float(answer.strip().lower() == str(item["answer"]).strip().lower())


# Scorers that replace a dataset's own. game_of_life_halting's ``score_answer`` compares ``bool(answer)`` with
# ``bool(reference)``: any non-empty answer, "False" included, scores 1.0.
CORRECTED_SCORERS: dict[str, Callable[[str, dict[str, Any]], float]] = {
    "game_of_life_halting": _exact_text,
}


def _load_dataset(name: str, seed: int, config: dict[str, Any]):
    import reasoning_gym  # the optional extra; imported only when an env is made

    return reasoning_gym.create_dataset(name, seed=seed, size=1, **config)


class ReasoningGymEnv(MultiTurnEnv):
    """A reasoning-gym dataset as a text env: answer the question inside ``<answer>...</answer>``.

    ## Description
    Each task is the single item of ``reasoning_gym.create_dataset(dataset, seed=s, size=1)`` for a seed ``s``
    drawn from the env's own generator. reasoning-gym builds item ``i`` from ``Random(seed + i)``, so datasets
    of neighbouring seeds share all but one item; one item per dataset and seed avoids that overlap.

    ## Action Space
    A string; the content of its last complete ``<answer>...</answer>`` pair is the answer (at most 2,000
    characters). No answer tag, an empty answer, or an answer the dataset's scorer cannot score (it raised:
    prime_factorization on a non-numeric factor) goes to the ``invalid_output`` policy, with the reason.

    ## Observation Space
    Text: the question and the answer format; after an answer, "Correct." or "Incorrect.".

    ## Starting State
    Split by content: a seed's split (:mod:`envs.seeds`) only yields questions whose text hashes to that
    split, so a question asked in validation or test is never a training question, whatever seed built it.

    ## Rewards
    Binary by default: 1.0 when the dataset scores the answer 1.0 (``success``), else 0.0. The dataset's own
    score, partial credit included (16 datasets give some for a wrong answer, e.g. prime_factorization 0.5 for
    the right product in another form and 0.01 for any answer), is ``info["score"]``; with
    ``partial_credit=True`` it is the reward instead (success still means a score of 1.0). Corrected
    scorers: game_of_life_halting scores any non-empty answer 1.0, so here an answer must equal the reference
    ("True" or "False"). An unusable response earns ``invalid_penalty``.

    ## Episode End
    Single-turn, as reasoning-gym: the first scored answer, right or wrong, terminates the episode (so does
    an unusable response under ``invalid_output="terminate"``). Under the other policies an unusable response
    is answered with the reason and the question again, and the episode is truncated after ``max_turns``
    responses (default 2: one more chance after a format error).

    ## Arguments
    ``dataset``: a reasoning-gym dataset name; ``dataset_config``: its config keywords (e.g. difficulty);
    ``max_turns``; ``partial_credit``; ``invalid_output``; ``invalid_penalty``.

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        dataset: str,
        dataset_config: dict[str, Any] | None = None,
        max_turns: int = 2,
        partial_credit: bool = False,
        invalid_output: str = "reprompt",
        invalid_penalty: float = DEFAULT_INVALID_PENALTY,
        render_mode: str | None = None,
    ):
        if not isinstance(dataset, str):
            raise ValueError(f"dataset must be a reasoning-gym dataset name, got {dataset!r}")
        from reasoning_gym.factory import DATASETS

        if dataset not in DATASETS:
            raise ValueError(f"unknown reasoning-gym dataset {dataset!r}; choose from {sorted(DATASETS)}")
        if dataset_config is not None and not isinstance(dataset_config, dict):
            raise ValueError(f"dataset_config must be a dict of config keywords, got {dataset_config!r}")
        self.dataset = dataset
        self.dataset_config = dict(dataset_config or {})
        self.partial_credit = check_bool("partial_credit", partial_credit)
        super().__init__(
            max_turns=max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        self._split = "train"
        self.item: dict[str, Any] = {}
        self._data = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._split = split_of_reset_seed(seed)
        return super().reset(seed=seed, options=options)

    def _draw(self):
        data = _load_dataset(self.dataset, int(self.np_random.integers(2**31)), self.dataset_config)
        return data, data[0]

    def _new_task(self) -> str:
        self._data, self.item = draw_in_split(
            self._draw,
            lambda task: task[1]["question"],
            self._split,
            settings=f"reasoning-gym {self.dataset} {self.dataset_config}",
        )
        return f"{self._state_text()}\n{self.format_reminder()}"

    def format_reminder(self) -> str:
        return "Give your final answer inside <answer></answer>, e.g. <answer>42</answer>."

    def _parse(self, response: str) -> Parsed:
        answer = last_answer(response)
        if answer is None:
            return Parsed(format_ok=False, valid=False, error="no <answer>...</answer> found")
        answer = answer.strip()
        if not answer:
            return Parsed(format_ok=True, valid=False, error="empty answer")
        if len(answer) > MAX_ANSWER_CHARS:
            return Parsed(
                format_ok=True, valid=False, error=f"answer longer than {MAX_ANSWER_CHARS} characters"
            )
        try:
            score = self.score(answer)
        except Exception as exc:  # the library's scorer crashed on this answer: not a model error to raise
            return Parsed(
                format_ok=True, valid=False, error=f"the answer could not be scored ({type(exc).__name__})"
            )
        return Parsed(format_ok=True, valid=True, action=score)

    def score(self, answer: str) -> float:
        """The dataset's score of ``answer`` for the current item, in [0, 1] (corrected where it is wrong)."""
        scorer = CORRECTED_SCORERS.get(self.dataset)
        score = scorer(answer, self.item) if scorer else self._data.score_answer(answer, self.item)
        score = float(score)
        return min(max(score, 0.0), 1.0) if math.isfinite(score) else 0.0

    def _apply(self, score: float) -> Outcome:
        success = score >= 1.0
        reward = score if self.partial_credit else float(success)
        text = "Correct." if success else "Incorrect."
        return Outcome(
            reward=reward, observation=text, terminated=True, success=success, info={"score": score}
        )

    def _state_text(self) -> str:
        return self.item["question"]

    def _task_info(self) -> dict[str, Any]:
        return {"dataset": self.dataset}

    def oracle_responses(self) -> list[str]:
        """The stored reference answer; [] once the episode has ended."""
        return [] if self._done else [f"<answer>{self.item['answer']}</answer>"]
