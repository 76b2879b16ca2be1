"""``python -m envs.serve freshrl/Sokoban-v0 --port 8000``: serve a registered env over OpenEnv's protocol.

Any framework that speaks OpenEnv (TRL, SkyRL, prime-rl, OpenEnv's own ``EnvClient``, freshrl's
``openenv/Client-v0``) can then play the env: one WebSocket session per client on ``/ws``, each with its own
env. The protocol, the reset fields and the observation fields are in docs/serving_envs.md; the server is
``envs/ecosystem/openenv_server.py``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from collections.abc import Sequence

import envs  # noqa: F401  (registers freshrl's ids and the installed ecosystem ones)
from envs.ecosystem.openenv_server import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_PING_INTERVAL_S,
    DEFAULT_PING_TIMEOUT_S,
    TOKEN_ENV_VAR,
    EnvServer,
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m envs.serve", description=__doc__.splitlines()[0])
    parser.add_argument("env", help="a registered env id (freshrl/Sokoban-v0) or module:ns/Name-v0")
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="the port (0: a free one)")
    parser.add_argument("--env-config", default="{}", help="JSON keyword arguments for gymnasium.make")
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV_VAR),
        help=f"require 'Authorization: Bearer <token>' (default: ${TOKEN_ENV_VAR}, else no token)",
    )
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, help="sessions at once")
    parser.add_argument("--ping-interval", type=float, default=DEFAULT_PING_INTERVAL_S, help="seconds")
    parser.add_argument("--ping-timeout", type=float, default=DEFAULT_PING_TIMEOUT_S, help="seconds")
    parser.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES)
    parser.add_argument("--action-key", default="message", help="the action field holding the response text")
    args = parser.parse_args(argv)
    try:
        env_kwargs = json.loads(args.env_config)
    except ValueError as exc:
        parser.error(f"--env-config is not JSON ({exc}); give an object such as '{{\"max_turns\": 8}}'")
    if not isinstance(env_kwargs, dict):
        parser.error(f"--env-config must be a JSON object of keyword arguments, got {args.env_config}")
    try:
        server = EnvServer(
            args.env,
            env_kwargs=env_kwargs,
            host=args.host,
            port=args.port,
            token=args.token or None,
            max_sessions=args.max_sessions,
            ping_interval_s=args.ping_interval,
            ping_timeout_s=args.ping_timeout,
            max_message_bytes=args.max_message_bytes,
            action_key=args.action_key,
        )
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    if server.token is None and not _is_loopback(args.host):
        print(
            f"warning: serving on {args.host} without a token: anyone who reaches this port can run "
            f"episodes; set --token or ${TOKEN_ENV_VAR}",
            file=sys.stderr,
        )
    print(
        f"serving {args.env} over OpenEnv's protocol at {server.url} (WebSocket sessions at "
        f"ws://{server.host}:{server.port}/ws; at most {server.max_sessions} at once; token "
        f"{'required' if server.token else 'off'}); Ctrl-C stops",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


if __name__ == "__main__":
    main()
