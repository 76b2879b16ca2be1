"""Under PBT a finished trial's checkpoint can still be needed: a trial that exploited it (PBT's clone)
restores that checkpoint when it next starts, and where the resources do not fit the whole population at once
that can come after the trial it copied ran on to its last iteration and finished.
:class:`KeepCheckpointsToRestore` wraps the sweep's :class:`DropFinishedCheckpoints` (which deletes a trial's
checkpoints as it finishes): it lets it run only while no unfinished trial's latest checkpoint, the one Tune
restores it from, lies in a finished trial's folder. The deletion it holds back happens at a later trial's
completion, the last one's at the latest.
"""

from __future__ import annotations

from pathlib import Path

from ray import tune

from experiments.common.sweep_checkpoints import DropFinishedCheckpoints

DONE_STATUSES = ("TERMINATED", "ERROR")  # Tune's statuses of trials that will not run again


class KeepCheckpointsToRestore(tune.Callback):
    """``drop`` at a trial's completion, unless an unfinished trial has yet to restore a finished one's
    checkpoint."""

    def __init__(self, drop: DropFinishedCheckpoints) -> None:
        self.drop = drop

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        # The trial completing is still RUNNING here (DropFinishedCheckpoints counts it finished too).
        finished = [Path(each.path) for each in trials if each is trial or each.status == "TERMINATED"]
        restoring = [
            Path(each.checkpoint.path)
            for each in trials
            if each is not trial and each.status not in DONE_STATUSES and each.checkpoint
        ]
        if any(path.is_relative_to(folder) for path in restoring for folder in finished):
            return
        self.drop.on_trial_complete(iteration, trials, trial, **info)
