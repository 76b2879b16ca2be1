"""``python -m envs.serve``: freshrl envs served over OpenEnv's protocol, played end to end by the project's
own client (``openenv/Client-v0``) and, where installed, by openenv-core's; every registered freshrl id; the
errors a client gets for bad messages, a full server or a missing token; sessions freed however they end."""

from __future__ import annotations

import base64
import io
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import gymnasium as gym
import numpy as np
import pytest
from PIL import Image

import envs  # noqa: F401  (registers the ids)
from envs.contract import check_env_contract
from envs.ecosystem.openenv_client import OpenEnvClientEnv, OpenEnvUnavailable
from envs.ecosystem.openenv_server import EnvServer, json_safe
from envs.ecosystem.websocket import OP_CLOSE, OP_PING, WebSocketConnection, WebSocketError, read_frame
from envs.frozen_lake import FrozenLakeEnv
from envs.seeds import seeds

FRESHRL_IDS = sorted(env_id for env_id in gym.registry if env_id.startswith("freshrl/"))


@pytest.fixture
def serve():
    """``serve(env_id, **server_kwargs)``: a started server on 127.0.0.1, stopped after the test."""
    servers = []

    def start(env_id: str, **kwargs) -> EnvServer:
        servers.append(EnvServer(env_id, **kwargs).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def ws(server: EnvServer, **kwargs) -> WebSocketConnection:
    return WebSocketConnection(f"ws://127.0.0.1:{server.port}/ws", timeout_s=5.0, **kwargs)


def ask(connection: WebSocketConnection, message: dict | str) -> dict:
    connection.send_text(message if isinstance(message, str) else json.dumps(message))
    return json.loads(connection.receive_text())


def wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


# ----------------------------------------------------------------------------------------------- episodes
def test_frozen_lake_through_the_server_is_the_local_env(serve):
    server = serve("freshrl/FrozenLake-v0")
    client = OpenEnvClientEnv(server.url, observation_key="text", max_turns=6)
    local = gym.make("freshrl/FrozenLake-v0").unwrapped
    for seed in seeds("train", 2):
        remote_observation, _ = client.reset(seed=seed)
        local_observation, _ = local.reset(seed=seed)
        assert remote_observation == local_observation
        for response in ("<answer>Right</answer>", "nonsense", *local.oracle_responses()[:1]):
            remote = client.step(response)
            expected = local.step(response)
            assert remote[:4] == expected[:4] and remote[4]["success"] == expected[4]["success"]
            if expected[2] or expected[3]:
                break
    client.close()
    assert wait_for(lambda: server.sessions == 0)


def test_the_env_contract_through_the_server(serve):
    server = serve("freshrl/FrozenLake-v0")
    report = check_env_contract(
        lambda **kwargs: OpenEnvClientEnv(server.url, observation_key="text", **kwargs),
        fuzz_samples=8,
        split_tasks=20,
        fresh_interpreter=False,
    )
    assert report["oracle"].startswith("skipped")  # the client has no oracle; the env behind it has
    assert all(result.startswith("ok") for prop, result in report.items() if prop != "oracle"), report


def test_a_vision_observation_carries_the_image_as_a_base64_png(serve):
    server = serve("freshrl/FrozenLakeVision-v0")
    local = gym.make("freshrl/FrozenLakeVision-v0").unwrapped
    connection = ws(server)
    seed = seeds("validation", 1)[0]
    for reply, (expected, *_) in (
        (ask(connection, {"type": "reset", "data": {"seed": seed}}), local.reset(seed=seed)),
        (
            ask(connection, {"type": "step", "data": {"message": "<answer>Up</answer>"}}),
            local.step("<answer>Up</answer>"),
        ),
    ):
        observation = reply["data"]["observation"]
        png = base64.b64decode(observation["image"], validate=True)
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        image = np.asarray(Image.open(io.BytesIO(png)))
        assert image.dtype == np.uint8 and np.array_equal(image, expected["image"])
        assert observation["text"] == expected["text"]
    connection.close()


def test_math_solved_by_its_oracle_through_the_server(serve):
    server = serve("freshrl/Math-v0")
    client = OpenEnvClientEnv(server.url, observation_key="text")
    local = gym.make("freshrl/Math-v0").unwrapped
    for seed in seeds("validation", 3):
        for solve in (False, True):
            assert client.reset(seed=seed)[0] == local.reset(seed=seed)[0]
            answer = local.oracle_responses()[0] if solve else "<answer>-0.123</answer>"
            observation, reward, terminated, truncated, info = client.step(answer)
            assert (observation, reward, terminated, truncated) == local.step(answer)[:4]
            assert info["success"] == solve and (reward > 0) == solve
    client.close()


@pytest.mark.parametrize("env_id", FRESHRL_IDS)
def test_every_registered_env_resets_and_steps_through_the_server(serve, env_id):
    server = serve(env_id)
    connection = ws(server)
    reset = ask(connection, {"type": "reset", "data": {"seed": 7, "split": "test"}})
    assert reset["type"] == "observation", reset
    assert reset["data"]["observation"]["text"] and reset["data"]["done"] is False
    assert ask(connection, {"type": "state"})["data"]["seed"] == seeds("test", 1, offset=7)[0]
    step = ask(connection, {"type": "step", "data": {"message": "I do not know."}})["data"]
    assert step["observation"]["info"]["action_valid"] is False and isinstance(step["reward"], float)
    connection.close()


def test_reset_fields_seed_split_and_options(serve):
    server = serve("freshrl/FrozenLake-v0", env_kwargs={"is_slippery": True})
    connection = ws(server)
    local = gym.make("freshrl/FrozenLake-v0", is_slippery=True).unwrapped

    def first_text(data: dict) -> str:
        return ask(connection, {"type": "reset", "data": data})["data"]["observation"]["text"]

    validation_3 = seeds("validation", 1, offset=3)[0]
    assert first_text({"seed": 3, "split": "validation"}) == local.reset(seed=validation_3)[0]
    assert first_text({"seed": validation_3}) == local.reset(seed=validation_3)[0]
    state = ask(connection, {"type": "state"})["data"]
    assert state == {
        "episode_id": None,
        "step_count": 0,
        "env_id": "freshrl/FrozenLake-v0",
        "seed": validation_3,
        "split": None,
        "done": False,
    }
    first_text({"seed": 3, "options": {"member": 1}, "episode_id": "e-1"})
    assert ask(connection, {"type": "state"})["data"]["episode_id"] == "e-1"
    first_text({"split": "test"})  # a test task drawn at random
    assert ask(connection, {"type": "state"})["data"]["seed"] in range(20_000_000, 20_100_000)
    connection.close()


# ----------------------------------------------------------------------------------------------- errors
def test_bad_messages_get_errors_and_the_session_goes_on(serve):
    server = serve("freshrl/FrozenLake-v0")
    connection = ws(server)

    def code(message) -> tuple[str, str]:
        reply = ask(connection, message)
        assert reply["type"] == "error", reply
        return reply["data"]["code"], reply["data"]["message"]

    assert code("{not json")[0] == "INVALID_JSON"
    assert code("[1, 2]")[0] == "UNKNOWN_TYPE"
    assert code({"type": "jump"}) == (
        "UNKNOWN_TYPE",
        "Unknown message type: 'jump'; send a JSON object whose type is reset, step, state or close",
    )
    assert code({"type": "step", "data": {"message": "hi"}}) == (
        "EXECUTION_ERROR",
        "step before reset: send a reset first",
    )
    assert code({"type": "reset", "data": {"seed": -1}})[0] == "VALIDATION_ERROR"
    assert "split must be one of" in code({"type": "reset", "data": {"split": "dev"}})[1]
    assert "unknown reset fields ['sed']" in code({"type": "reset", "data": {"sed": 1}})[1]
    assert "holds 100000 tasks" in code({"type": "reset", "data": {"seed": 100_000, "split": "test"}})[1]
    assert "reset failed: ValueError" in code({"type": "reset", "data": {"seed": 15_000_000}})[1]
    assert ask(connection, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
    assert (
        code({"type": "step", "data": {"text": "hi"}})[1]
        == 'the action must be {"message": "<response text>"}'
    )
    assert "extra action fields" in code({"type": "step", "data": {"message": "hi", "x": 1}})[1]
    assert ask(connection, {"type": "step", "data": {"message": "x" * 70_000}})["type"] == "observation"
    connection.close()


def test_an_oversized_message_ends_the_session_with_a_reason(serve):
    server = serve("freshrl/FrozenLake-v0", max_message_bytes=1000)
    connection = ws(server)
    reply = ask(connection, {"type": "reset", "data": {"seed": 1, "episode_id": "x" * 2000}})
    assert reply["data"]["code"] == "SESSION_ERROR" and "--max-message-bytes" in reply["data"]["message"]
    with pytest.raises(WebSocketError, match="code 1009"):
        connection.receive_text()
    connection.close()
    assert wait_for(lambda: server.sessions == 0)


def test_a_full_server_answers_capacity_reached(serve):
    server = serve("freshrl/FrozenLake-v0", max_sessions=1)
    holder = OpenEnvClientEnv(server.url)
    holder.reset(seed=0)
    with pytest.raises(OpenEnvUnavailable, match=r"CAPACITY_REACHED.*holds its 1 sessions.*--max-sessions"):
        OpenEnvClientEnv(server.url).reset(seed=0)
    holder.close()
    assert wait_for(lambda: server.sessions == 0)
    OpenEnvClientEnv(server.url).reset(seed=0)


def test_a_token_is_required_when_set(serve):
    server = serve("freshrl/FrozenLake-v0", token="s3cret")
    with pytest.raises(OpenEnvUnavailable, match="401 Unauthorized.*wants a token"):
        OpenEnvClientEnv(server.url).reset(seed=0)
    with pytest.raises(OpenEnvUnavailable, match="401"):
        OpenEnvClientEnv(server.url, token="wrong").reset(seed=0)
    assert OpenEnvClientEnv(server.url, token="s3cret").reset(seed=0)[0].startswith("text: FrozenLake")
    query = WebSocketConnection(f"ws://127.0.0.1:{server.port}/ws?token=s3cret", timeout_s=5.0)
    assert ask(query, {"type": "reset", "data": {}})["type"] == "observation"
    query.close()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(f"{server.url}/reset", data=b"{}"), timeout=5)
    assert refused.value.code == 401 and "Authorization: Bearer" in json.loads(refused.value.read())["detail"]
    with urllib.request.urlopen(f"{server.url}/health", timeout=5) as health:  # no token needed
        assert json.loads(health.read())["status"] == "healthy"
    http = OpenEnvClientEnv(server.url, transport="http", token="s3cret", observation_key="text")
    assert http.reset(seed=0)[0].startswith("FrozenLake")
    assert http.step("<answer>Up</answer>")[4]["action_valid"]


def test_the_http_routes_keep_one_env(serve):
    server = serve("freshrl/FrozenLake-v0")

    def call(path: str, payload: dict | None = None) -> dict:
        data = None if payload is None else json.dumps(payload).encode()
        with urllib.request.urlopen(urllib.request.Request(server.url + path, data=data), timeout=5) as reply:
            return json.loads(reply.read())

    with pytest.raises(urllib.error.HTTPError) as early:
        call("/step", {"action": {"message": "hi"}})
    assert early.value.code == 409
    assert call("/reset", {"seed": 5})["observation"]["text"].startswith("FrozenLake")
    assert call("/step", {"action": {"message": "<answer>Up</answer>"}})["observation"]["info"]["turn"] == 1
    assert call("/state")["step_count"] == 1
    with pytest.raises(urllib.error.HTTPError) as bad:
        call("/step", {"action": {"msg": "hi"}})
    assert bad.value.code == 422


# ----------------------------------------------------------------------------------------------- sessions
def test_a_client_that_vanishes_frees_its_session(serve):
    server = serve("freshrl/FrozenLake-v0")
    connection = ws(server)
    ask(connection, {"type": "reset", "data": {"seed": 1}})
    assert server.sessions == 1
    connection._sock.close()  # no close frame, no close message: the socket just goes
    assert wait_for(lambda: server.sessions == 0)


def test_a_silent_client_is_dropped_after_the_ping_timeout(serve):
    server = serve("freshrl/FrozenLake-v0", ping_interval_s=0.2, ping_timeout_s=0.3)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    assert wait_for(lambda: server.sessions == 1)
    assert wait_for(lambda: server.sessions == 0, seconds=3.0)  # it never answered a ping
    received = b""
    while chunk := sock.recv(65_536):
        received += chunk
    frames = received.split(b"\r\n\r\n", 1)[1]
    position = 0

    def read(count: int) -> bytes:
        nonlocal position
        position += count
        return frames[position - count : position]

    opcodes = []
    while position < len(frames):  # the server's pings, then its close frame naming the reason
        opcodes.append(read_frame(read, 1000)[1])
    assert opcodes[0] == OP_PING and opcodes[-1] == OP_CLOSE
    sock.close()


def test_the_client_keeps_its_session_while_the_policy_thinks(serve):
    server = serve("freshrl/FrozenLake-v0", ping_interval_s=0.2, ping_timeout_s=0.3)
    client = OpenEnvClientEnv(server.url, observation_key="text")
    client.reset(seed=1)
    time.sleep(1.5)  # five times the server's ping timeout
    _, _, terminated, _, info = client.step("<answer>Up</answer>")
    assert info["server_error"] == "" and info["action_valid"], info
    assert server.sessions == 1
    client.close()


def test_bad_server_arguments_name_the_problem():
    with pytest.raises(ValueError, match="cannot make 'freshrl/Nope-v0'"):
        EnvServer("freshrl/Nope-v0")
    with pytest.raises(ValueError, match="cannot make 'freshrl/FrozenLake-v0' with {'size': 'big'}"):
        EnvServer("freshrl/FrozenLake-v0", env_kwargs={"size": "big"})
    with pytest.raises(ValueError, match="plays text envs"):
        EnvServer("CartPole-v1")
    with pytest.raises(ValueError, match="max_sessions must be an integer >= 1"):
        EnvServer("freshrl/FrozenLake-v0", max_sessions=0)


class _ResetFails(FrozenLakeEnv):
    def reset(self, *, seed=None, options=None):
        raise RuntimeError("no level for you")


def test_an_env_whose_reset_fails_is_refused_before_serving():
    gym.register("freshrl-test/ResetFails-v0", entry_point=_ResetFails)
    try:
        with pytest.raises(ValueError, match="fails its first reset: RuntimeError: no level for you"):
            EnvServer("freshrl-test/ResetFails-v0")
    finally:
        gym.registry.pop("freshrl-test/ResetFails-v0")


def test_json_safe_converts_numpy_and_non_finite_values():
    value = {"a": np.int64(3), "b": np.array([1.5, 2.0]), "c": float("nan"), 4: (True, None), "d": object}
    assert json.loads(json.dumps(json_safe(value))) == {
        "a": 3,
        "b": [1.5, 2.0],
        "c": None,
        "4": [True, None],
        "d": "<class 'object'>",
    }


def test_the_command_line_prints_its_url_and_serves(tmp_path):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envs.serve",
            "freshrl/FrozenLake-v0",
            "--port",
            "0",
            "--env-config",
            '{"max_turns": 3}',
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("serving freshrl/FrozenLake-v0 over OpenEnv's protocol at http://127.0.0.1:")
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        client = OpenEnvClientEnv(url, observation_key="text")
        client.reset(seed=0)
        ends = [any(client.step("no move")[2:4]) for _ in range(3)]  # invalid: the turns count
        assert ends == [False, False, True]  # max_turns=3 from --env-config reached the env
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=10)
    bad = subprocess.run(
        [sys.executable, "-m", "envs.serve", "freshrl/FrozenLake-v0", "--env-config", "[1]"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--env-config must be a JSON object" in bad.stderr


# ----------------------------------------------------------------------------------------------- openenv-core
def test_openenv_cores_own_client_plays_the_server(serve):
    generic = pytest.importorskip("openenv.core.generic_client", reason="openenv-core is not installed")
    server = serve("freshrl/FrozenLake-v0")
    local = gym.make("freshrl/FrozenLake-v0").unwrapped
    with generic.GenericEnvClient(base_url=server.url).sync() as client:
        result = client.reset(seed=4, split="validation")
        assert result.observation["text"] == local.reset(seed=seeds("validation", 1, offset=4)[0])[0]
        assert not result.done
        result = client.step({"message": "<answer>Up</answer>"})
        expected = local.step("<answer>Up</answer>")
        assert result.observation["text"] == expected[0] and result.reward == expected[1]
        assert result.observation["info"]["success"] == expected[4]["success"]
        assert client.state()["step_count"] == 1


def test_a_servers_last_words_before_it_closes_are_read(serve):
    server = serve("freshrl/FrozenLake-v0", max_sessions=1)
    holder = ws(server)
    ask(holder, {"type": "reset", "data": {}})
    refused = ws(server)
    # The server answers and closes before any request; the keepalive thread reads both meanwhile.
    assert wait_for(lambda: refused._failure is not None)
    reply = ask(refused, {"type": "reset", "data": {}})
    assert reply["data"]["code"] == "CAPACITY_REACHED"
    with pytest.raises(WebSocketError, match="code 1013"):
        refused.receive_text()
    refused.close()
    holder.close()
