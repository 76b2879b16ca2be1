"""The benchmarks' setup check: every benchmark parses its arguments and checks its optional imports before
any work, so a missing package fails in the first second with the command that installs it (a fresh
install once ran ``dapo_step`` for 6 minutes and then died on ``No module named 'datasets'``).

Each benchmark's ``main`` starts with ``args = parse_and_check(parser, argv, REQUIRES)``; ``--check-setup`` on
any benchmark stops right after the check (the test runs every benchmark that way).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import warnings
from collections.abc import Sequence

# The one-line setups (Makefile). `make bench` installs the `bench` extra into .venv beside the vLLM build.
BENCH_SETUP = "make bench"
ENGINE_SETUP = "make setup   (on a CUDA machine: make setup VLLM=gpu)"

# Which setup provides an optional module (import name -> command); others come from the bench extra.
INSTALLED_BY = {
    "vllm": ENGINE_SETUP,
}


class MissingRequirements(SystemExit):
    """Raised before a benchmark starts when one of its optional imports is missing; exits with status 1."""


def missing_modules(modules: Sequence[str]) -> dict[str, str]:
    """Import name -> the import error, for each of `modules` that does not import.

    Imports for real (not only ``find_spec``): a package present but broken beside ours (e.g. a TRL built for
    another transformers) fails here too rather than mid-run. What an import prints (old ``gym`` prints a
    deprecation banner) is dropped: the check's own message is the one that matters.
    """
    missing = {}
    for module in modules:
        try:
            with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                importlib.import_module(module)
        except ImportError as error:
            missing[module] = f"{type(error).__name__}: {error}"
    return missing


def require(benchmark: str, modules: Sequence[str]) -> None:
    """Raises MissingRequirements naming each missing module of `modules` and the command that installs it."""
    missing = missing_modules(modules)
    if not missing:
        return
    lines = [f"{benchmark} needs {', '.join(missing)}, which did not import:"]
    lines += [f"  {module}: {error}" for module, error in missing.items()]
    commands = sorted({INSTALLED_BY.get(module, BENCH_SETUP) for module in missing})
    lines.append("Install with (once, from the repository root):")
    lines += [f"  {command}" for command in commands]
    raise MissingRequirements("\n".join(lines))


def parse_and_check(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, modules: Sequence[str]
) -> argparse.Namespace:
    """Parses `argv` with `parser` (plus ``--check-setup``), then checks `modules` import (see require).

    With ``--check-setup`` it prints that the setup is complete and exits 0 without running the benchmark.
    """
    parser.add_argument(
        "--check-setup",
        action="store_true",
        help="only parse the arguments and check the optional imports, then exit",
    )
    args = parser.parse_args(argv)
    require(parser.prog, modules)
    if args.check_setup:
        print(f"{parser.prog}: arguments parsed; optional imports present ({', '.join(modules) or 'none'})")
        raise SystemExit(0)
    return args
