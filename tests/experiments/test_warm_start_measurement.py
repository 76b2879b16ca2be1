"""experiments.warm_start measures a model through the algorithm's evaluation: the weights
reach the learner and the EnvRunner's engine, and the result is ``DAPO.evaluate_policy``'s."""

from __future__ import annotations

import json

import pytest
import torch

from algorithms import warm_start as warm_start_module
from algorithms.dapo.evaluation import METRIC_KEYS
from algorithms.warm_start import load_model, tiny_base_path
from experiments import warm_start
from experiments.warm_start import calibration_path, evaluation_algo, line, measure

ENV = "freshrl/FrozenLake-v0"


def test_measure_loads_the_weights_and_reports_the_algorithms_evaluation():
    base = tiny_base_path(ENV)
    # Halved weights: a policy other than the one the algorithm was built with.
    state = {k: v * 0.5 if v.is_floating_point() else v for k, v in load_model(base).state_dict().items()}
    with evaluation_algo(ENV, base, tasks=2, samples=2, seed=0, model=None) as algo:
        engine = algo.env_runner.module.engine
        loaded: list[dict[str, torch.Tensor]] = []
        load_weights = engine.load_weights

        def spy(tensors):
            loaded.append(dict(tensors))
            return load_weights(tensors)

        engine.load_weights = spy
        result = measure(algo, state)

        learner = algo.learner_group.get_state(components="learner/rl_module")["learner"]["rl_module"]
        for name, tensor in learner["default_policy"].items():
            assert torch.equal(tensor, state[name]), name
        (pushed,) = loaded  # one weight sync, of exactly these weights
        assert pushed.keys() == state.keys()
        assert all(torch.equal(pushed[name], tensor) for name, tensor in state.items())

    assert set(METRIC_KEYS) <= set(result) and {"pass@1", "pass@2"} <= set(result)
    assert (result["num_tasks"], result["samples_per_task"], result["split"]) == (2, 2, "validation")
    assert line(result).startswith("success ") and "groups with mixed outcomes" in line(result)


def test_a_calibration_records_each_measurement_with_its_provenance(tmp_path, monkeypatch):
    """It fine-tunes with the base's recipe, as the run's warm start does: a pretrained base's 4
    demonstrations a step, not the tiny models' 8 (here a recipe of 3 at 2e-4 stands in for the base's)."""
    recipe = warm_start_module.WarmStartRecipe(lr=2e-4, batch_size=3, default_steps=60)
    monkeypatch.setattr(warm_start_module, "recipe_for", lambda base: recipe)
    tuned = []
    fine_tune = warm_start_module.fine_tune
    monkeypatch.setattr(
        warm_start_module, "fine_tune", lambda *a, **kw: tuned.append(kw) or fine_tune(*a, **kw)
    )
    setting = {"size": 4, "hole_prob": 0.2, "is_slippery": False, "max_turns": 2, "max_actions_per_turn": 3}
    measured = ["--calibrate", "2,1", "--seeds", "2", "--group-size", "1", "--output", str(tmp_path)]
    warm_start.main(["--env", ENV, *measured, "--env-config", json.dumps(setting)])
    assert [(kw["lr"], kw["batch_size"]) for kw in tuned] == [(2e-4, 3)]
    (path,) = tmp_path.glob("*.json")
    assert path == calibration_path(tmp_path, ENV, setting)
    record = json.loads(path.read_text())
    assert record["env"] == ENV and record["evaluation"]["env_config"] == setting
    assert (record["lr"], record["batch_size"]) == (2e-4, 3)
    assert record["provenance"]["command"].startswith("python -m experiments.warm_start --env")
    assert [point["steps"] for point in record["points"]] == [1, 2]
    assert all(point["num_tasks"] == 2 and 0 <= point["success"] <= 1 for point in record["points"])
    assert calibration_path(tmp_path, ENV, {**setting, "max_turns": 3}) != path  # settings never share a file


def test_output_without_calibrate_is_an_error_naming_the_fix(tmp_path):
    with pytest.raises(SystemExit):
        warm_start.main(["--env", ENV, "--output", str(tmp_path)])
