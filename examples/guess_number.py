"""A text env: guess a secret number in a range, told "Higher." or "Lower." after each guess."""

import re

import gymnasium as gym

from envs.base import MultiTurnEnv, Outcome, Parsed, draw_in_split
from envs.seeds import split_of_reset_seed


class GuessNumberEnv(MultiTurnEnv):
    """Reward +1 for the right guess (the episode ends), 0 otherwise; at most ``max_turns`` guesses.

    A task is a range of 20 to 100 numbers, shown in the prompt, and a secret in it. Bisection always wins
    within the default 7 guesses, and ``oracle_responses()`` plays it (the warm start learns from it).
    """

    def __init__(self, max_turns: int = 7, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)

    def reset(self, *, seed=None, options=None):
        self._split = split_of_reset_seed(seed)  # "train", "validation" or "test": the seed's split
        return super().reset(seed=seed, options=options)

    def _new_task(self) -> str:
        # Draw from the env's own RNG, so reset(seed=s) fixes the task; draw again until the task's text
        # hashes to the seed's split, so no validation or test task is ever a training task.
        self.low, self.high, self.secret = draw_in_split(
            self._draw, lambda task: f"{task[0]}-{task[1]}", self._split, settings="GuessNumber"
        )
        self.lo, self.hi = self.low, self.high  # what the feedback so far leaves possible
        return f"{self._state_text()} {self.format_reminder()}"

    def _draw(self) -> tuple[int, int, int]:
        low = int(self.np_random.integers(1, 900))
        high = low + int(self.np_random.integers(19, 100))
        return low, high, int(self.np_random.integers(low, high + 1))

    def format_reminder(self) -> str:
        return f"Answer like <answer>{(self.low + self.high) // 2}</answer>."

    def _parse(self, response: str) -> Parsed:  # must never raise
        found = re.findall(r"<answer>\s*(\d{1,4})\s*</answer>", response)
        if not found:
            return Parsed(format_ok=False, valid=False, error="no <answer>N</answer> found")
        guess = int(found[-1])
        in_range = self.low <= guess <= self.high
        return Parsed(format_ok=True, valid=in_range, action=guess, error=f"not in {self.low}..{self.high}")

    def _apply(self, guess: int) -> Outcome:
        if guess == self.secret:
            return Outcome(reward=1.0, observation="Correct!", terminated=True, success=True)
        if guess < self.secret:
            self.lo = max(self.lo, guess + 1)
            return Outcome(reward=0.0, observation="Higher.")
        self.hi = min(self.hi, guess - 1)
        return Outcome(reward=0.0, observation="Lower.")

    def _state_text(self) -> str:
        return f"Guess my number from {self.low} to {self.high}."

    def oracle_responses(self) -> list[str]:
        """The oracle's answers from the current state (the warm start's demonstrations): the bisection
        guess; [] once the episode has ended. Asked again after every step; only the first is used."""
        return [] if self._done else [f"<answer>{(self.lo + self.hi) // 2}</answer>"]


if "examples/GuessNumber-v0" not in gym.registry:
    gym.register(id="examples/GuessNumber-v0", entry_point=GuessNumberEnv)

if __name__ == "__main__":
    env = gym.make("examples/GuessNumber-v0")
    observation, info = env.reset(seed=0)
    print(observation)
    done = False
    while not done:  # the oracle bisects
        response = env.unwrapped.oracle_responses()[0]
        observation, reward, terminated, truncated, info = env.step(response)
        print(response, observation, reward)
        done = terminated or truncated
