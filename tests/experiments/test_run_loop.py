"""The one run loop of experiments.train, experiments.compare and experiments.evaluate --train
(``experiments/common/run_loop.py``), on a fake algorithm: evaluations before, inside and after training, the
rows, the count of iterations that trained nothing, and its callbacks in order."""

from __future__ import annotations

from experiments.common.run_loop import mostly_untrained, rllib_evaluation, train_iterations

TRAINED = {"rollout/groups_kept": 2.0, "rollout/groups_from_surplus": 0.0}
NOTHING = {"rollout/groups_kept": 0.0, "rollout/groups_from_surplus": 0.0}


class FakeAlgorithm:
    """``train()`` returns RLlib-like results, evaluated every ``interval`` iterations; ``evaluate_policy``
    counts its calls."""

    def __init__(self, interval: int, untrained: tuple[int, ...] = ()) -> None:
        self.interval, self.untrained, self.iteration, self.evaluated = interval, untrained, 0, 0

    def train(self) -> dict:
        self.iteration += 1
        result = {
            "training_iteration": self.iteration,
            "rollout": dict(NOTHING if self.iteration in self.untrained else TRAINED),
            "config": {"lr": 1e-5},
        }
        if self.iteration % self.interval == 0:
            result["evaluation"] = {"success": self.iteration / 10}
        return result

    def evaluate_policy(self) -> dict:
        self.evaluated += 1
        return {"success": -1.0 * self.evaluated}


def test_evaluations_before_inside_and_after_training_and_the_rows():
    algo = FakeAlgorithm(interval=2, untrained=(1,))
    run = train_iterations(algo, 3, "test")
    # Before training, RLlib's after iteration 2, and the last iteration's off the interval.
    assert run.evaluations == {0: {"success": -1.0}, 2: {"success": 0.2}, 3: {"success": -2.0}}
    assert [row["training_iteration"] for row in run.rows] == [1.0, 2.0, 3.0]
    assert all(not key.startswith(("config", "evaluation")) for row in run.rows for key in row)
    assert run.untrained == 1


def test_no_final_evaluation_where_rllib_evaluated_the_last_iteration():
    algo = FakeAlgorithm(interval=2)
    run = train_iterations(algo, 2, "test", evaluation_in_rows=True)
    assert algo.evaluated == 1 and sorted(run.evaluations) == [0, 2]
    assert run.rows[1]["evaluation/success"] == 0.2 and "evaluation/success" not in run.rows[0]


def test_callbacks_in_order_with_the_bar_they_write_to():
    class Bar:
        pass

    calls = []
    outer = Bar()
    run = train_iterations(
        FakeAlgorithm(interval=2),
        2,
        outer,
        evaluate=lambda iteration: {"success": 0.5, "at": iteration},
        on_evaluation=lambda iteration, metrics, bar: calls.append(("evaluation", iteration, bar)),
        before_iteration=lambda iteration, bar: calls.append(("before", iteration, bar)),
        after_iteration=lambda iteration, run, bar: calls.append(("after", iteration, len(run.rows), bar)),
    )
    assert calls == [
        ("evaluation", 0, outer),
        ("before", 1, outer),
        ("after", 1, 1, outer),
        ("before", 2, outer),
        ("evaluation", 2, outer),
        ("after", 2, 2, outer),
    ]
    assert run.evaluations[0] == {"success": 0.5, "at": 0}


def test_an_own_bar_is_not_open_at_the_first_evaluation():
    bars = []
    train_iterations(
        FakeAlgorithm(interval=1), 1, "test", on_evaluation=lambda iteration, metrics, bar: bars.append(bar)
    )
    assert bars[0] is None and hasattr(bars[1], "write")


def test_reading_a_result_and_the_untrained_share():
    evaluation = {"success": 0.5}
    copied = rllib_evaluation({"evaluation": evaluation})
    assert copied == evaluation and copied is not evaluation
    assert rllib_evaluation({"training_iteration": 1}) is None
    assert mostly_untrained(3, 5) and not mostly_untrained(2, 4)


def test_no_iterations_is_the_evaluation_before_training():
    algo = FakeAlgorithm(interval=1)
    run = train_iterations(algo, 0, "test")
    assert run.evaluations == {0: {"success": -1.0}} and run.rows == [] and algo.evaluated == 1
