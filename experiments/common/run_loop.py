"""The run loop of the entry points that train in this process (``experiments.train``,
``experiments.compare``, ``experiments.evaluate --train``): evaluate the starting policy, train the run's
iterations under a progress bar, with RLlib evaluating inside training every ``evaluation_interval``
iterations, then evaluate once more where that interval skipped the last iteration, so that a run's final
evaluation is always its trained policy's. Each iteration's result becomes one flat row of metrics
(``experiments.common.training_metrics.flatten``) and the iterations that trained nothing (no informative
group) are counted. What the entry points do differently (their console lines, the files they write as they
go, what they collect) are the callbacks of :func:`train_iterations`.

``experiments.sweep`` trains under Tune instead: Tune calls ``algo.train()`` in each trial's process, stops
the trial, writes its rows (``progress.csv``) and shows the progress, so a trial shares what reads a result:
:func:`rllib_evaluation` and :func:`mostly_untrained`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from experiments.common.training_metrics import MOSTLY_UNTRAINED_SHARE, flatten, trained_nothing

if TYPE_CHECKING:
    from ray.rllib.algorithms import Algorithm
    from tqdm import tqdm


@dataclass
class TrainedRun:
    """What :func:`train_iterations` measured (so far, in its callbacks).

    ``evaluations``: the iteration of this run it followed (0: before training) -> the evaluation
    (``DAPO.evaluate_policy``'s record): the one before training, each one RLlib ran inside training, and the
    final one where the interval skipped the last iteration. ``rows``: the flat metrics of each iteration.
    ``untrained``: how many of those iterations trained nothing."""

    evaluations: dict[int, dict[str, Any]] = field(default_factory=dict)
    rows: list[dict[str, float]] = field(default_factory=list)
    untrained: int = 0


def train_iterations(
    algo: Algorithm,
    iterations: int,
    progress: str | tqdm,
    *,
    evaluate: Callable[[int], dict[str, Any]] | None = None,
    evaluation_in_rows: bool = False,
    on_evaluation: Callable[[int, dict[str, Any], tqdm | None], None] | None = None,
    before_iteration: Callable[[int, tqdm], None] | None = None,
    after_iteration: Callable[[int, TrainedRun, tqdm], None] | None = None,
) -> TrainedRun:
    """Evaluates ``algo``'s policy, trains it ``iterations`` times (``algo.train()``: RLlib evaluates inside
    training every ``evaluation_interval`` iterations), and evaluates it after the last iteration unless RLlib
    just did.

    ``progress``: the description of the run's own progress bar over its iterations
    (:class:`models.progress.Progress`, opened after the first evaluation), or a bar the caller already
    shows, left as it is (``experiments.evaluate``'s bar over envs). ``evaluate(iteration)``: the evaluation
    before training (iteration 0) and the final one (default ``algo.evaluate_policy()``; those inside
    training are RLlib's, with the config's evaluation settings). ``evaluation_in_rows``: the rows keep
    RLlib's evaluation under ``evaluation/`` where it evaluated (``experiments.train``'s metrics.csv), else
    they hold the training metrics only. The config in a result is never in a row.

    Callbacks, each with the bar to write to: ``on_evaluation(iteration, metrics, bar)`` after the
    evaluation before training (``bar`` None where the run opens its own bar, not yet open then) and each
    one inside training, not after the final one (the caller reports it); ``before_iteration(iteration,
    bar)`` and ``after_iteration(iteration, run, bar)`` around each iteration (``run``: what was measured so
    far, its last row this iteration's)."""
    from models.progress import Progress

    excluded = ("config",) if evaluation_in_rows else ("config", "evaluation")
    run = TrainedRun()

    def step(iteration: int, bar: tqdm) -> None:
        if before_iteration is not None:
            before_iteration(iteration, bar)
        result = algo.train()
        evaluation = rllib_evaluation(result)
        if evaluation is not None:
            run.evaluations[iteration] = evaluation
            if on_evaluation is not None:
                on_evaluation(iteration, evaluation, bar)
        row = flatten({key: value for key, value in result.items() if key not in excluded})
        run.rows.append(row)
        run.untrained += trained_nothing(row)
        if after_iteration is not None:
            after_iteration(iteration, run, bar)

    run.evaluations[0] = algo.evaluate_policy() if evaluate is None else evaluate(0)
    if on_evaluation is not None:
        on_evaluation(0, run.evaluations[0], None if isinstance(progress, str) else progress)
    if isinstance(progress, str):
        with Progress(range(1, iterations + 1), desc=progress, unit="it") as bar:
            for iteration in bar:
                step(iteration, bar)
    else:
        for iteration in range(1, iterations + 1):
            step(iteration, progress)
    if iterations not in run.evaluations:  # the last iteration is off the evaluation interval
        run.evaluations[iterations] = algo.evaluate_policy() if evaluate is None else evaluate(iterations)
    return run


def rllib_evaluation(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of the evaluation RLlib ran inside the training iteration of ``result`` (one every
    ``evaluation_interval`` iterations, ``DAPO.evaluate_policy`` with the config's evaluation settings); None
    where it ran none."""
    evaluation = result.get("evaluation")
    return None if evaluation is None else dict(evaluation)


def mostly_untrained(untrained: int, iterations: int) -> bool:
    """Whether more than :data:`MOSTLY_UNTRAINED_SHARE` of a run's ``iterations`` trained nothing: then its
    results measure the starting model, which every report warns of."""
    return untrained > MOSTLY_UNTRAINED_SHARE * iterations
