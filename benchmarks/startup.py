"""Process start-up and OpenMP waiting: what bytecode in the venv and ``OMP_WAIT_POLICY=PASSIVE`` save.

Two measurements, every side in a fresh child interpreter (``sys.executable``), the sides alternating over
``--repeats`` repetitions so that all see the same machine load; the fastest repetition of each side is kept.

- Bytecode (the Makefile's ``uv sync --compile-bytecode``). The child times ``import models.engine``, then
  building the first ``RolloutEngine`` on the tiny LM (0.25 GiB KV cache, ``max_model_len`` 1024, as the
  tests build it; this includes importing vLLM). "compiled": the caller's environment, so the venv's
  ``.pyc`` files are used. "from source": ``PYTHONDONTWRITEBYTECODE=1`` and ``PYTHONPYCACHEPREFIX`` set to a
  fresh folder holding only the standard library's ``.pyc`` files (linked), so Python finds no ``.pyc`` for
  the venv's packages or the repository and compiles them from source on every start without writing any:
  what a venv installed without ``--compile-bytecode`` does under ``PYTHONDONTWRITEBYTECODE`` (the
  interpreter's standard library keeps its own ``.pyc`` files there). When the venv has no ``.pyc`` files
  at all, both sides compile and the output says so.
- OpenMP waiting (the Makefile's ``OMP_WAIT_POLICY=PASSIVE`` for ``make test``). The child loads the tiny LM
  with transformers in float32 and times forward + backward passes on random token ids (8 rows x 256 tokens
  by default, one warm-up), printing the mean step time. Four sides: ``OMP_WAIT_POLICY`` unset (libgomp's
  default: a waiting thread spins a while before it sleeps) and ``PASSIVE`` (it sleeps at once), each alone
  and beside a neighbour process that spins one core (``python -c "while True: pass"``, killed after).

Ratios are against "compiled" and against "unset, alone" from the same run. The default run takes about 3
minutes on 2 cores. Timing is noisy on a shared machine; re-run before relying on a digit.

    python -m benchmarks.startup
    python -m benchmarks.startup --repeats 3 --steps 10
    python -m benchmarks.startup --output DIR      # also DIR/results.json, with the provenance
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.measure import alternate, fastest, load_average
from benchmarks.requirements import parse_and_check
from experiments.common.results_json import provenance, write_json
from models.tiny import tiny_lm_path

PROG = "python -m benchmarks.startup"

# The bytecode child builds a vLLM engine; the OpenMP child needs only the core dependencies.
REQUIRES: tuple[str, ...] = ("vllm",)

REPOSITORY = Path(__file__).resolve().parents[1]
RESULT_PREFIX = "startup-result: "  # marks the child's result line: vLLM logs to stdout too
CHILD_TIMEOUT_S = 600
ENGINE_KV_CACHE_GIB = 0.25  # as the tests' tiny engines (tests/models/test_engine_memory.py)
ENGINE_MAX_MODEL_LEN = 1024

BYTECODE_CHILD = f"""
import json, sys, time
started = time.perf_counter()
import models.engine
imported = time.perf_counter()
models.engine.RolloutEngine(
    sys.argv[1], dtype="float32", max_model_len={ENGINE_MAX_MODEL_LEN}, seed=0,
    kv_cache_gib={ENGINE_KV_CACHE_GIB},
)
built = time.perf_counter()
print({RESULT_PREFIX!r} + json.dumps({{"import_s": imported - started, "engine_s": built - imported}}))
"""

OPENMP_CHILD = f"""
import json, sys, time
import torch
from transformers import AutoModelForCausalLM
path, rows, tokens, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
model.train()
ids = torch.randint(model.config.vocab_size, (rows, tokens), generator=torch.Generator().manual_seed(0))

def step():
    model(input_ids=ids, labels=ids).loss.backward()
    model.zero_grad(set_to_none=True)

step()
started = time.perf_counter()
for _ in range(steps):
    step()
seconds = (time.perf_counter() - started) / steps
print({RESULT_PREFIX!r} + json.dumps({{"step_s": seconds, "torch_threads": torch.get_num_threads()}}))
"""

SPINNER = "while True: pass"

BYTECODE_SIDES = ("compiled", "from_source")
BYTECODE_TIMES = ("import_s", "engine_s", "total_s")
# name -> (OMP_WAIT_POLICY or None for unset, beside a spinning neighbour)
OPENMP_SIDES: dict[str, tuple[str | None, bool]] = {
    "unset_alone": (None, False),
    "passive_alone": ("PASSIVE", False),
    "unset_beside_spinner": (None, True),
    "passive_beside_spinner": ("PASSIVE", True),
}
OPENMP_LABELS = {
    "unset_alone": "OMP_WAIT_POLICY unset, alone",
    "passive_alone": "OMP_WAIT_POLICY=PASSIVE, alone",
    "unset_beside_spinner": "unset, beside a spinning process",
    "passive_beside_spinner": "PASSIVE, beside a spinning process",
}


def venv_has_bytecode(module: str = "torch") -> bool:
    """Whether ``module``'s ``__init__`` has the ``.pyc`` file this interpreter would load (a venv installed
    without ``--compile-bytecode`` and used under ``PYTHONDONTWRITEBYTECODE`` has none)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"{module} is not installed: its .pyc file tells whether the venv has bytecode")
    return Path(importlib.util.cache_from_source(spec.origin)).exists()


def link_stdlib_bytecode(prefix: Path) -> int:
    """Links the standard library's ``.pyc`` files (this interpreter's cache tag, not optimised) into
    ``prefix`` where ``PYTHONPYCACHEPREFIX=prefix`` looks for them; returns how many. Its ``site-packages``
    is left out: under that prefix everything else compiles from source."""
    stdlib = Path(sysconfig.get_path("stdlib"))
    suffix = f".{sys.implementation.cache_tag}.pyc"
    linked = 0
    for folder, subfolders, files in os.walk(stdlib):
        subfolders[:] = [name for name in subfolders if name != "site-packages"]
        source_folder = Path(folder)
        if source_folder.name != "__pycache__":
            continue
        # Python maps /a/b/__pycache__/m.tag.pyc to PREFIX/a/b/m.tag.pyc (the docs of sys.pycache_prefix).
        target = prefix / source_folder.parent.relative_to(source_folder.anchor)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(suffix):
                (target / name).symlink_to(source_folder / name)
                linked += 1
    return linked


def bytecode_environment(base: Mapping[str, str], side: str, prefix: Path | None) -> dict[str, str]:
    """The child's environment for a bytecode ``side``: "compiled" is ``base`` without a pycache prefix,
    "from_source" adds ``PYTHONDONTWRITEBYTECODE=1`` and ``PYTHONPYCACHEPREFIX=prefix``."""
    environment = {key: value for key, value in base.items() if key != "PYTHONPYCACHEPREFIX"}
    if side == "from_source":
        if prefix is None:
            raise ValueError("the from_source side needs a pycache prefix folder")
        environment |= {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(prefix)}
    elif side != "compiled":
        raise ValueError(f"unknown bytecode side {side!r}: one of {BYTECODE_SIDES}")
    return environment


def openmp_environment(base: Mapping[str, str], policy: str | None) -> dict[str, str]:
    """``base`` with ``OMP_WAIT_POLICY=policy``, or without it when ``policy`` is None (also when the caller
    set it, as ``make test`` does)."""
    environment = {key: value for key, value in base.items() if key != "OMP_WAIT_POLICY"}
    if policy is not None:
        environment["OMP_WAIT_POLICY"] = policy
    return environment


def parse_child_output(stdout: str, stderr: str, returncode: int) -> dict[str, Any]:
    """The JSON object on the child's last result line; RuntimeError with the child's last stderr when it
    failed or printed none."""
    results = [line[len(RESULT_PREFIX) :] for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if returncode != 0 or not results:
        problem = f"exited with status {returncode}" if returncode != 0 else "printed no result line"
        raise RuntimeError(f"the benchmark's child process {problem}; its last output:\n{stderr[-3000:]}")
    return json.loads(results[-1])


def run_child(script: str, arguments: Sequence[str], environment: Mapping[str, str]) -> dict[str, Any]:
    """Runs ``script`` in a fresh interpreter at the repository root and returns its result."""
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments],
        env=dict(environment),
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    return parse_child_output(done.stdout, done.stderr, done.returncode)


def bytecode_run(side: str, base: Mapping[str, str], model: Path, repeat: int) -> dict[str, Any]:
    """One child of the bytecode measurement in repeat ``repeat`` (from 0); "from_source" gets a fresh
    pycache prefix each time."""
    with tempfile.TemporaryDirectory(prefix="freshrl-pycache-") as folder:
        prefix = Path(folder) if side == "from_source" else None
        if prefix is not None:
            link_stdlib_bytecode(prefix)
        result = run_child(BYTECODE_CHILD, [str(model)], bytecode_environment(base, side, prefix))
    run = {**result, "total_s": result["import_s"] + result["engine_s"]}
    print(f"  bytecode, {side} #{repeat + 1}: {run['total_s']:.1f} s", flush=True)
    return run


def openmp_run(
    side: str, base: Mapping[str, str], model: Path, args: argparse.Namespace, repeat: int
) -> dict[str, Any]:
    """One child of the OpenMP measurement in repeat ``repeat`` (from 0), beside a spinning neighbour
    process if the side says so."""
    policy, beside_spinner = OPENMP_SIDES[side]
    arguments = [str(model), str(args.rows), str(args.tokens), str(args.steps)]
    spinner = subprocess.Popen([sys.executable, "-c", SPINNER]) if beside_spinner else None
    try:
        run = run_child(OPENMP_CHILD, arguments, openmp_environment(base, policy))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    print(f"  openmp, {side} #{repeat + 1}: {run['step_s']:.3f} s/step", flush=True)
    return run


def over(best: dict[str, dict[str, Any]], baseline: str, key: str) -> dict[str, float]:
    """side -> the side's fastest ``key`` over the baseline side's."""
    return {side: run[key] / best[baseline][key] for side, run in best.items()}


def print_bytecode(best: dict[str, dict[str, Any]], ratio: dict[str, float], has_bytecode: bool) -> None:
    print("\nBytecode (a fresh interpreter each time)")
    if not has_bytecode:
        print(
            "  NOTE: the venv has no .pyc files (installed without --compile-bytecode): both sides compile "
            "from source, so the ratio is about 1"
        )
    print(f"{'side':<24}{'import models.engine s':>24}{'first engine s':>16}{'total s':>16}")
    for side in BYTECODE_SIDES:
        run = best[side]
        label = side.replace("_", " ")
        print(f"{label:<24}{run['import_s']:>24.2f}{run['engine_s']:>16.2f}{run['total_s']:>16.2f}")
    print(
        f"{'from source / compiled':<24}{ratio['import_s']:>23.2f}x{ratio['engine_s']:>15.2f}x"
        f"{ratio['total_s']:>15.2f}x"
    )


def print_openmp(best: dict[str, dict[str, Any]], ratio: dict[str, float], args: argparse.Namespace) -> None:
    threads = best["unset_alone"]["torch_threads"]
    print(
        f"\nOpenMP waiting: tiny LM, float32, forward + backward on {args.rows} x {args.tokens} tokens, "
        f"mean of {args.steps} steps after 1 warm-up, {threads} torch threads"
    )
    print(f"{'side':<40}{'step s':>9}{'/ unset, alone':>16}")
    for side in OPENMP_SIDES:
        print(f"{OPENMP_LABELS[side]:<40}{best[side]['step_s']:>9.3f}{ratio[side]:>15.2f}x")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="children per side (the fastest is kept)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per OpenMP child")
    parser.add_argument("--rows", type=int, default=8, help="rows of the OpenMP child's batch")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per row of the OpenMP child's batch")
    parser.add_argument("--output", default=None, help="folder for results.json (default: print only)")
    return parser


def main(argv: list[str] | None = None) -> None:
    base = dict(os.environ)  # the children's environment: the caller's, not what importing vLLM adds to it
    args = parse_and_check(build_parser(), argv, REQUIRES)
    for name in ("repeats", "steps", "rows", "tokens"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be >= 1, got {getattr(args, name)}")
    model = tiny_lm_path()  # built here if it is not cached, so that no child times building it
    has_bytecode = venv_has_bytecode()
    load_before = load_average()
    print(
        f"{os.cpu_count()} CPUs, load average {load_before}; python {sys.version.split()[0]}; "
        f"venv .pyc files: {'present' if has_bytecode else 'NONE'}; fastest of {args.repeats} per side, "
        "the sides alternating",
        flush=True,
    )

    bytecode_runs = alternate(
        {side: functools.partial(bytecode_run, side, base, model) for side in BYTECODE_SIDES}, args.repeats
    )
    openmp_runs = alternate(
        {side: functools.partial(openmp_run, side, base, model, args) for side in OPENMP_SIDES}, args.repeats
    )

    bytecode_best = fastest(bytecode_runs, seconds=lambda run: run["total_s"])
    bytecode_ratio = {key: over(bytecode_best, "compiled", key)["from_source"] for key in BYTECODE_TIMES}
    openmp_best = fastest(openmp_runs, seconds=lambda run: run["step_s"])
    openmp_ratio = over(openmp_best, "unset_alone", "step_s")
    print_bytecode(bytecode_best, bytecode_ratio, has_bytecode)
    print_openmp(openmp_best, openmp_ratio, args)
    load_after = load_average()
    print(f"\nload average at the end: {load_after}")

    if args.output is not None:
        output = Path(args.output)
        output.mkdir(parents=True, exist_ok=True)
        settings = {
            "repeats": args.repeats,
            "engine": {"kv_cache_gib": ENGINE_KV_CACHE_GIB, "max_model_len": ENGINE_MAX_MODEL_LEN},
            "openmp": {"rows": args.rows, "tokens": args.tokens, "steps": args.steps},
        }
        results = {
            "provenance": provenance(PROG, argv),
            "settings": settings,
            "venv_has_bytecode": has_bytecode,
            "load_average": {"before": load_before, "after": load_after},
            "bytecode": {
                "seconds": bytecode_best,
                "from_source_over_compiled": bytecode_ratio,
                "runs": bytecode_runs,
            },
            "openmp": {
                "torch_threads": openmp_best["unset_alone"]["torch_threads"],
                "step_s": {side: run["step_s"] for side, run in openmp_best.items()},
                "over_unset_alone": openmp_ratio,
                "runs": {side: [run["step_s"] for run in runs] for side, runs in openmp_runs.items()},
            },
        }
        write_json(output / "results.json", results)
        print(f"wrote {output / 'results.json'}")


if __name__ == "__main__":
    main()
