"""Arms of a comparison, trained and tested against each other: ``python -m experiments.compare``.

By default the arms are the replay modes: on-policy vs standard PER vs FreshPER (and its polynomial
variant), picked with ``--modes``, which also takes ``freshper+backfill`` (FreshPER with replay as backfill),
each tested against FreshPER. ``--arms KEY=V1,V2[,...]`` compares the values of any DAPOConfig or run key
instead (the keys ``--set`` takes, each value read as ``--set`` reads it), each tested against the first:

    python -m experiments.compare --envs freshrl/Sokoban-v0 --arms advantage_estimator=episode,gigpo --seeds 3

For every (seed, env, arm) it builds DAPO with ``experiments.common.run_config.build_config`` (the env's
settings file, or ``--settings FILE`` whose env is then the one compared, then the options of
``experiments.sweep``: ``--model``, by default the tiny model warm-started
on the env; ``--algorithm``, ``--scale``, ``--set key=value`` and the workload options; then the arm's keys;
without ``--settings``, 3 iterations evaluated every iteration on 16 tasks unless the options say
otherwise), measures validation
success before training (``DAPO.evaluate_policy``) and inside training every ``--eval-every`` iterations
(RLlib's ``evaluation_interval``; the last iteration always), then stops the algorithm. Validation success is
the mean success of ``--eval-samples`` episode(s) on each of the first ``--eval-tasks`` tasks of the
validation split (``envs/seeds.py``), sampled with the training settings; the same tasks for every run. Each
run also records its wall time and the peak resident memory of this process while it ran
(``experiments/common/peak_memory.py``; Ray actors are other processes and not counted).

The runs are sequential, in this process: each builds its algorithm, trains, evaluates and stops, while Ray
(started once) and the imported torch / vLLM stay up. Tune trials would each start a fresh worker process
(imports and engine start again) for no gain on a machine that runs one trial at a time; the sweep
(``experiments.sweep``) is where Tune pays off.

Output, in ``--output`` (default ``results/compare-<time>``):
  ``runs/<env>__<arm>__seed<k>.json``  one finished run (curve, per-iteration training metrics, settings,
      wall time, peak memory); ``<arm>`` is the replay mode, or ``KEY-VALUE`` for ``--arms``
      (``FrozenLake-v0__lora_rank-16__seed0.json``). Written when the run ends, and skipped when the command
      is rerun with the same ``--output``, so an interrupted comparison resumes where it stopped (a run saved
      with other settings is an error);
  ``comparison.md``  FreshPER's Table 1 layout: rows = tasks, columns = arms, cell = peak validation success
      (the maximum over the evaluations after training started) as mean +- 95% t interval over seeds (and the
      standard deviation); the final success the same way; the reference arm (FreshPER for replay modes, else
      the first arm) tested against each other arm over seeds (the paired t-test by seed where both ran the
      same seeds, else Welch's; ``experiments/common/significance.py``), Holm-adjusted over the table, with
      the smallest difference the run could detect; the replay metrics (importance weights, success share,
      ages, decay of the oldest item, dual-clip fraction) where some arm replays; the cost per arm (wall
      minutes and peak memory per run); for replay modes, the paper's Table 1 beside it for reference.
      Rewritten after every run, so an interrupted comparison always has the report of its finished runs,
      headed by what is missing;
      ``--report-only`` writes it from the finished runs without training anything;
  ``curves-<env>.png``  validation success over iterations, mean per arm with the range over seeds;
  ``results.json``  its provenance (``experiments/common/results_json.py``), every run's raw numbers and the
      aggregates.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from experiments.common.comparison_options import parse_args
from experiments.common.comparison_report import write_report
from experiments.common.comparison_runs import PROG, load_comparison, train_missing
from experiments.common.results_json import provenance


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from experiments.common.quiet_logs import LOG_FILE_NAME, install

    args = parse_args(argv)
    arguments = list(sys.argv[1:] if argv is None else argv)
    # The report names the command that trains its runs; one written with --report-only says so.
    record = provenance(PROG, [argument for argument in arguments if argument != "--report-only"])
    record["report_only"] = args.report_only
    output = Path(args.output or f"results/compare-{time.strftime('%Y%m%d-%H%M%S')}")
    log_file = None if args.report_only else install(output / LOG_FILE_NAME)
    comparison = load_comparison(args, output)
    report = None
    if not args.report_only:
        for _ in train_missing(comparison, log_file):  # a run saved: the report of the finished runs
            report = write_report(args, output, comparison.jobs, comparison.finished, record)
    text, table = report or write_report(args, output, comparison.jobs, comparison.finished, record)
    print(text)
    print(f"wrote {output / 'comparison.md'}, {output / 'results.json'} and the plots")
    return {"output": output, "ran": comparison.ran, "skipped": comparison.skipped, "aggregate": table}


if __name__ == "__main__":
    main()
