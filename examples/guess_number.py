"""A text env in 30 lines: guess a secret number from 1 to 100, told "Higher." or "Lower." after a guess."""

import re

import gymnasium as gym

from envs.base import MultiTurnEnv, Outcome, Parsed


class GuessNumberEnv(MultiTurnEnv):
    """Reward +1 for the right guess (the episode ends), 0 otherwise; at most ``max_turns`` guesses."""

    def __init__(self, max_turns: int = 7, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)

    def _new_task(self) -> str:
        self.secret = int(self.np_random.integers(1, 101))  # the env's own RNG: reset(seed=s) fixes the task
        return f"Guess my number from 1 to 100. {self.format_reminder()}"

    def format_reminder(self) -> str:
        return "Answer like <answer>50</answer>."

    def _parse(self, response: str) -> Parsed:  # must never raise
        found = re.findall(r"<answer>\s*(\d{1,3})\s*</answer>", response)
        if not found:
            return Parsed(format_ok=False, valid=False, error="no <answer>N</answer> found")
        guess = int(found[-1])
        return Parsed(format_ok=True, valid=1 <= guess <= 100, action=guess, error="not in 1..100")

    def _apply(self, guess: int) -> Outcome:
        if guess == self.secret:
            return Outcome(reward=1.0, observation="Correct!", terminated=True, success=True)
        return Outcome(reward=0.0, observation="Higher." if guess < self.secret else "Lower.")

    def _state_text(self) -> str:
        return "Guess my number from 1 to 100."


if "examples/GuessNumber-v0" not in gym.registry:
    gym.register(id="examples/GuessNumber-v0", entry_point=GuessNumberEnv)

if __name__ == "__main__":
    env = gym.make("examples/GuessNumber-v0")
    observation, info = env.reset(seed=0)
    low, high, done = 1, 100, False
    while not done:  # bisection always wins within 7 guesses
        guess = (low + high) // 2
        observation, reward, terminated, truncated, info = env.step(f"<answer>{guess}</answer>")
        print(guess, observation, reward)
        low, high = (guess + 1, high) if observation == "Higher." else (low, guess - 1)
        done = terminated or truncated
