"""The "adding an env" examples: they run, keep the env contract (envs.contract, check_env included), and
docs/adding_an_env.md shows them verbatim."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from envs.contract import contract_test

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {"guess_number": "examples/GuessNumber-v0", "color_vision": "examples/ColorVision-v0"}

# The documented form of an env id for a module of one's own: Gymnasium imports "module" first.
test_examples_keep_the_contract = contract_test(
    "examples.guess_number:examples/GuessNumber-v0", "examples.color_vision:examples/ColorVision-v0"
)


def load(name: str):
    """The example module, imported as the ``module:id`` form of its env id does (registering the id)."""
    return importlib.import_module(f"examples.{name}")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_as_a_script(name):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{name}.py")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def test_guess_number_plays_by_the_rules():
    module = load("guess_number")
    env = gym.make("examples/GuessNumber-v0").unwrapped
    observation, _ = env.reset(seed=3)
    assert observation.startswith(f"Guess my number from {env.low} to {env.high}.")
    assert env.low <= env.secret <= env.high and 20 <= env.high - env.low + 1 <= 100
    secret = env.secret
    wrong = secret - 1 if secret > env.low else secret + 1
    obs, reward, terminated, _, info = env.step(f"<answer>{wrong}</answer>")
    assert obs in ("Higher.", "Lower.") and reward == 0.0 and not terminated and info["action_valid"]
    _, _, _, _, info = env.step(f"<answer>{env.high + 1}</answer>")
    assert info["format_ok"] and not info["action_valid"]
    _, _, _, _, info = env.step("fifty")
    assert not info["format_ok"]
    _, reward, terminated, _, info = env.step(f"<answer>{secret}</answer>")
    assert reward == 1.0 and terminated and info["success"]
    assert isinstance(env, module.GuessNumberEnv)


def test_color_vision_observes_an_image():
    module = load("color_vision")
    env = gym.make("examples/ColorVision-v0").unwrapped
    obs, _ = env.reset(seed=0)
    assert obs["image"].shape == (56, 56, 3) and obs["image"].dtype == np.uint8
    centre = (env.top + env.size // 2, env.left + env.size // 2)
    assert tuple(obs["image"][centre]) == module.COLORS[env.color]
    _, reward, terminated, _, _ = env.step(f"<answer>{env.color}</answer>")
    assert reward == 1.0 and terminated


def test_docs_show_the_examples_verbatim():
    doc = (ROOT / "docs" / "adding_an_env.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.DOTALL)
    for name in EXAMPLES:
        assert (ROOT / "examples" / f"{name}.py").read_text() in blocks
