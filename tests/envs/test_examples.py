"""The "adding an env" examples: they run, pass check_env, and docs/adding_an_env.md shows them verbatim."""

import functools
import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {"guess_number": "examples/GuessNumber-v0", "color_vision": "examples/ColorVision-v0"}


@functools.cache  # an example registers its env on first import; load each once
def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_as_a_script(name):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{name}.py")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_passes_check_env(name):
    load(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make(EXAMPLES[name]).unwrapped, skip_render_check=False)


def test_guess_number_plays_by_the_rules():
    module = load("guess_number")
    env = gym.make("examples/GuessNumber-v0").unwrapped
    env.reset(seed=3)
    secret = env.secret
    wrong = secret - 1 if secret > 1 else 2
    obs, reward, terminated, _, info = env.step(f"<answer>{wrong}</answer>")
    assert obs in ("Higher.", "Lower.") and reward == 0.0 and not terminated and info["action_valid"]
    _, _, _, _, info = env.step("<answer>101</answer>")
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
    assert tuple(obs["image"][28, 28]) == module.COLORS[env.color]
    _, reward, terminated, _, _ = env.step(f"<answer>{env.color}</answer>")
    assert reward == 1.0 and terminated


def test_docs_show_the_examples_verbatim():
    doc = (ROOT / "docs" / "adding_an_env.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.DOTALL)
    for name in EXAMPLES:
        assert (ROOT / "examples" / f"{name}.py").read_text() in blocks
