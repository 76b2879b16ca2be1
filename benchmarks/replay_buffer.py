"""Replay buffer benchmark: cost of one training step and of one insert, for growing buffer sizes N.

A step = sample 256 items, update their priorities, advance t by one. An insert = add 256 new items to a
full buffer (so 256 are evicted). Compared, all in this process, one run:

- ours / freshper: ``algorithms.replay`` with exponential age decay (forward decay, sum + min trees, numba).
- ours / per: the same buffer without decay (standard PER).
- ours / freshper_poly: polynomial decay; every step is at a new t, so every step pays its lazy O(N) refresh.
- direct: the FreshPER reference implementation's algorithm, vectorised in numpy: every step recomputes
  p = p_base * exp(-age / tau) for all N items, P = p^alpha / sum, and samples by searchsorted on the cumsum.
- rllib: Ray RLlib's ``PrioritizedEpisodeReplayBuffer`` (standard PER, NO age decay; it stores timesteps of
  ``SingleAgentEpisode``s, here episodes of 64 steps, inserts at max priority, samples 256 single steps).

Ratios are printed against ``direct`` (and rllib against ours / per) from the same run. Timing is noisy on a
shared machine; re-run before relying on a digit.

    python -m benchmarks.replay_buffer            # N = 1e4, 1e5, 1e6
    python -m benchmarks.replay_buffer --quick    # N = 1e3, 1e4
    python -m benchmarks.replay_buffer --quick --no-rllib --output DIR   # also DIR/results.json

``--output`` writes ``results.json``: the provenance (``experiments/common/results_json.py``), the agreement
of P(i) (deterministic: seeded data, no timing) and the timings in seconds.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
import numpy as np

from algorithms.replay import make_reference_buffer
from benchmarks.measure import load_average
from benchmarks.requirements import parse_and_check
from experiments.common.results_json import provenance, write_json

PROG = "python -m benchmarks.replay_buffer"

# Nothing beyond the core dependencies: numba and RLlib's buffer (the baseline) come with freshrl.
REQUIRES: tuple[str, ...] = ()

BATCH = 256
FILL_CHUNK = 4096
RLLIB_EPISODE_LEN = 64


class DirectDecayReplay:
    """Recompute-everything baseline: the FreshPER reference code's algorithm in vectorised numpy."""

    def __init__(self, capacity: int, alpha: float, beta: float, tau: float, eps: float, seed: int) -> None:
        self.capacity, self.alpha, self.beta, self.tau, self.eps = capacity, alpha, beta, tau, eps
        self.base = np.zeros(capacity)
        self.steps = np.zeros(capacity)
        self.items: list[Any] = [None] * capacity
        self.n_added = 0
        self.rng = np.random.default_rng(seed)

    def add(self, items: list[Any], signals: np.ndarray, t: float) -> None:
        slots = (self.n_added + np.arange(len(items))) % self.capacity
        self.base[slots] = np.abs(signals) + self.eps
        self.steps[slots] = t
        for s, item in zip(slots.tolist(), items, strict=True):
            self.items[s] = item
        self.n_added += len(items)

    def probabilities(self, t: float) -> np.ndarray:
        n = min(self.n_added, self.capacity)
        p = self.base[:n] * np.exp(-(t - self.steps[:n]) / self.tau)
        probs = p**self.alpha
        return probs / probs.sum()

    def sample(self, batch_size: int, t: float) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]:
        probs = self.probabilities(t)
        n = probs.shape[0]
        cdf = np.cumsum(probs)
        idx = np.minimum(np.searchsorted(cdf, self.rng.random(batch_size) * cdf[-1], side="right"), n - 1)
        weights = (n * probs[idx]) ** -self.beta / (n * probs.min()) ** -self.beta
        return [self.items[i] for i in idx.tolist()], idx, probs[idx], weights

    def update_priorities(self, idx: np.ndarray, signals: np.ndarray) -> None:
        self.base[idx] = np.abs(signals) + self.eps


def median_seconds(fn: Callable[[], Any], budget_s: float, rounds: int = 5, max_reps: int = 2000) -> float:
    """Median over ``rounds`` rounds of the mean wall time of ``fn`` (each round ~budget_s / rounds, at least
    one call); the median damps other processes on a shared machine."""
    fn()  # warm-up (JIT load, caches)
    means = []
    for _ in range(rounds):
        reps, start = 0, time.perf_counter()
        while reps < 1 or (time.perf_counter() - start < budget_s / rounds and reps < max_reps):
            fn()
            reps += 1
        means.append((time.perf_counter() - start) / reps)
    return float(np.median(means))


def check_agreement(args: argparse.Namespace) -> float:
    """Max relative difference of P(i) between ours/freshper and direct on the same data: the timings below
    compare implementations of the same distribution."""
    rng = np.random.default_rng(1)
    ours = make_reference_buffer("freshper", capacity=1000, alpha=args.alpha, tau=args.tau, seed=0)
    direct = DirectDecayReplay(1000, args.alpha, 0.4, args.tau, 1e-6, seed=0)
    for t in range(30):
        signals = rng.normal(size=100)
        ours.add(list(range(100)), signals, t=float(t))
        direct.add(list(range(100)), signals, t=float(t))
    ids, p_ours = ours.probabilities(40.0)
    p_direct = direct.probabilities(40.0)[ids % 1000]
    return float(np.max(np.abs(p_ours / p_direct - 1)))


def bench_ours(mode: str, n: int, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, float]:
    buf = make_reference_buffer(mode, capacity=n, alpha=args.alpha, beta_0=0.4, tau=args.tau, seed=0)
    t = 0.0
    for start in range(0, n, FILL_CHUNK):
        k = min(FILL_CHUNK, n - start)
        buf.add(list(range(start, start + k)), np.abs(rng.normal(size=k)), t=t)
        t += 1.0
    state = {"t": t}
    signals = np.abs(rng.normal(size=BATCH))
    new_items = list(range(BATCH))

    def step() -> None:
        batch = buf.sample(BATCH, t=state["t"])
        buf.update_priorities(batch.indices, signals)
        state["t"] += 1.0

    def insert() -> None:
        buf.add(new_items, signals, t=state["t"])
        state["t"] += 1.0

    return {"step": median_seconds(step, args.budget), "add": median_seconds(insert, args.budget)}


def bench_direct(n: int, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, float]:
    buf = DirectDecayReplay(n, args.alpha, 0.4, args.tau, 1e-6, seed=0)
    t = 0.0
    for start in range(0, n, FILL_CHUNK):
        k = min(FILL_CHUNK, n - start)
        buf.add(list(range(start, start + k)), np.abs(rng.normal(size=k)), t=t)
        t += 1.0
    state = {"t": t}
    signals = np.abs(rng.normal(size=BATCH))
    new_items = list(range(BATCH))

    def step() -> None:
        _, idx, _, _ = buf.sample(BATCH, t=state["t"])
        buf.update_priorities(idx, signals)
        state["t"] += 1.0

    def insert() -> None:
        buf.add(new_items, signals, t=state["t"])
        state["t"] += 1.0

    return {"step": median_seconds(step, args.budget), "add": median_seconds(insert, args.budget)}


def bench_rllib(n: int, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, float]:
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode
    from ray.rllib.utils.replay_buffers import PrioritizedEpisodeReplayBuffer

    def episode() -> SingleAgentEpisode:
        ep = SingleAgentEpisode()
        ep.add_env_reset(np.zeros(4, np.float32), {})
        for i in range(RLLIB_EPISODE_LEN):
            last = i == RLLIB_EPISODE_LEN - 1
            ep.add_env_step(np.zeros(4, np.float32), 0, float(rng.normal()), {}, terminated=last)
        return ep.to_numpy()

    per_add = BATCH // RLLIB_EPISODE_LEN
    buf = PrioritizedEpisodeReplayBuffer(capacity=n, alpha=args.alpha)
    start = time.perf_counter()
    while buf.get_num_timesteps() + per_add * RLLIB_EPISODE_LEN <= n:
        buf.add([episode() for _ in range(per_add)])
    fill_s = time.perf_counter() - start
    signals = np.abs(rng.normal(size=BATCH)) + 1e-6

    def step() -> None:
        buf.sample(num_items=BATCH, beta=0.4)
        buf.update_priorities(signals)

    fresh = [[episode() for _ in range(per_add)] for _ in range(args.rllib_add_reps + 1)]

    def insert() -> None:
        buf.add(fresh.pop())

    step_s = median_seconds(step, args.budget)
    add_s = median_seconds(insert, args.budget, rounds=args.rllib_add_reps, max_reps=1)
    return {"step": step_s, "add": add_s, "fill": fill_s}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e3, 1e4 only")
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--tau", type=float, default=500.0)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timing per measurement")
    parser.add_argument("--no-rllib", action="store_true", help="skip RLlib's buffer")
    parser.add_argument("--rllib-max-n", type=int, default=1_000_000, help="largest N tried for RLlib")
    parser.add_argument("--rllib-add-reps", type=int, default=5, help="timed RLlib inserts (slow at 1e6)")
    parser.add_argument("--output", default=None, help="folder for results.json (default: print only)")
    args = parse_and_check(parser, argv, REQUIRES)
    sizes = [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000]

    print(
        f"numpy {np.__version__}, numba {numba.__version__}, {os.cpu_count()} CPUs, load average "
        f"{load_average()}; batch {BATCH}, alpha {args.alpha}, tau {args.tau}; one run, "
        "each time a median of 5 rounds"
    )
    agreement = check_agreement(args)
    print(f"P(i) of ours/freshper vs direct on the same data: max relative difference {agreement:.1e}")
    rng = np.random.default_rng(0)
    rows: dict[tuple[int, str], dict[str, float]] = {}
    for n in sizes:
        rows[n, "direct"] = bench_direct(n, args, rng)
        for mode in ("freshper", "per", "freshper_poly"):
            rows[n, f"ours/{mode}"] = bench_ours(mode, n, args, rng)
        if not args.no_rllib and n <= args.rllib_max_n:
            rows[n, "rllib (PER, no decay)"] = bench_rllib(n, args, rng)

    header = (
        f"{'N':>9}  {'buffer':<22} {'step ms':>9} {'add256 ms':>10} "
        f"{'direct/step':>12} {'direct/add':>11}  note"
    )
    print(header)
    print("-" * len(header))
    for (n, name), r in rows.items():
        d = rows[n, "direct"]
        note = ""
        if name.startswith("rllib"):
            per = rows[n, "ours/per"]
            note = (
                f"{r['step'] / per['step']:.0f}x slower step than ours/per; fill {r['fill']:.1f} s; "
                "standard PER without age decay"
            )
        elif name == "ours/freshper_poly":
            note = "pays an O(N) refresh every step (new t)"
        print(
            f"{n:>9}  {name:<22} {1e3 * r['step']:>9.3f} {1e3 * r['add']:>10.3f} "
            f"{d['step'] / r['step']:>11.1f}x {d['add'] / r['add']:>10.1f}x  {note}"
        )
    first, last = sizes[0], sizes[-1]
    flat = rows[last, "ours/freshper"]["step"] / rows[first, "ours/freshper"]["step"]
    print(f"ours/freshper step cost at N={last:.0e} / at N={first:.0e}: {flat:.2f}")
    print(
        f"ours/freshper step speed-up over direct at N={last:.0e}: "
        f"{rows[last, 'direct']['step'] / rows[last, 'ours/freshper']['step']:.0f}x"
    )
    if args.output is not None:
        output = Path(args.output)
        output.mkdir(parents=True, exist_ok=True)
        results = {
            "provenance": provenance(PROG, argv),
            "settings": {"batch": BATCH, "alpha": args.alpha, "tau": args.tau, "sizes": sizes},
            "agreement_max_relative_difference": agreement,
            "seconds": {f"{n} {name}": r for (n, name), r in rows.items()},
        }
        write_json(output / "results.json", results)
        print(f"wrote {output / 'results.json'}")


if __name__ == "__main__":
    main()
