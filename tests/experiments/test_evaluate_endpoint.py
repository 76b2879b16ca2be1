"""``python -m experiments.evaluate --endpoint``: a served model benchmarked over chat completions, against a
scripted OpenAI-compatible stub on 127.0.0.1 (``openai_stub.py``): the messages of a multi-turn episode and
the settings sent, tool calls both ways, an image part, retries, lost episodes, setup errors failing fast,
and the report (which never holds the API key)."""

from __future__ import annotations

import base64
import io
import json
import re
import time

import gymnasium as gym
import numpy as np
import pytest
from openai_stub import OpenAIStub, completion
from PIL import Image

import envs  # noqa: F401  (registers the freshrl ids)
from algorithms.endpoint_rollout import rollout_over_endpoint
from envs.seeds import seeds
from envs.tool_calls import parse_tool_calls
from experiments import evaluate
from models.chat_endpoint import (
    ChatEndpoint,
    ContextLengthExceeded,
    EndpointSetupError,
    EndpointUnavailable,
    Sampling,
    api_base,
    public_url,
)

KEY = "sk-test-secret-0123456789"
LAKE = {"size": 4, "hole_prob": 0.2, "is_slippery": False, "max_turns": 5, "max_actions_per_turn": 3}


def oracle_answers(env_id: str, task_seeds: list[int], **env_config) -> dict[str, list[str]]:
    """Each task's first observation text -> the env's oracle responses (a scripted model that solves it)."""
    env = gym.make(env_id, **env_config)
    answers = {}
    for seed in task_seeds:
        observation, _ = env.reset(seed=seed)
        text = observation if isinstance(observation, str) else observation["text"]
        answers[text] = env.unwrapped.oracle_responses()
    env.close()
    return answers


def first_text(body: dict) -> str:
    content = next(m for m in body["messages"] if m["role"] == "user")["content"]
    return content if isinstance(content, str) else content[-1]["text"]


def turn_of(body: dict) -> int:
    return sum(message["role"] == "assistant" for message in body["messages"])


def solver(answers: dict[str, list[str]]):
    """Answers each turn with the task's oracle response (a fixed move once they run out)."""

    def answer(body, headers):
        script = answers.get(first_text(body), [])
        turn = turn_of(body)
        return 200, completion(script[turn] if turn < len(script) else "<answer>Up</answer>"), {}

    return answer


def test_urls():
    assert api_base("http://h:8000") == api_base("http://h:8000/v1/") == "http://h:8000/v1"
    assert api_base("https://api.example.com/openai/v1") == "https://api.example.com/openai/v1"
    assert public_url("http://user:pw@h:8000/v1?key=x") == "http://h:8000/v1"
    with pytest.raises(ValueError, match="http"):
        api_base("h:8000")


def test_frozen_lake_episodes_send_the_conversation_and_settings():
    task_seeds = seeds("validation", 4)
    with OpenAIStub(solver(oracle_answers("freshrl/FrozenLake-v0", task_seeds, **LAKE))) as stub:
        endpoint = ChatEndpoint(stub.url + "/v1", "stub-model", api_key=KEY)
        sampling = Sampling(temperature=0.7, top_p=0.9, max_tokens=48, seed=3)
        rollout = rollout_over_endpoint(
            endpoint,
            lambda: gym.make("freshrl/FrozenLake-v0", **LAKE),
            task_seeds,
            2,
            sampling,
            max_context_tokens=1024,
            concurrency=3,
        )
    assert not rollout.lost and len(rollout.groups) == 4
    assert all(episode.success and episode.invalid_turns == 0 for g in rollout.groups for episode in g)
    assert [episode.env_seed for episode in rollout.groups[1]] == [task_seeds[1]] * 2
    assert all(episode.num_response_tokens == 5 * episode.num_turns for g in rollout.groups for episode in g)
    bodies = stub.completions()
    for body in bodies:
        assert body["model"] == "stub-model" and body["n"] == 1
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.7, 0.9, 48)
        assert isinstance(body["seed"], int) and "tools" not in body and "stop" not in body
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in stub.requests)
    # A two-turn episode: user, then user / assistant / user, as the local rollout renders it (no system
    # message: the run sets none, so the template's default applies on both sides).
    episode = next(e for g in rollout.groups for e in g if e.num_turns == 2)
    roles = [message["role"] for message in episode.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    second = next(b for b in bodies if turn_of(b) == 1 and first_text(b) == episode.messages[0]["content"])
    assert second["messages"] == episode.messages[:3]
    assert len({b["seed"] for b in bodies}) > len(bodies) // 2  # each request its own seed


def test_tool_env_gets_tools_and_its_calls_are_read_back():
    task_seeds = seeds("validation", 2)
    answers = oracle_answers("freshrl/NQSearchTools-v0", task_seeds)

    def answer(body, headers):  # a server with a tool parser: calls come back as tool_calls, no content
        call = parse_tool_calls(answers[first_text(body)][turn_of(body)]).calls[0]
        function = {"name": call.name, "arguments": json.dumps(call.arguments)}
        tool_calls = [{"id": f"srv-{turn_of(body)}", "type": "function", "function": function}]
        return 200, completion(None, tool_calls), {}

    with OpenAIStub(answer) as stub:
        rollout = rollout_over_endpoint(
            ChatEndpoint(stub.url, "stub-model"),
            lambda: gym.make("freshrl/NQSearchTools-v0"),
            task_seeds,
            1,
            Sampling(max_tokens=96),
            max_context_tokens=2048,
        )
    assert all(group[0].success and group[0].num_turns == 2 for group in rollout.groups)
    body = stub.completions()[-1]
    assert [tool["function"]["name"] for tool in body["tools"]] == ["search", "answer"]
    assistant, reply = body["messages"][1:3]
    assert assistant["tool_calls"][0]["id"] == "srv-0" and assistant["content"] is None
    assert (
        reply["role"] == "tool" and reply["tool_call_id"] == "srv-0" and "<information>" in reply["content"]
    )
    assert "Authorization" not in stub.requests[0]["headers"]  # no key, no header


def test_a_server_without_tool_parser_returns_calls_as_text():
    task_seeds = seeds("validation", 1)
    answers = oracle_answers("freshrl/NQSearchTools-v0", task_seeds)
    with OpenAIStub(lambda body, h: (200, completion(answers[first_text(body)][turn_of(body)]), {})) as stub:
        rollout = rollout_over_endpoint(
            ChatEndpoint(stub.url, "stub-model"),
            lambda: gym.make("freshrl/NQSearchTools-v0"),
            task_seeds,
            1,
            Sampling(max_tokens=96),
            max_context_tokens=2048,
        )
    assert rollout.groups[0][0].success
    assistant, reply = stub.completions()[-1]["messages"][1:3]
    assert assistant["tool_calls"][0]["function"]["name"] == "search"
    assert reply == {**reply, "role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"]}


def test_vision_env_sends_the_image_as_a_png_part():
    with OpenAIStub(lambda body, h: (200, completion("<answer>Right</answer>"), {})) as stub:
        rollout_over_endpoint(
            ChatEndpoint(stub.url, "stub-model"),
            lambda: gym.make("freshrl/FrozenLakeVision-v0", **LAKE),
            seeds("validation", 1),
            1,
            Sampling(max_tokens=48),
            max_context_tokens=1024,
        )
    env = gym.make("freshrl/FrozenLakeVision-v0", **LAKE)
    observation, _ = env.reset(seed=seeds("validation", 1)[0])
    image, text = stub.completions()[0]["messages"][0]["content"]
    assert text == {"type": "text", "text": observation["text"]}
    prefix = "data:image/png;base64,"
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith(prefix)
    png = Image.open(io.BytesIO(base64.b64decode(image["image_url"]["url"][len(prefix) :])))
    assert np.array_equal(np.asarray(png.convert("RGB")), observation["image"])


def test_an_episode_ends_at_the_context_limit_as_the_local_rollout_ends_it():
    def answer(body, headers):  # the second turn no longer fits: the server refuses it
        if turn_of(body):
            return 400, {"error": {"message": "This model's maximum context length is 64 tokens."}}, {}
        return 200, completion("<answer>Up</answer>", completion_tokens=10), {}

    with OpenAIStub(answer) as stub:
        rollout = rollout_over_endpoint(
            ChatEndpoint(stub.url, "m"),
            lambda: gym.make("freshrl/FrozenLake-v0", **LAKE),
            seeds("validation", 1),
            1,
            Sampling(max_tokens=48),
            max_context_tokens=64,
        )
    episode = rollout.groups[0][0]
    assert (episode.ended_by, episode.num_turns, episode.terminated) == ("context", 1, False)
    # The first reply's usage (20 prompt + 10 completion tokens) caps the next turn's max_tokens at 64 - 30.
    assert [body["max_tokens"] for body in stub.completions()] == [48, 34]


def test_transient_failures_are_retried_with_backoff_and_retry_after():
    script = [
        (500, {"error": {"message": "overloaded"}}, {}),
        (429, {"error": "slow down"}, {"Retry-After": "0"}),
    ]

    def answer(body, headers):
        return script.pop(0) if script else (200, completion("<answer>Up</answer>"), {})

    slept: list[float] = []
    with OpenAIStub(answer) as stub:
        endpoint = ChatEndpoint(stub.url, "m", retries=2, backoff=0.5, sleep=slept.append)
        reply = endpoint.complete([{"role": "user", "content": "hi"}], Sampling())
    assert reply.content == "<answer>Up</answer>" and reply.completion_tokens == 5
    assert 0.25 <= slept[0] <= 0.5 and slept[1] == 0.0  # jittered backoff, then the server's Retry-After


def test_timeouts_and_refused_connections_are_unavailable_not_setup_errors():
    def slow(body, headers):
        time.sleep(0.5)
        return 200, completion("late"), {}

    with OpenAIStub(slow) as stub, pytest.raises(EndpointUnavailable) as caught:
        ChatEndpoint(stub.url, "m", timeout=0.1, retries=1, sleep=lambda s: None).complete([], Sampling())
    assert caught.value.kind == "timeout" and caught.value.attempts == 2
    with pytest.raises(EndpointUnavailable) as caught:
        ChatEndpoint(stub.url, "m", retries=0).complete([], Sampling())  # the stub is gone
    assert caught.value.kind == "connection"


def test_setup_errors_and_context_length_are_not_retried():
    def answer(body, headers):
        if body["model"] == "long":
            return 400, {"error": {"message": "This model's maximum context length is 1024 tokens."}}, {}
        return 404, {"error": {"message": f"The model `{body['model']}` does not exist."}}, {}

    with OpenAIStub(answer, models=("served-a", "served-b")) as stub:
        with pytest.raises(EndpointSetupError) as caught:
            ChatEndpoint(stub.url, "wrong", api_key=KEY).complete([], Sampling())
        with pytest.raises(ContextLengthExceeded):
            ChatEndpoint(stub.url, "long").complete([], Sampling())
    assert caught.value.served_models == ("served-a", "served-b") and KEY not in str(caught.value)
    assert len(stub.completions()) == 2  # one attempt each


def run_evaluate(tmp_path, stub, *extra) -> dict:
    argv = ["--endpoint", stub.url, "--served-model", "stub-model", "--envs", "FrozenLake", "--tasks", "4",
            "--output", str(tmp_path), *extra]  # fmt: skip
    return evaluate.main(argv)


def test_evaluate_writes_the_report_and_counts_lost_episodes_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("FRESHRL_API_KEY", KEY)
    answers = oracle_answers("freshrl/FrozenLake-v0", seeds("validation", 4), **LAKE)
    solve, calls = solver(answers), []

    def answer(body, headers):  # the first request fails for good (no retries): one episode lost
        calls.append(1)
        return (503, {"error": "down"}, {}) if len(calls) == 1 else solve(body, headers)

    with OpenAIStub(answer) as stub:
        report = run_evaluate(tmp_path, stub, "--endpoint-retries", "0", "--endpoint-concurrency", "1")
    entry = report["envs"]["FrozenLake"]
    assert entry["lost"] == {**entry["lost"], "episodes": 1, "tasks_left_out": 1, "kinds": {"HTTP 503": 1}}
    assert entry["metrics"]["num_tasks"] == 3 and entry["metrics"]["success"] == 1.0
    assert entry["ended_by"] == {"env": 3} and entry["turns_without_usage"] == 0
    assert entry["sampling"] == {"temperature": 1.0, "top_p": 1.0, "max_tokens": 48, "stop": [], "seed": 0}
    assert report["endpoint"]["served_model"] == "stub-model" and report["endpoint"]["api_key_env"] == (
        "FRESHRL_API_KEY"
    )
    for name in ("report.md", "report.json", "report.png", "run.log"):
        assert (tmp_path / name).is_file()
        assert KEY.encode() not in (tmp_path / name).read_bytes()
    md = (tmp_path / "report.md").read_text()
    assert "`stub-model` at " + stub.url in md and "lost episodes 1 (HTTP 503: 1; 1 tasks left out)" in md
    assert json.loads((tmp_path / "report.json").read_text())["envs"]["FrozenLake"]["lost"]["episodes"] == 1


def test_evaluate_with_every_episode_lost_still_reports(tmp_path):
    with OpenAIStub(lambda body, h: (502, {"error": "bad gateway"}, {})) as stub:
        report = run_evaluate(tmp_path, stub, "--tasks", "2", "--endpoint-retries", "0")
    assert report["envs"]["FrozenLake"]["metrics"] is None
    assert "| FrozenLake | `stub-model` | every task lost |" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize(
    ("status", "fix"),
    [
        (404, "the server serves: other. Check --served-model 'stub-model' against the server's /v1/models"),
        (401, "API key"),
    ],
)
def test_evaluate_fails_fast_on_a_setup_error(tmp_path, status, fix):
    refuse = OpenAIStub(lambda body, h: (status, {"error": {"message": "no"}}, {}), models=("other",))
    with refuse as stub, pytest.raises(SystemExit, match=re.escape(fix)):
        run_evaluate(tmp_path, stub)
    assert len(stub.completions()) <= 8  # the episodes in flight, not one per task and retry


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--train", "2"], "leave out --train"),
        (["--checkpoint", "results/x"], "leave out --checkpoint"),
        (["--model", "smollm2"], "leave out --model"),
        (["--api-key-env", "FRESHRL_NO_SUCH_VARIABLE"], "not set"),
    ],
)
def test_evaluate_rejects_options_of_a_local_model(extra, message, capsys):
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--endpoint", "http://127.0.0.1:9", "--served-model", "m", *extra])
    assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--endpoint", "http://127.0.0.1:9"])
    assert "--served-model" in capsys.readouterr().err
