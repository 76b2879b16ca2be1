"""Load and faults on loopback: ``python -m envs.serve`` under N concurrent sessions, and clients that vanish.

The server runs in a process of its own on 127.0.0.1 (the only address this script talks to). For each level
N (1, 4, 16, 64 by default) N client threads each hold one WebSocket session and play episodes (reset, then
random answers until the episode ends) for ``--seconds``; an episode under way at the deadline is played to
its end. Reported per level: steps/s, p50/p99 step latency (send to reply, client side), errors, lost
episodes (an episode that a reset started and no ``done`` ended: must be 0), and the most sessions
``/health`` showed at once. Levels stop at the first that errs or whose p99 passes ``--p99-limit-ms``; the
largest clean level is the capacity figure. Then ``--disconnects`` clients start episodes and vanish
mid-episode (half close the socket, half go silent and let the server's ping timeout drop them), and the
server's session count must return to 0.

    python -m benchmarks.env_server_load                       # FrozenLake, 1/4/16/64 sessions, 5 s each
    python -m benchmarks.env_server_load --levels 1 4 --seconds 1 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.requirements import parse_and_check
from envs.ecosystem.websocket import WebSocketConnection
from envs.seeds import TRAIN
from experiments.common.results_json import provenance, write_json

PROG = "python -m benchmarks.env_server_load"
REQUIRES: tuple[str, ...] = ()
HOST = "127.0.0.1"
MAX_SESSIONS = 256
MAX_SECONDS = 30.0
# The server's keepalive in this run: short, so the silent clients are dropped within seconds.
PING_S = 1.0
RESPONSES = (
    "<answer>Up</answer>",
    "<answer>Down, Right</answer>",
    "<answer>Left, Up, Right</answer>",
    "<answer>Right, Right</answer>",
    "I am not sure.",
)


class Server:
    """``python -m envs.serve`` in a subprocess on 127.0.0.1, a free port."""

    def __init__(self, env_id: str, max_sessions: int):
        command = [sys.executable, "-m", "envs.serve", env_id, "--host", HOST, "--port", "0"]
        command += ["--max-sessions", str(max_sessions), "--ping-interval", str(PING_S)]
        command += ["--ping-timeout", str(PING_S)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if " at http://" not in line:
            self.stop()
            raise SystemExit(f"the server did not start: {line!r}")
        self.url = line.split(" at ", 1)[1].split(" ", 1)[0]
        self.ws_url = self.url.replace("http://", "ws://") + "/ws"

    def sessions(self) -> int:
        with urllib.request.urlopen(f"{self.url}/health", timeout=10) as reply:
            return json.loads(reply.read())["sessions"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def ask(connection: WebSocketConnection, message: dict[str, Any]) -> dict[str, Any]:
    connection.send_text(json.dumps(message))
    reply = json.loads(connection.receive_text())
    if reply.get("type") == "error":
        raise RuntimeError(f"{reply['data'].get('code')}: {reply['data'].get('message')}")
    return reply["data"]


def play(server: Server, index: int, clock: dict[str, float], start: threading.Barrier, out: dict) -> None:
    """One session: episodes until ``clock["deadline"]``, the last one to its end."""
    rng = random.Random(index)
    try:
        connection = WebSocketConnection(server.ws_url, timeout_s=60.0)
    except OSError as exc:
        out["errors"].append(f"connect: {exc}")
        connection = None
    with contextlib.suppress(threading.BrokenBarrierError):  # every session connected, or gave up
        start.wait()
    if connection is None:
        return
    try:
        while time.monotonic() < clock["deadline"]:
            ask(connection, {"type": "reset", "data": {"seed": rng.randrange(len(TRAIN))}})
            out["started"] += 1
            done = False
            while not done:
                sent = time.perf_counter()
                reply = ask(connection, {"type": "step", "data": {"message": rng.choice(RESPONSES)}})
                out["latencies"].append(time.perf_counter() - sent)
                done = reply["done"]
            out["finished"] += 1
    except Exception as exc:  # counted and reported, whatever it is
        out["errors"].append(f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()


def run_level(server: Server, sessions: int, seconds: float) -> dict[str, Any]:
    outs = [{"latencies": [], "errors": [], "started": 0, "finished": 0} for _ in range(sessions)]
    start = threading.Barrier(sessions + 1)
    held = [0]
    stop_sampling = threading.Event()

    def sample() -> None:  # the most sessions the server reports at once
        while not stop_sampling.wait(0.1):
            held[0] = max(held[0], server.sessions())

    clock = {"deadline": time.monotonic() + 3600}  # set for real once every session is connected
    threads = [
        threading.Thread(target=play, args=(server, index, clock, start, outs[index]))
        for index in range(sessions)
    ]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a session that hangs connecting: in its errors
        start.wait(timeout=120)
    clock["deadline"] = time.monotonic() + seconds
    began = time.perf_counter()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    for thread in threads:
        thread.join(timeout=seconds + 120)
    elapsed = time.perf_counter() - began
    stop_sampling.set()
    sampler.join(timeout=10)
    latencies = np.array([x for out in outs for x in out["latencies"]]) * 1000
    errors = [e for out in outs for e in out["errors"]]
    return {
        "sessions": sessions,
        "seconds": round(elapsed, 2),
        "steps": int(latencies.size),
        "steps_per_s": round(latencies.size / elapsed, 1),
        "episodes": sum(out["finished"] for out in outs),
        "p50_ms": round(float(np.percentile(latencies, 50)), 2) if latencies.size else None,
        "p99_ms": round(float(np.percentile(latencies, 99)), 2) if latencies.size else None,
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "lost_episodes": sum(out["started"] - out["finished"] for out in outs),
        "max_sessions_held": held[0],
    }


def disconnects(server: Server, clients: int, wait_s: float) -> dict[str, Any]:
    """``clients`` sessions start an episode; half close their sockets mid-episode, half go silent."""
    silent: list[socket.socket] = []
    for index in range(clients):
        connection = WebSocketConnection(server.ws_url, timeout_s=30.0)
        ask(connection, {"type": "reset", "data": {"seed": index}})
        ask(connection, {"type": "step", "data": {"message": RESPONSES[0]}})
        # Take the socket from the connection and stop its keepalive: from here the client neither closes
        # the session nor answers pings, as a client whose process hangs or dies.
        connection._stop.set()
        sock, connection._sock = connection._sock, None
        if index % 2:
            silent.append(sock)
        else:  # a dead process: the kernel closes its socket, no close frame
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()
    held = server.sessions()
    began = time.monotonic()
    while server.sessions() and time.monotonic() - began < wait_s:
        time.sleep(0.1)
    freed_after = time.monotonic() - began
    left = server.sessions()
    for sock in silent:
        sock.close()
    return {
        "clients": clients,
        "closed": clients - len(silent),
        "silent": len(silent),
        "sessions_held_after_vanishing": held,
        "sessions_left": left,
        "freed_within_s": round(freed_after, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="freshrl/FrozenLake-v0", help="the env id to serve")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 64], help="sessions per level")
    parser.add_argument("--seconds", type=float, default=5.0, help=f"per level (at most {MAX_SECONDS:g})")
    parser.add_argument("--p99-limit-ms", type=float, default=1000.0, help="a level past this degrades")
    parser.add_argument("--disconnects", type=int, default=16, help="clients that vanish mid-episode")
    parser.add_argument("--json", type=Path, help="also write the results (with their provenance) here")
    args = parse_and_check(parser, argv, REQUIRES)
    if not all(1 <= n <= MAX_SESSIONS for n in args.levels) or not 0 <= args.disconnects <= MAX_SESSIONS:
        parser.error(f"levels and --disconnects must lie in 1..{MAX_SESSIONS}")
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must lie in (0, {MAX_SECONDS:g}]")
    server = Server(args.env, max(*args.levels, args.disconnects, 1))
    results: dict[str, Any] = {
        "provenance": provenance(PROG, argv),
        "env": args.env,
        "levels": [],
        "capacity": 0,
    }
    try:
        print(f"{args.env} served at {server.url}; {args.seconds:g} s per level", flush=True)
        columns = ("sessions", "steps/s", "p50 ms", "p99 ms", "errors", "lost", "held")
        print(" ".join(f"{name:>9}" for name in columns))
        for sessions in args.levels:
            level = run_level(server, sessions, args.seconds)
            results["levels"].append(level)
            print(
                " ".join(
                    f"{level[key]!s:>9}"
                    for key in ("sessions", "steps_per_s", "p50_ms", "p99_ms", "errors", "lost_episodes")
                )
                + f" {level['max_sessions_held']:>9}",
                flush=True,
            )
            if level["errors"] or level["lost_episodes"] or (level["p99_ms"] or 0) > args.p99_limit_ms:
                print(f"degraded at {sessions} sessions: {level['first_error'] or 'p99 over the limit'}")
                break
            results["capacity"] = sessions
        if args.disconnects:
            results["disconnects"] = disconnects(server, args.disconnects, wait_s=4 * PING_S + 10)
            print(f"vanishing clients: {results['disconnects']}", flush=True)
        results["sessions_at_end"] = server.sessions()
    finally:
        server.stop()
    end = results["sessions_at_end"]
    print(f"largest clean level: {results['capacity']} sessions; sessions at the end: {end}")
    if args.json:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
