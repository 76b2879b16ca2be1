"""The OpenEnv client env against a local OpenEnv-protocol server: episodes turn by turn over both transports,
the env contract, server faults as observations, clear errors for a server that is not there, and the
WebSocket framing against RFC 6455's examples and a third-party implementation."""

from __future__ import annotations

import json
import socket
import threading
import time

import gymnasium as gym
import pytest
from openenv_fake_server import FAULTS, FakeOpenEnvServer

from envs.contract import check_env_contract, episode_digests
from envs.ecosystem import OPENENV_CLIENT_ID
from envs.ecosystem.openenv_client import OpenEnvClientEnv, OpenEnvUnavailable
from envs.ecosystem.websocket import (
    OP_TEXT,
    WebSocketConnection,
    WebSocketError,
    accept_key,
    encode_frame,
    read_frame,
)
from envs.seeds import seeds

TRANSPORTS = ("websocket", "http")


@pytest.fixture
def server():
    fake = FakeOpenEnvServer()
    try:
        yield fake
    finally:
        fake.stop()


def make(server: FakeOpenEnvServer, **kwargs) -> OpenEnvClientEnv:
    return gym.make(OPENENV_CLIENT_ID, base_url=server.url, **kwargs).unwrapped


def secret_of(env: OpenEnvClientEnv, seed: int) -> int:
    """Bisect the game of ``seed`` through the env itself; the env is left after a finished episode."""
    low, high = 1, 100
    env.reset(seed=seed)
    while True:
        guess = (low + high) // 2
        observation, *_ = env.step(str(guess))
        if "Correct!" in observation:
            return guess
        low, high = (guess + 1, high) if "Higher." in observation else (low, guess - 1)


# ----------------------------------------------------------------------------------------------- episodes
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_episode_turn_by_turn(server, transport):
    env = make(server, transport=transport, max_turns=10)
    seed = seeds("train", 1)[0]
    secret = secret_of(env, seed)
    observation, info = env.reset(seed=seed)
    assert observation == f"message: Game {seed}: guess my number from 1 to 100.\nguesses: 0"
    assert info["server_error"] == "" and info["turn"] == 0
    wrong = 1 if secret != 1 else 2
    observation, reward, terminated, truncated, info = env.step(f" {wrong} ")
    assert observation == f"message: {'Higher.' if wrong < secret else 'Lower.'}\nguesses: 1"
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, False, False)
    observation, reward, terminated, truncated, info = env.step("a guess in words")
    assert observation == "message: Say a number.\nguesses: 2" and info["action_valid"]
    observation, reward, terminated, truncated, info = env.step(str(secret))
    assert observation == "message: Correct!\nguesses: 3"
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["success"] and info["action_valid"] and info["server_error"] == "" and info["turn"] == 3
    env.close()


def test_the_turn_limit_truncates(server):
    env = make(server, max_turns=2)
    env.reset(seed=seeds("train", 1)[0])
    assert env.step("0")[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step("0")
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)


def test_a_seed_fixes_the_game_and_seeds_differ(server):
    env = make(server)
    train = seeds("train", 8)
    script = ["50", "", "25", "75", "x" * 70_000, "\ud800", "12"]
    assert episode_digests(env, train[0], script) == episode_digests(make(server), train[0], script)
    assert len({secret_of(env, seed) for seed in train}) > 1


def test_success_needs_the_success_reward(server):
    env = make(server, success_reward=2.0)
    seed = seeds("train", 1)[0]
    secret = secret_of(env, seed)
    env.reset(seed=seed)
    _, reward, terminated, _, info = env.step(str(secret))
    assert reward == 1.0 and terminated and not info["success"]


def test_every_session_keeps_its_own_game(server):
    a, b = make(server), make(server)
    seed_a, seed_b = seeds("train", 2)
    secret_a, secret_b = secret_of(a, seed_a), secret_of(b, seed_b)
    a.reset(seed=seed_a)
    b.reset(seed=seed_b)
    for _ in range(2):  # interleaved turns on two WebSocket sessions of one server
        assert "guesses" in a.step("0")[0] and "guesses" in b.step("0")[0]
    assert a.step(str(secret_a))[2] and b.step(str(secret_b))[2]


def test_the_env_contract(server):
    report = check_env_contract(
        lambda **kwargs: OpenEnvClientEnv(server.url, **kwargs),
        fuzz_samples=16,
        split_tasks=20,
        fresh_interpreter=False,
    )
    assert report["oracle"].startswith("skipped")  # an arbitrary server has no oracle
    assert all(result.startswith("ok") for prop, result in report.items() if prop != "oracle"), report


# ----------------------------------------------------------------------------------------------- mapping
def test_build_action_and_observation_text(server):
    def digits_only(response: str) -> dict:
        if not response.strip().isdigit():
            raise ValueError("answer with a number only")
        return {"message": response.strip(), "metadata": {"source": "test"}}

    env = make(
        server,
        build_action=digits_only,
        observation_text=lambda observation: observation["message"].upper(),
        reminder="Answer with a number only.",
    )
    observation, _ = env.reset(seed=seeds("train", 1)[0])
    assert observation.startswith("GAME ")
    observation, reward, terminated, _, info = env.step("fifty")
    assert not info["action_valid"] and reward == env.invalid_penalty and not terminated
    assert observation.startswith("Invalid response: ValueError: answer with a number only.")
    assert "Answer with a number only." in observation and observation.endswith(
        "GUESS MY NUMBER FROM 1 TO 100."
    )
    observation, _, _, _, info = env.step("0")
    assert info["action_valid"] and observation == "HIGHER."


def test_observation_key_shows_one_field(server):
    env = make(server, observation_key="message")
    observation, _ = env.reset(seed=seeds("train", 1)[0])
    assert observation.startswith("Game ") and "guesses" not in observation
    with pytest.raises(ValueError, match=r"observation_key 'text' is not a field.*\['guesses', 'message'\]"):
        make(server, observation_key="text").reset(seed=0)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_action_the_server_refuses_is_an_invalid_response(server, transport):
    env = make(
        server, transport=transport, build_action=lambda r: {"message": r, "confidence": 1}, max_turns=3
    )
    observation, _ = env.reset(seed=seeds("train", 1)[0])
    text, reward, terminated, truncated, info = env.step("50")
    assert not info["action_valid"] and info["format_ok"] and reward == env.invalid_penalty
    assert not terminated and not truncated and info["server_error"] == ""
    assert text.startswith("Invalid response: the server rejected the action") and "confidence" in text
    assert text.endswith(observation)  # the server's env did not step


def test_a_failing_observation_text_falls_back_to_the_fields(server):
    env = make(server, observation_text=lambda observation: observation["missing"])
    with pytest.warns(UserWarning, match="observation_text failed"):
        observation, _ = env.reset(seed=seeds("train", 1)[0])
    assert observation.startswith("message: Game ")


# ----------------------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("fault", FAULTS)
def test_a_server_fault_during_a_step_ends_the_episode_with_an_observation(server, transport, fault):
    env = make(server, transport=transport, timeout_s=0.5)
    env.reset(seed=seeds("train", 1)[0])
    server.fault = fault
    observation, reward, terminated, truncated, info = env.step("0")
    assert observation.startswith("The environment server failed: ") and observation.endswith(
        "The episode ends."
    )
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["action_valid"] and not info["action_effective"] and not info["success"]
    assert info["server_error"] and info["server_error"] in observation
    assert env.observation_space.contains(observation)
    server.stopping.set()  # release a hanging handler
    observation, info = env.reset(seed=seeds("train", 1)[0])  # a fresh session plays on
    assert observation.startswith("message: Game ") and info["server_error"] == ""


def test_a_server_that_dies_mid_episode(server):
    env = make(server)
    env.reset(seed=seeds("train", 1)[0])
    assert env.step("0")[0].startswith("message: Higher.")
    server.stop()
    observation, reward, terminated, _, info = env.step("25")
    assert observation.startswith("The environment server failed: ") and terminated and reward == 0.0
    with pytest.raises(
        OpenEnvUnavailable, match=rf"OpenEnv server at {server.url} gave no first observation"
    ):
        env.reset(seed=0)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reset_against_no_server_names_the_url_and_the_fix(transport):
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    env = gym.make(OPENENV_CLIENT_ID, base_url=url, transport=transport, timeout_s=2.0).unwrapped
    with pytest.raises(OpenEnvUnavailable, match=rf"at {url} gave no first observation.*Start the server"):
        env.reset(seed=0)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_at_reset_raises_a_clear_error(server, fault):
    env = make(server, timeout_s=0.5)
    server.fault = fault
    with pytest.raises(
        OpenEnvUnavailable, match=rf"OpenEnv server at {server.url} gave no first observation"
    ):
        env.reset(seed=0)
    server.stopping.set()


def test_a_full_server_names_its_capacity():
    fake = FakeOpenEnvServer(max_sessions=1)
    try:
        holder = make(fake)  # holds the one session while it is referenced
        holder.reset(seed=0)
        with pytest.raises(OpenEnvUnavailable, match="CAPACITY_REACHED"):
            make(fake).reset(seed=0)
        holder.close()
        deadline = time.monotonic() + 10
        while fake.sessions and time.monotonic() < deadline:  # the server ends the session on its own thread
            time.sleep(0.01)
        make(fake).reset(seed=0)  # the closed env freed its session
    finally:
        fake.stop()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "localhost:8000"}, "base_url must be an http"),
        ({"base_url": "http://127.0.0.1:1", "transport": "grpc"}, "transport must be one of"),
        ({"base_url": "http://127.0.0.1:1", "action_key": ""}, "action_key must be a non-empty string"),
        ({"base_url": "http://127.0.0.1:1", "timeout_s": 0}, "timeout_s must be > 0"),
        ({"base_url": "http://127.0.0.1:1", "reset_kwargs": {"seed": 1}}, "must not hold 'seed'"),
        ({"base_url": "http://127.0.0.1:1", "reset_kwargs": {"x": {1, 2}}}, "reset_kwargs must be JSON"),
        ({"base_url": "http://127.0.0.1:1", "max_turns": 0}, "max_turns must be an integer"),
        (
            {"base_url": "http://127.0.0.1:1", "observation_key": "a", "observation_text": str},
            "observation_key or observation_text, not both",
        ),
    ],
)
def test_bad_arguments_name_the_problem(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        gym.make(OPENENV_CLIENT_ID, **kwargs)


# ----------------------------------------------------------------------------------------------- WebSocket
def test_frames_match_rfc6455_examples():
    # RFC 6455 section 1.3 (the handshake) and section 5.7 (a single-frame text message, unmasked and masked).
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    assert encode_frame(OP_TEXT, b"Hello", mask=False) == bytes.fromhex("810548656c6c6f")
    masked = bytes.fromhex("818537fa213d7f9f4d5158")
    assert read_frame(_reader(masked), 100) == (True, OP_TEXT, b"Hello")
    for size, header in ((256, "817e0100"), (65_536, "817f0000000000010000")):
        frame = encode_frame(OP_TEXT, b"a" * size, mask=False)
        assert frame.startswith(bytes.fromhex(header))
        assert read_frame(_reader(frame), size) == (True, OP_TEXT, b"a" * size)
        with pytest.raises(WebSocketError, match="exceeds the limit"):
            read_frame(_reader(frame), size - 1)
    masked_long = encode_frame(OP_TEXT, "\u00e9\U0001f600".encode() * 100, mask=True)
    assert read_frame(_reader(masked_long), 10_000)[2].decode() == "\u00e9\U0001f600" * 100


def _reader(data: bytes):
    view = memoryview(data)

    def read(count: int) -> bytes:
        nonlocal view
        chunk, view = bytes(view[:count]), view[count:]
        assert len(chunk) == count
        return chunk

    return read


def test_the_client_talks_to_a_third_party_websocket_server():
    sync_server = pytest.importorskip("websockets.sync.server")

    def handler(connection):
        for message in connection:
            if message == "fragments":
                connection.send(iter(["frag", "ments"]))  # one message in two frames
            else:
                connection.send(message)

    with sync_server.serve(handler, "127.0.0.1", 0) as ws_server:
        thread = threading.Thread(target=ws_server.serve_forever, daemon=True)
        thread.start()
        try:
            port = ws_server.socket.getsockname()[1]
            connection = WebSocketConnection(f"ws://127.0.0.1:{port}/", timeout_s=5.0)
            for text in ("hello", "\u00e9\U0001f600" * 40_000, "fragments", ""):
                connection.send_text(text)
                assert connection.receive_text() == text
            connection.close()
        finally:
            ws_server.shutdown()
            thread.join(timeout=10)


def test_the_fake_server_speaks_websocket_to_a_third_party_client(server):
    sync_client = pytest.importorskip("websockets.sync.client")
    with sync_client.connect(server.url.replace("http", "ws") + "/ws") as connection:
        connection.send(json.dumps({"type": "reset", "data": {"seed": 3}}))
        reply = json.loads(connection.recv(timeout=5))
    assert reply["type"] == "observation" and reply["data"]["observation"]["message"].startswith("Game 3:")


# ----------------------------------------------------------------------------------------------- keepalive
PING_INTERVAL_S, PING_TIMEOUT_S, THINKING_S = 0.2, 0.3, 1.5


@pytest.fixture
def pinging_server():
    """An OpenEnv-style echo server that pings every 0.2 s and drops a client silent for 0.3 s after a ping
    (uvicorn's keepalive, 100 times faster), on the ``websockets`` library."""
    sync_server = pytest.importorskip("websockets.sync.server")

    def handler(connection):
        for raw in connection:
            message = json.loads(raw)
            if message["type"] == "close":
                return
            reply = {"observation": {"message": f"echo {message.get('data')}"}, "reward": 0.0, "done": False}
            connection.send(json.dumps({"type": "observation", "data": reply}))

    with sync_server.serve(
        handler, "127.0.0.1", 0, ping_interval=PING_INTERVAL_S, ping_timeout=PING_TIMEOUT_S
    ) as ws_server:
        thread = threading.Thread(target=ws_server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{ws_server.socket.getsockname()[1]}"
        finally:
            ws_server.shutdown()
            thread.join(timeout=10)


def test_a_session_outlives_the_servers_ping_timeout_while_the_policy_thinks(pinging_server):
    env = gym.make(OPENENV_CLIENT_ID, base_url=pinging_server, timeout_s=5.0).unwrapped
    env.reset(seed=0)
    time.sleep(THINKING_S)  # five times the server's ping timeout, with no request in flight
    observation, _, terminated, _, info = env.step("move")
    assert info["server_error"] == "" and not terminated, info["server_error"]
    assert observation == "message: echo {'message': 'move'}"
    env.close()


def test_the_keepalive_thread_ends_on_close_and_on_drop(pinging_server):
    ws_url = pinging_server.replace("http", "ws") + "/ws"
    threads = []
    for closes in (True, False):
        running = set(threading.enumerate())
        connection = WebSocketConnection(ws_url, timeout_s=5.0)
        (keepalive,) = [t for t in set(threading.enumerate()) - running if t.name == "websocket-keepalive"]
        threads.append(keepalive)
        assert keepalive.is_alive()
        if closes:
            connection.close()
        del connection  # dropped: the thread holds no reference that would keep it alive
    for thread in threads:
        thread.join(timeout=5)
        assert not thread.is_alive()
