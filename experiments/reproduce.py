"""Re-check the figures the docs state: ``python -m experiments.reproduce``.

Reads the claims registry (docs/results/claims.yaml, ``experiments/common/claims.py``), re-runs each claim's
command into a temporary folder (never over the committed record), streaming its output, and prints a verdict
per claim: ``reproduced``, ``differs: recorded X, today Y`` (exact for deterministic values, inside the
recorded 95% interval for stochastic ones), or ``failed`` when the command fails. For every recorded result
it also says how many commits touched the paths its value depends on since the commit it records: ``stale``
when any did (``unknown`` without git or a recorded commit). Exits 1 when a re-run claim differs or fails.

    python -m experiments.reproduce                     # every claim (about 12 min on an idle 2-core machine)
    python -m experiments.reproduce --quick             # the quick claims only (seconds; make test runs it)
    python -m experiments.reproduce --claims env-contract smollm2-zero-shot-frozenlake
    python -m experiments.reproduce --list              # the claims and their staleness, nothing run

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

from experiments.common.claims import REGISTRY, Claim, ClaimsError, differences, load_claims, observed
from experiments.common.results_json import REPOSITORY
from experiments.common.staleness import commits_since, recorded_commit

PROG = "python -m experiments.reproduce"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--list", action="store_true", help="list the claims and their staleness; run nothing"
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


def staleness(claim: Claim, results: dict[str, Any] | None) -> tuple[str, bool]:
    """A line on how old the claim's record is against its code, and whether it is stale."""
    if results is None:
        return f"no record: {claim.results} is missing", False
    commit = recorded_commit(results)
    count = commits_since(commit, claim.depends_on)
    made = results.get("provenance") or {}
    dirty = ", from a tree with uncommitted changes" if made.get("dirty") else ""
    where = f"recorded at {commit or 'an unrecorded commit'}{dirty}"
    if count is None:
        return f"{where}; staleness unknown (no git, or a commit this clone lacks)", False
    if count == 0:
        return f"{where}; no commit since touched {', '.join(claim.depends_on)}", False
    return f"{where}; stale: {count} commits since touched {', '.join(claim.depends_on)}", True


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
            return observed(claim, json.loads(written.read_text()))
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
    return ("differs: " + "; ".join(lines), False) if lines else ("reproduced", True)


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

    print("\nRecorded results against the code they depend on:")
    width = max(map(len, claims))
    stale = {}
    for name, claim in claims.items():
        line, stale[name] = staleness(claim, records[name])
        print(f"  {name:<{width}}  {claim.results}: {line}")
    if args.list:
        for name, claim in claims.items():
            print(f"\n{name}{' (quick)' if claim.quick else ''}: {claim.what}")
            print(f"  recorded in {claim.results} at {', '.join(claim.keys)}; compared {claim.compare}")
            print(f"  re-run: {claim.command}   ({claim.takes})")
        return 0

    print("\nVerdicts:")
    for name in claims:
        if name in verdicts:
            note = "; its record is stale (re-record it)" if stale[name] and name not in failed else ""
            print(f"  {name:<{width}}  {verdicts[name]}{note}")
        else:
            print(f"  {name:<{width}}  not re-run{'; stale' if stale[name] else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
