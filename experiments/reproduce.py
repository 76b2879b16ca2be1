"""Re-check the figures the docs state: ``python -m experiments.reproduce``.

Reads the claims registry (docs/results/claims.yaml, ``experiments/common/claims.py``), re-runs each claim's
command into a temporary folder (never over the committed record), streaming its output, and prints a verdict
per claim: ``reproduced``, ``differs: recorded X, today Y`` (exact for deterministic values, inside the
recorded 95% interval for stochastic ones, inside the recorded mean's t interval for means over seeds), or
``failed`` when the command fails. Every record also gets its state against the code
(experiments/common/record_staleness.py): ``current``, ``stale (N commits touched ...)`` when commits since
the one it records touched the files its command runs (its module and the project modules it imports) or its
listed inputs, ``recorded before provenance`` (no commit recorded), or ``missing``; and ``intervals
unclustered`` where an evaluation of k > 1 episodes per task kept no per-task outcomes. Exits 1 when a
re-run claim differs or fails.

    python -m experiments.reproduce                     # every claim (hours: --list gives each one's cost)
    python -m experiments.reproduce --quick             # the quick claims only (seconds; make test runs it)
    python -m experiments.reproduce --claims env-contract smollm2-zero-shot-frozenlake
    python -m experiments.reproduce --list              # each claim's state and cost, nothing run

Timings are never claims: the machines differ. docs/results/README.md explains results files and how to add
a claim.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from experiments.common.claims import (
    REGISTRY,
    Claim,
    ClaimsError,
    claim_state,
    cpu_dependent_lines,
    differences,
    load_claims,
    observed,
)
from experiments.common.import_graph import ImportGraph
from experiments.common.results_json import REPOSITORY

PROG = "python -m experiments.reproduce"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--list", action="store_true", help="list the claims, each with its state and cost; run nothing"
    )
    chosen.add_argument("--quick", action="store_true", help="run only the quick claims (seconds)")
    chosen.add_argument("--claims", nargs="+", metavar="NAME", help="run these claims (default: all)")
    parser.add_argument("--registry", default=str(REGISTRY), help="the claims registry (YAML)")
    args = parser.parse_args(argv)
    try:
        args.registered = load_claims(args.registry)
    except ClaimsError as error:
        parser.error(str(error))
    unknown = sorted(set(args.claims or ()) - set(args.registered))
    if unknown:
        parser.error(f"--claims: unknown claims {unknown}; registered: {', '.join(args.registered)}")
    return args


def recorded(claim: Claim) -> dict[str, Any] | None:
    """The claim's results file, or None when it is not there."""
    path = claim.results_path
    return json.loads(path.read_text()) if path.is_file() else None


def measure(claim: Claim) -> dict[str, Any]:
    """Runs the claim's command into a temporary folder, its output streamed, and returns the values it
    wrote. RuntimeError when the command fails or writes no such values."""
    with tempfile.TemporaryDirectory(prefix=f"reproduce-{claim.name}-") as folder:
        words = [word.replace("{output}", folder) for word in shlex.split(claim.command)]
        if words[0] == "python":  # this interpreter: the same environment as the one running the claims
            words[0] = sys.executable
        # This checkout's code first, in the command and in the processes it starts (Ray workers).
        path = os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))
        with subprocess.Popen(
            words,
            cwd=REPOSITORY,
            env={**os.environ, "PYTHONPATH": path},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        ) as process:
            for line in process.stdout:
                print(f"    | {line.rstrip()}", flush=True)
        if process.returncode != 0:
            raise RuntimeError(f"the command exited with status {process.returncode}")
        written = Path(folder) / claim.writes
        if not written.is_file():
            raise RuntimeError(f"the command wrote no {claim.writes}")
        try:
            return observed(claim, json.loads(written.read_text()), written=True)
        except KeyError as error:
            raise RuntimeError(f"{claim.writes} has no {error}") from None


def verdict(claim: Claim, results: dict[str, Any] | None) -> tuple[str, bool]:
    """Re-runs the claim: its one-line verdict and whether it reproduced."""
    if results is None:
        return f"no record to compare with: {claim.results} is missing", False
    try:
        before = observed(claim, results)
    except KeyError as error:
        return f"failed: {claim.results} has no {error}", False
    try:
        today = measure(claim)
    except RuntimeError as error:
        return f"failed: {error}", False
    lines = differences(claim, before, today)
    beside = "".join(f"; {line}" for line in cpu_dependent_lines(claim, before, today))
    return ("differs: " + "; ".join(lines) + beside, False) if lines else ("reproduced" + beside, True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    claims = args.registered
    if args.list:
        names = []
    elif args.quick:
        names = [name for name, claim in claims.items() if claim.quick]
    else:
        names = args.claims or list(claims)
    records = {name: recorded(claim) for name, claim in claims.items()}
    verdicts, failed = {}, []
    print(f"{PROG}: {len(claims)} claims in {args.registry}; re-running {len(names)}", flush=True)
    for index, name in enumerate(names, start=1):
        claim = claims[name]
        print(
            f"[{index}/{len(names)}] {name}: {claim.what}\n    $ {claim.command}   ({claim.takes})",
            flush=True,
        )
        verdicts[name], ok = verdict(claim, records[name])
        print(f"    -> {verdicts[name]}", flush=True)
        if not ok:
            failed.append(name)

    graph = ImportGraph()  # parsed once, for every claim
    states = {name: claim_state(claim, records[name], graph) for name, claim in claims.items()}
    width = max(map(len, claims))
    if args.list:
        for name, claim in claims.items():
            print(f"\n{name}{' (quick)' if claim.quick else ''}: {states[name].label}; takes {claim.takes}")
            print(f"  {claim.what}")
            keys = ", ".join(claim.recorded_keys)
            print(f"  recorded in {claim.results} at {keys}; compared {claim.compare}")
            print(f"  re-run: {claim.command}")
        return 0
    print("\nRecorded results against the code they come from:")
    for name, claim in claims.items():
        print(f"  {name:<{width}}  {claim.results}: {states[name].label}")

    print("\nVerdicts:")
    for name in claims:
        if name in verdicts:
            stale = (
                "; its record is stale (re-record it)" if states[name].stale and name not in failed else ""
            )
            print(f"  {name:<{width}}  {verdicts[name]}{stale}")
        else:
            print(f"  {name:<{width}}  not re-run{'; stale' if states[name].stale else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
