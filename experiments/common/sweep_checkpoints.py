"""Which trial checkpoints a sweep keeps: a trial's checkpoint is deleted when the trial finishes, except the
best finished trial's with ``--keep-checkpoints``; unfinished and errored trials keep theirs. And a trial that
could not write its checkpoint for a full disk ends the sweep.

An RLlib trial checkpoint holds the learner's weights and AdamW state (SmolLM2: about 2 GB), and a sweep
has many trials. Tune resumes an unfinished trial from its latest checkpoint but never reruns a finished
one (``Tuner.restore`` skips it), so a finished trial's checkpoint serves nothing but a later look at its
policy. :class:`DropFinishedCheckpoints` deletes it as the trial completes, in the driver, so a sweep holds
the checkpoints of its running trials only (plus the best one's with ``--keep-checkpoints``).

On a full disk every next trial would train an iteration and fail writing its checkpoint in turn:
:class:`StopWhenDiskFull` ends ``Tuner.fit()`` at the first such failure instead. Tune's saved state keeps
the trials not yet finished for ``--resume``, and ``experiments.sweep`` reports the finished ones.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
from pathlib import Path
from typing import Any

from ray import tune

from experiments.common.disk_space import disk_full

VALIDATION_METRIC = "evaluation/success"
CHECKPOINT_GLOB = "checkpoint_*"  # Tune's trial checkpoint folders: checkpoint_000002, ...


def best_row(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The finished trial with the highest peak validation success; on ties the one with the lowest trial id
    (Tune lists a restored experiment's trials in another order, so their order decides nothing)."""
    scored = [row for row in rows if row["status"] == "ok" and not math.isnan(row["peak_validation_success"])]
    if not scored:
        return None
    return min(scored, key=lambda row: (-row["peak_validation_success"], str(row["trial"])))


def trial_checkpoints(trial_dir: str | Path) -> list[Path]:
    return sorted(path for path in Path(trial_dir).glob(CHECKPOINT_GLOB) if path.is_dir())


def drop_checkpoints(trial_dir: str | Path) -> None:
    """Deletes a trial's checkpoint folders. One that cannot be deleted is named and left: a sweep of hours
    is not ended for it."""
    for path in trial_checkpoints(trial_dir):
        try:
            shutil.rmtree(path)
        except OSError as error:
            print(f"sweep: could not delete the checkpoint {path} ({error}); delete it by hand")


class DropFinishedCheckpoints(tune.Callback):
    """Deletes a trial's checkpoints when it completes; with ``keep_best``, keeps the best finished trial's
    (:func:`best_row`, the summary's best) and deletes the one it replaces."""

    def __init__(self, iterations: int, keep_best: bool = False) -> None:
        self.iterations = iterations
        self.keep_best = keep_best

    def on_trial_complete(self, iteration: int, trials: list, trial, **info) -> None:
        # The trial completing is still RUNNING here; the ones before it (this session's or restored) are
        # TERMINATED. An interrupted sweep's trials never get here: Tune saves them for --resume instead.
        finished = [each for each in trials if each is trial or each.status == "TERMINATED"]
        best = best_row([self._row(each) for each in finished]) if self.keep_best else None
        for each in finished:
            if best is None or each.trial_id != best["trial"]:
                drop_checkpoints(each.path)

    def _row(self, trial) -> dict[str, Any]:
        """What :func:`best_row` reads of a trial, from Tune's record of its results."""
        peak = trial.metric_analysis.get(VALIDATION_METRIC, {}).get("max", math.nan)
        trained = (trial.last_result or {}).get("training_iteration", 0)
        return {
            "trial": trial.trial_id,
            "status": "ok" if trained >= self.iterations else "unfinished",
            "peak_validation_success": float(peak),
        }


class StopWhenDiskFull(tune.Callback):
    """Ends the sweep (an ``OSError`` ENOSPC out of ``Tuner.fit()``) when a trial failed for a full disk."""

    def on_trial_error(self, iteration: int, trials: list, trial, **info) -> None:
        # The callback gets no exception: Tune has just written the trial's traceback to its error file.
        error_file = Path(trial.error_file) if trial.error_file else None
        if error_file and error_file.is_file() and disk_full(error_file.read_text()):
            raise OSError(errno.ENOSPC, f"trial {trial.trial_id}: {os.strerror(errno.ENOSPC)}")
