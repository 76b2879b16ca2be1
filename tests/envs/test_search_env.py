"""The search env: checker, oracle demonstrations, parsing, rewards, limits, loaders, remote retrieval."""

from __future__ import annotations

import json
import socket
import threading
import warnings

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import envs  # noqa: F401  (registers the envs)
from envs.base import MAX_TEXT_CHARS
from envs.retrieval import RetrievalError
from envs.retrieval.base import Passage
from envs.retrieval.bm25 import BM25Retriever
from envs.retrieval.http_client import HTTPRetriever
from envs.retrieval.server import RetrievalServer
from envs.search import (
    NQSearchEnv,
    _parse_action,
    exact_match,
    format_passages,
    normalize_answer,
    synthetic_setup,
)
from envs.search_data import SearchQuestion, load_questions, make_world, oracle_responses
from envs.seeds import SPLITS, seeds

RETRIEVER = synthetic_setup(0)[1]


def checked(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings(
            "ignore", message=".*alternative render modes.*"
        )  # no spec when built directly
        check_env(env)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"format_reward": 0.1, "topk": 5}, {"invalid_output": "terminate", "invalid_penalty": -0.1}],
    ids=["default", "format-reward", "terminate"],
)
def test_check_env(kwargs):
    checked(NQSearchEnv(**kwargs))


def test_made_by_id():
    env = gym.make("freshrl/NQSearch-v0", topk=2, max_turns=5)
    observation, _ = env.reset(seed=1)
    assert "Question:" in observation and env.unwrapped.topk == 2 and env.unwrapped.max_turns == 5
    checked(gym.make("freshrl/NQSearch-v0", render_mode="ansi").unwrapped)


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_oracle_answers_every_synthetic_question_from_what_it_retrieves(split):
    env = NQSearchEnv()
    world, _ = synthetic_setup(0)
    count = len(world.questions[split])
    for seed in seeds(split, count):
        env.reset(seed=seed)
        responses = env.oracle_responses()
        observations = []
        for response in responses:
            observation, reward, terminated, truncated, info = env.step(response)
            observations.append(observation)
        assert (reward, terminated, truncated) == (1.0, True, False), env.question
        assert info["success"] and info["exact_match"] and info["searches"] == len(responses) - 1
        # The answer was in a retrieved passage, not only in the oracle's head.
        assert any(env.question.answers[0] in o for o in observations[:-1]), env.question


def test_two_hop_question_needs_two_searches():
    env = NQSearchEnv()
    world, _ = synthetic_setup(0)
    index = next(i for i, q in enumerate(world.questions["train"]) if q.id.endswith("-country"))
    env.reset(seed=SPLITS["train"].start + index)
    question = env.question
    first, second, answer = env.oracle_responses()
    observation, reward, terminated, _, info = env.step(first)
    assert reward == 0.0 and not terminated and info["searches"] == 1
    assert info["query"] == question.oracle_queries[0]
    town = question.oracle_queries[1].removesuffix(" town")
    assert town in observation  # the first hop names the town ...
    assert env.oracle_responses() == [second, answer]  # ... and the oracle continues from there
    observation, _, _, _, info = env.step(second)
    assert question.answers[0] in observation and info["searches"] == 2
    _, reward, terminated, _, info = env.step(answer)
    assert reward == 1.0 and terminated and info["turn"] == 3


def test_prompt_example_is_never_parsed_as_an_answer():
    """Search-R1's reward needed two <answer> tags as its prompt held one; here only the response counts."""
    env = NQSearchEnv()
    prompt, _ = env.reset(seed=3)
    assert "<answer>" in prompt
    _, reward, terminated, _, info = env.step(f"<answer>{env.question.answers[0]}</answer>")
    assert reward == 1.0 and terminated and info["format_ok"]


def test_wrong_answer_and_format_reward():
    env = NQSearchEnv(format_reward=0.2)
    env.reset(seed=4)
    _, reward, terminated, _, info = env.step("<answer>Nowhere Special</answer>")
    assert reward == 0.2 and terminated and not info["success"] and not info["exact_match"]
    env.reset(seed=4)
    env.step("<search>something</search> and then more text")  # lenient: format not ok
    _, reward, _, _, _ = env.step("<answer>Nowhere Special</answer>")
    assert reward == 0.0
    env.reset(seed=4)
    _, reward, _, _, _ = env.step("<answer>Nowhere Special</answer>")
    assert reward == 0.2


def test_search_limit_and_turn_limit():
    env = NQSearchEnv(max_searches=1, max_turns=3)
    env.reset(seed=5)
    _, _, _, _, info = env.step("<search>first</search>")
    assert info["searches"] == 1 and info["action_effective"]
    observation, reward, terminated, truncated, info = env.step("<search>second</search>")
    assert "Search limit reached" in observation and not info["action_effective"] and info["searches"] == 1
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.oracle_responses() == [f"<answer>{env.question.answers[0]}</answer>"]
    _, reward, terminated, truncated, _ = env.step("<search>third</search>")
    assert (reward, terminated, truncated) == (0.0, False, True)


def test_invalid_responses_follow_the_policy():
    env = NQSearchEnv(invalid_penalty=-0.1)
    env.reset(seed=6)
    observation, reward, terminated, _, info = env.step("I would rather not.")
    assert reward == -0.1 and not terminated and not info["action_valid"] and info["searches"] == 0
    assert "<search>query</search>" in observation and env.question.question in observation
    env = NQSearchEnv(invalid_output="terminate")
    env.reset(seed=6)
    _, reward, terminated, _, _ = env.step("<answer></answer>")
    assert terminated and reward == 0.0


@pytest.mark.parametrize(
    ("response", "format_ok", "action"),
    [
        ("<search>capital of France</search>", True, ("search", "capital of France")),
        ("<think>I need to look.</think>\n<search> capital </search>\n", True, ("search", "capital")),
        ("<answer>Paris</answer>", True, ("answer", "Paris")),
        ("<search>a b</search> trailing words", False, ("search", "a b")),
        ("<search>q</search><answer>a</answer>", False, ("search", "q")),
        ("<answer>a</answer><search>q</search>", False, ("answer", "a")),
        ("<answer>x <search>q</search> y</answer>", True, ("answer", "x <search>q</search> y")),
        ("<search>unclosed <answer>done</answer>", True, ("answer", "done")),
        ("<think>ok</think><search>stopped at the tag", False, ("search", "stopped at the tag")),
        ("<answer>Paris", False, ("answer", "Paris")),
    ],
)
def test_parse_valid(response, format_ok, action):
    parsed = _parse_action(response)
    assert parsed.valid and (parsed.format_ok, parsed.action) == (format_ok, action)


@pytest.mark.parametrize(
    "response",
    [
        "",
        "Paris",
        "<answer></answer>",
        "<search>   </search>",
        "<answer>",
        "<search>q</answer>",
        "</search>x",
    ],
)
def test_parse_invalid(response):
    parsed = _parse_action(response)
    assert not parsed.valid and not parsed.format_ok and parsed.error


def test_parser_is_linear_on_many_unclosed_tags():
    assert not _parse_action("<search>" * 30_000 + "</answer>" * 30_000).valid
    assert _parse_action("<search>" * 30_000 + "<answer>x</answer>").action == ("answer", "x")


@pytest.mark.parametrize(
    ("prediction", "answers", "expected"),
    [
        ("Paris", ["Paris"], True),
        ("  the paris. ", ["Paris"], True),
        ("PARIS!", ["paris"], True),
        ("Paris, France", ["Paris"], False),
        ("The Amber Gate", ["Amber Gate"], True),
        ("an apple", ["Apple", "Pear"], True),
        ("pear", ["Apple", "Pear"], True),
        ("", ["Paris"], False),
        ("1,847", ["1847"], True),
    ],
)
def test_exact_match(prediction, answers, expected):
    assert exact_match(prediction, answers) is expected


def test_normalize_answer():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"


# Any seed of any split (a seed outside them is an error, tested in test_search_splits.py).
SPLIT_SEEDS = st.sampled_from(sorted(SPLITS)).flatmap(
    lambda s: st.integers(SPLITS[s].start, SPLITS[s].stop - 1)
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=5), SPLIT_SEEDS)
def test_never_raises_on_arbitrary_text(responses, seed):
    env = NQSearchEnv()
    env.reset(seed=seed)
    for response in responses:
        observation, reward, terminated, truncated, _ = env.step(response)
        assert env.observation_space.contains(observation) and reward in (0.0, 1.0)
        if terminated or truncated:
            break


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="<>/searchnwd x", max_size=60))
def test_never_raises_on_tag_soup(response):
    env = NQSearchEnv()
    env.reset(seed=0)
    env.step(response)


@pytest.mark.parametrize("policy", ["reprompt", "noop"])
def test_observations_fit_the_text_bound_after_huge_queries(policy):
    """Echoed queries are cut, old ones dropped: 100k-character queries on every turn, then invalid turns."""
    env = NQSearchEnv(max_turns=12, max_searches=8, invalid_output=policy)
    env.reset(seed=2)
    huge = "q" * 100_000
    for response in [f"<search>{huge}</search>"] * 9 + [huge, f"<search>{huge}", "nothing usable"]:
        observation, *_ = env.step(response)
        assert env.observation_space.contains(observation), len(observation)
    env.render_mode = "ansi"
    rendered = env.render()
    assert len(rendered) <= MAX_TEXT_CHARS and env.question.question in rendered


def test_many_short_searches_keep_the_latest_in_the_state_text():
    env = NQSearchEnv(max_turns=400, max_searches=400)
    env.reset(seed=2)
    for i in range(399):
        env.step(f"<search>{i:03d} {'x' * 190}</search>")
    observation, *_ = env.step("no tag")
    assert env.observation_space.contains(observation)
    assert "(earlier searches omitted)" in observation and "398 " in observation and "000 " not in observation


class RaisingRetriever:
    def __init__(self, error: Exception):
        self.error = error

    def search(self, queries: list[str], topk: int):
        raise self.error


class EmptyReplyRetriever:
    def search(self, queries: list[str], topk: int):
        return []  # no list for the query: a broken retriever


def _closed_port_client() -> HTTPRetriever:
    with socket.socket() as probe:  # bound and closed again: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return HTTPRetriever(f"http://127.0.0.1:{port}", retries=0, timeout_s=2)


@pytest.mark.parametrize(
    "retriever",
    [
        RaisingRetriever(RuntimeError("index corrupted")),
        RaisingRetriever(OSError("disk gone")),
        RaisingRetriever(RetrievalError("x" * 100_000)),
        EmptyReplyRetriever(),
        "closed-port",
    ],
    ids=["runtime-error", "os-error", "huge-message", "empty-reply", "closed-port"],
)
def test_a_failing_retriever_gives_an_observation_not_an_exception(retriever):
    if retriever == "closed-port":
        retriever = _closed_port_client()
    env = NQSearchEnv(retriever=retriever)
    env.reset(seed=3)
    with pytest.warns(UserWarning, match="search failed"):  # once, so that a dead retriever shows in logs
        observation, reward, terminated, truncated, info = env.step("<search>anything</search>")
    assert observation.startswith("search failed: ") and env.observation_space.contains(observation)
    assert len(observation) < 500
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert not info["action_effective"] and info["action_valid"] and info["format_ok"]
    assert info["search_failures"] == 1 and info["searches"] == 0
    assert env.oracle_responses()[0] == oracle_responses(env.question)[0]  # the failed search is still to do
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not again
        *_, info = env.step("<search>again</search>")
    assert info["search_failures"] == 2 and info["searches"] == 0
    _, reward, terminated, _, info = env.step(f"<answer>{env.question.answers[0]}</answer>")
    assert reward == 1.0 and terminated and info["search_failures"] == 2
    env.reset(seed=3)
    assert env.step("<answer>x</answer>")[-1]["search_failures"] == 0  # counted per episode


def test_the_closed_port_client_itself_raises():
    with pytest.raises(RetrievalError):
        _closed_port_client().search(["q"], 1)


# --------------------------------------------------------------------------------------- synthetic world


def test_world_is_deterministic_ascii_and_split_by_content():
    world = make_world(0)
    assert world == make_world(0)
    assert world.passages != make_world(1).passages
    texts = [p.contents for p in world.passages] + [q.question for qs in world.questions.values() for q in qs]
    assert all(t.isascii() for t in texts)
    prompt, _ = NQSearchEnv().reset(seed=0)
    assert prompt.isascii()

    def content(split: str) -> set[str]:
        return {pid for q in world.questions[split] for pid in q.gold_passage_ids}

    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        assert not content(a) & content(b)
    sizes = {name: len(qs) for name, qs in world.questions.items()}
    assert sizes["train"] > 5 * sizes["test"] > 0


def test_seeds_walk_a_split_in_order_and_none_draws_train():
    env = NQSearchEnv()
    world, _ = synthetic_setup(0)
    for i, seed in enumerate(seeds("test", 5)):
        env.reset(seed=seed)
        assert env.question == world.questions["test"][i]
    env.reset(seed=None)
    assert env.question in world.questions["train"]


# --------------------------------------------------------------------------------------- real data formats

NQ_ROWS = [
    {"id": "train_0", "question": "who wrote the amber gate", "golden_answers": ["Fena Bamon", "F. Bamon"]},
    {"id": "train_1", "question": "where is kempakrel?", "golden_answers": ["Dreiltulia"]},
]


def test_load_flashrag_jsonl(tmp_path):
    path = tmp_path / "nq_train.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in NQ_ROWS) + "\n")
    questions = load_questions(path)
    assert questions[0] == SearchQuestion(
        "who wrote the amber gate?", ("Fena Bamon", "F. Bamon"), id="train_0"
    )
    assert questions[1].question == "where is kempakrel?"
    assert len(load_questions(path, limit=1)) == 1


def test_load_search_r1_parquet(tmp_path):
    template = "Answer the given question. ... For example, <answer> Beijing </answer>. Question: {}\n"
    rows = [
        {
            "data_source": "nq",
            "prompt": [{"role": "user", "content": template.format("who wrote the amber gate?")}],
            "ability": "fact-reasoning",
            "reward_model": {"style": "rule", "ground_truth": {"target": ["Fena Bamon"]}},
            "extra_info": {"split": "train", "index": 0},
        }
    ]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    (question,) = load_questions(path)
    assert question.question == "who wrote the amber gate?" and question.answers == ("Fena Bamon",)


def test_load_nq_open_and_errors(tmp_path):
    path = tmp_path / "nq_open.json"
    path.write_text(json.dumps([{"question": "when was x born", "answer": ["1900", "in 1900"]}]))
    (question,) = load_questions(path)
    assert question.answers == ("1900", "in 1900") and question.id == "0"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "no answers here"}) + "\n")
    with pytest.raises(ValueError, match="no answers"):
        load_questions(bad)


def test_env_on_loaded_questions_and_a_saved_index(tmp_path):
    world = make_world(0)
    BM25Retriever.build(world.passages).save(tmp_path / "index")
    path = tmp_path / "questions.jsonl"
    chosen = world.questions["test"][:4]
    path.write_text(
        "\n".join(json.dumps({"question": q.question, "golden_answers": list(q.answers)}) for q in chosen)
    )
    env = NQSearchEnv(questions=str(path), retriever=str(tmp_path / "index"))
    for i, seed in enumerate(seeds("test", 4)):
        env.reset(seed=seed)
        assert env.question.question == chosen[i].question
        responses = env.oracle_responses()
        assert responses == oracle_responses(env.question)  # loaded: search the question, then answer
        *_, info = env.step(responses[0])
        assert info["searches"] == 1
        _, reward, *_ = env.step(responses[1])
        assert reward == 1.0


def test_env_against_a_remote_retriever():
    _, retriever = synthetic_setup(0)
    server = RetrievalServer(retriever)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        local, remote = NQSearchEnv(), NQSearchEnv(retriever=server.url)
        for seed in seeds("validation", 10):
            episodes = []
            for env in (local, remote):
                env.reset(seed=seed)
                episodes.append([env.step(r)[:2] for r in env.oracle_responses()])
            assert episodes[0] == episodes[1]
            assert episodes[1][-1] == ("Correct.", 1.0)
    finally:
        server.shutdown()
        server.server_close()


def test_loaded_questions_need_a_retriever():
    with pytest.raises(ValueError, match="retriever"):
        NQSearchEnv(questions=[SearchQuestion("q?", ("a",))])


QUESTION = SearchQuestion("Where?", ("here",))
BAD_ARGUMENTS = [
    ({"topk": 0}, ValueError, r"topk must be an integer in \[1, 50\]"),
    ({"topk": 51}, ValueError, "topk"),
    ({"topk": "3"}, ValueError, "topk"),
    ({"topk": 2.0}, ValueError, "topk"),
    ({"max_searches": -1}, ValueError, "max_searches must be an integer >= 0"),
    ({"max_searches": "3"}, ValueError, "max_searches"),
    ({"max_searches": None}, ValueError, "max_searches"),
    ({"format_reward": 1.0}, ValueError, r"format_reward must be in \[0, 1\)"),
    ({"format_reward": -0.1}, ValueError, "format_reward"),
    ({"format_reward": "0.1"}, ValueError, "format_reward"),
    ({"format_reward": float("nan")}, ValueError, "format_reward"),
    ({"world_seed": -1}, ValueError, "world_seed must be an integer >= 0"),
    ({"world_seed": "0"}, ValueError, "world_seed"),
    ({"world_seed": 1.5}, ValueError, "world_seed"),
    ({"max_turns": 0}, ValueError, "max_turns must be an integer >= 1"),
    ({"max_turns": "4"}, ValueError, "max_turns"),
    ({"invalid_output": "skip"}, ValueError, "invalid_output must be one of"),
    ({"invalid_penalty": "x"}, ValueError, "invalid_penalty must be a finite number"),
    ({"render_mode": "human"}, ValueError, "render_mode 'human' is not supported"),
    ({"retriever": 42}, TypeError, "retriever must be a Retriever, an index path or an http URL, got int"),
    ({"retriever": "no/such/index"}, FileNotFoundError, "retriever: .*no/such/index"),
    ({"retriever": "ftp://host/retrieve"}, FileNotFoundError, "retriever"),
    ({"questions": [], "retriever": RETRIEVER}, ValueError, "questions is empty"),
    ({"questions": 42, "retriever": RETRIEVER}, TypeError, "questions must be None, a .jsonl/.json/.parquet"),
    ({"questions": [{"question": "q"}], "retriever": RETRIEVER}, TypeError, r"questions\[0\] is a dict"),
    (
        {"questions": [QUESTION, SearchQuestion("", ("a",))], "retriever": RETRIEVER},
        ValueError,
        r"questions\[1\].question must be a string of 1 to 4096",
    ),
    (
        {"questions": [SearchQuestion("q" * 5000 + "?", ("a",))], "retriever": RETRIEVER},
        ValueError,
        r"questions\[0\].question",
    ),
    (
        {"questions": [SearchQuestion("q?", ())], "retriever": RETRIEVER},
        ValueError,
        r"questions\[0\].answers must be a non-empty tuple of strings",
    ),
    (
        {"questions": [SearchQuestion("q?", (1847,))], "retriever": RETRIEVER},
        ValueError,
        r"questions\[0\].answers",
    ),
    ({"questions": "no/such/file.jsonl", "retriever": RETRIEVER}, FileNotFoundError, "questions: no file"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    BAD_ARGUMENTS,
    ids=[f"{i}-{'-'.join(a[0])}" for i, a in enumerate(BAD_ARGUMENTS)],
)
def test_bad_arguments_name_the_argument_and_the_range(kwargs, error, match):
    with pytest.raises(error, match=match):
        NQSearchEnv(**kwargs)


def test_good_arguments_of_other_numeric_types():
    env = NQSearchEnv(topk=np.int64(2), max_searches=np.int32(0), format_reward=np.float32(0.5), world_seed=0)
    assert (env.topk, env.max_searches, env.format_reward) == (2, 0, 0.5)
    assert isinstance(env.topk, int)


def test_ansi_render_shows_the_question_and_the_searches():
    env = NQSearchEnv(render_mode="ansi")
    env.reset(seed=12)
    env.step("<search>some query</search>")
    rendered = env.render()
    assert (
        env.question.question in rendered and "Searches: 1/3" in rendered and "search: some query" in rendered
    )


def test_results_past_the_observation_limit_are_cut_not_the_closing_tag():
    # 50 passages of 1500 characters are more than MAX_TEXT_CHARS: the cut used to take "</information>".
    passages = [Passage(f'"Title {i}"\n' + "x" * 2000) for i in range(50)]
    observation = format_passages(passages)
    assert len(observation) <= MAX_TEXT_CHARS
    assert observation.startswith("<information>Doc 1 (Title: Title 0) x")
    assert observation.endswith("x</information>") and observation.count("</information>") == 1
    short = format_passages(passages[:3], max_chars=60)
    assert short == "<information>Doc 1 (Title: Title 0) xxxxxxxxxx</information>"
    assert len(short) == 60
    assert format_passages(passages[:2]) == format_passages(passages[:2], max_chars=10**9)
