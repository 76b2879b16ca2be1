"""Check the env suite against the freshrl env contract and record it: ``python -m experiments.check_envs``.

Runs ``envs.contract.check_env_contract`` (every property: gymnasium's checker, no string raises, the
observation space, invalid outputs, determinism, groups, the oracle, leak-free splits, state keys;
docs/adding_an_env.md) on each env of ``--envs`` (default: every registered freshrl env) and writes
``results.json`` into ``--output``: the provenance (``experiments/common/results_json.py``) and, per env,
each property's result ("ok", "ok (...)", "skipped: ...") or the violation's message. Exits 1 when an env
breaks the contract. ``python -m envs.contract`` checks one env of one's own and records nothing.

    python -m experiments.check_envs --output docs/results/contract
    python -m experiments.check_envs --envs freshrl/FrozenLake-v0 --output /tmp/contract
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.common.results_json import provenance, write_json

PROG = "python -m experiments.check_envs"


def suite() -> list[str]:
    """Every env id freshrl registers (envs/__init__.py), in registration order."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the freshrl ids)

    return [env_id for env_id in gym.registry if env_id.startswith("freshrl/")]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=None, help="env ids (default: every freshrl env)")
    parser.add_argument("--output", required=True, help="folder for results.json")
    args = parser.parse_args(argv)
    from envs.contract import ContractViolation, check_env_contract

    args.envs = args.envs or suite()
    results: dict[str, Any] = {"provenance": provenance(PROG, argv), "envs": {}}
    broken = []
    for index, env_id in enumerate(args.envs, start=1):
        print(f"[{index}/{len(args.envs)}] {env_id}: checking the contract", flush=True)
        try:
            report = check_env_contract(env_id)
        except ContractViolation as violation:
            report = {prop: f"violated: {message}" for prop, message in violation.failures.items()}
            broken.append(env_id)
            print(violation, flush=True)
        results["envs"][env_id] = report
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    write_json(output / "results.json", results)
    kept = len(args.envs) - len(broken)
    print(f"wrote {output / 'results.json'}; {kept} of {len(args.envs)} envs keep the contract")
    if broken:
        raise SystemExit(1)
    return results


if __name__ == "__main__":
    main()
