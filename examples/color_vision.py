"""A vision env: name the colour of the square in the image."""

import re

import gymnasium as gym
import numpy as np

from envs.base import MultiTurnEnv, Outcome, Parsed, draw_in_split
from envs.seeds import split_of_reset_seed

COLORS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220), "yellow": (240, 210, 40)}


class ColorVisionEnv(MultiTurnEnv):
    """Reward +1 for the right colour (the episode ends), 0 otherwise. Observation: text and a 56x56 image
    of one square (its colour, size and place drawn per task)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 1}
    image_shape = (56, 56, 3)  # makes the observation Dict(text=..., image=Box(uint8))

    def __init__(self, max_turns: int = 2, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)

    def reset(self, *, seed=None, options=None):
        self._split = split_of_reset_seed(seed)  # "train", "validation" or "test": the seed's split
        return super().reset(seed=seed, options=options)

    def _new_task(self) -> str:
        # The env's own RNG fixes the task; draw again until the task hashes to the seed's split.
        self.color, self.size, self.top, self.left = draw_in_split(
            self._draw, lambda task: " ".join(map(str, task)), self._split, settings="ColorVision"
        )
        return f"What colour is the square in the image? {self.format_reminder()}"

    def _draw(self) -> tuple[str, int, int, int]:
        size = int(self.np_random.integers(8, 25))
        top, left = (int(x) for x in self.np_random.integers(0, 56 - size, size=2))
        return str(self.np_random.choice(list(COLORS))), size, top, left

    def format_reminder(self) -> str:
        return "Answer like <answer>red</answer> with red, green, blue or yellow."

    def _parse(self, response: str) -> Parsed:  # must never raise
        found = re.findall(r"<answer>\s*([a-zA-Z]+)\s*</answer>", response)
        if not found:
            return Parsed(format_ok=False, valid=False, error="no <answer>colour</answer> found")
        return Parsed(
            format_ok=True,
            valid=found[-1].lower() in COLORS,
            action=found[-1].lower(),
            error="not a colour from the list",
        )

    def _apply(self, color: str) -> Outcome:
        right = color == self.color
        return Outcome(
            reward=float(right),
            observation="Correct." if right else "Wrong, look again.",
            terminated=right,
            success=right,
        )

    def _state_text(self) -> str:
        return "Look at the image again."

    def _render_image(self) -> np.ndarray:  # called for every observation
        image = np.full(self.image_shape, 255, dtype=np.uint8)
        image[self.top : self.top + self.size, self.left : self.left + self.size] = COLORS[self.color]
        return image

    def oracle_responses(self) -> list[str]:
        """The oracle's answers from the current state: the right colour; [] once the episode has ended."""
        return [] if self._done else [f"<answer>{self.color}</answer>"]


if "examples/ColorVision-v0" not in gym.registry:
    gym.register(id="examples/ColorVision-v0", entry_point=ColorVisionEnv)

if __name__ == "__main__":
    env = gym.make("examples/ColorVision-v0")
    observation, info = env.reset(seed=0)
    print(observation["text"], observation["image"].shape)
    print(env.step(env.unwrapped.oracle_responses()[0])[1:3])
