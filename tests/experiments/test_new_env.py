"""A new env from outside freshrl, the way docs/adding_an_env.md says: a module of one's own registers it, and
``--env module:ns/Name-v0`` (Gymnasium's form) makes every process import that module. The env passes the
contract check, warm-starts for a few steps, trains one iteration from a settings file of its own, and runs
one sweep trial."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator

import pytest
import ray
import yaml

from algorithms.warm_start import warm_started_path
from envs.contract import check_env_contract
from experiments import sweep, train
from experiments.common.ray_session import start_ray
from models.tiny import BUILD_INFO_FILE

MODULE = "newcomer_parity"
ENV_ID = f"{MODULE}:newcomer/Parity-v0"
ENV_SOURCE = textwrap.dedent(
    '''
    """Say whether a number is even or odd."""

    import re

    import gymnasium as gym

    from envs.base import MultiTurnEnv, Outcome, Parsed, draw_in_split
    from envs.seeds import split_of_reset_seed


    class ParityEnv(MultiTurnEnv):
        def __init__(self, max_turns: int = 2, **kwargs):
            super().__init__(max_turns=max_turns, **kwargs)

        def reset(self, *, seed=None, options=None):
            self._split = split_of_reset_seed(seed)
            return super().reset(seed=seed, options=options)

        def _new_task(self) -> str:
            draw = lambda: int(self.np_random.integers(0, 10**6))  # noqa: E731
            self.number = draw_in_split(draw, str, self._split, settings="Parity")
            return f"Is {self.number} even or odd? {self.format_reminder()}"

        def format_reminder(self) -> str:
            return "Answer like <answer>even</answer>."

        def _parse(self, response: str) -> Parsed:
            found = re.findall(r"<answer>\\s*(even|odd)\\s*</answer>", response.lower())
            if not found:
                return Parsed(format_ok=False, valid=False, error="no <answer>even|odd</answer>")
            return Parsed(format_ok=True, valid=True, action=found[-1])

        def _apply(self, answer: str) -> Outcome:
            right = answer == self._truth()
            return Outcome(float(right), "Correct." if right else "Wrong.", terminated=True, success=right)

        def _state_text(self) -> str:
            return f"Is {self.number} even or odd?"

        def _truth(self) -> str:
            return "even" if self.number % 2 == 0 else "odd"

        def oracle_responses(self) -> list[str]:
            return [] if self._done else [f"<answer>{self._truth()}</answer>"]


    if "newcomer/Parity-v0" not in gym.registry:
        gym.register(id="newcomer/Parity-v0", entry_point=ParityEnv)
    '''
)
# The tiny workload of tests/experiments (2 tasks x 2 samples, 12-token turns, one generation batch).
TINY_TRAINING = {
    "prompts_per_iteration": 2,
    "group_size": 2,
    "max_response_tokens": 12,
    "overlong_cache_len": 4,
    "max_generation_batches": 1,
    "minibatch_size": 4,
    "engine_kv_cache_gib": 0.5,
}


@pytest.fixture
def user_module(tmp_path, monkeypatch) -> Iterator[None]:
    """The env's module in a directory of the user's, importable here, in subprocesses and in Ray workers
    (which inherit PYTHONPATH from the Ray started after it is set; shut down after the test, so the next
    test that asks for Ray gets the run's own)."""
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(ENV_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    )
    ray.shutdown()
    start_ray(num_cpus=2)
    yield
    ray.shutdown()


def strict_json(path) -> dict:
    def reject(constant):
        raise ValueError(f"{path} is not valid JSON: {constant}")

    return json.loads(path.read_text(), parse_constant=reject)


def test_a_new_env_checks_warm_starts_trains_and_sweeps(user_module, tmp_path):
    report = check_env_contract(ENV_ID, split_tasks=200)
    # The parity env reports no state keys: the check says they are optional.
    assert report.pop("state_key").startswith("ok (no info['state_key']")
    assert set(report.values()) == {"ok"}

    settings = tmp_path / "parity.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "env": ENV_ID,
                "env_config": {"max_turns": 2},
                "iterations": 1,
                "warm_start_steps": 3,
                "overrides": {**TINY_TRAINING, "replay_mode": "per", "evaluation_num_tasks": 2},
            }
        )
    )
    summary = train.main(["--settings", str(settings), "--output", str(tmp_path / "run")])
    saved = strict_json(tmp_path / "run" / "summary.json")
    assert saved["env"] == ENV_ID and saved["iterations"] == 1 and saved["before"]["num_episodes"] == 2
    assert saved["iterations_without_training"] in (0, 1) and isinstance(saved["mostly_untrained"], bool)
    assert summary["checkpoint"] and (tmp_path / "run" / "curves.png").exists()
    warm = warm_started_path(ENV_ID, steps=3)  # cached by the run: returns at once
    assert saved["model"] == str(warm)
    assert json.loads((warm / BUILD_INFO_FILE).read_text())["steps"] == 3

    argv = ["--env", ENV_ID, "--warm-start-steps", "3", "--iterations", "1", "--replay", "per"]
    argv += ["--tau", "50", "--eps-high", "0.28", "--eval-tasks", "2", "--group-size", "2"]
    argv += ["--prompts", "2", "--max-response-tokens", "12", "--max-generation-batches", "1"]
    argv += ["--kv-cache-gib", "0.5"]
    result = sweep.main([*argv, "--storage-path", str(tmp_path / "sweeps"), "--name", "parity"])
    (trial,) = result["trials"]
    assert trial["status"] == "ok" and trial["iterations"] == 1
    saved = strict_json(tmp_path / "sweeps" / "parity" / "summary.json")
    assert saved["trials"][0]["trial"] == trial["trial"]
