"""The math env: checker, oracle demonstrations, rewards and turns, seed splits, datasets and loaders."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.math_data import (
    DIFFICULTIES,
    KINDS,
    PROMPT_SUFFIX,
    MathProblem,
    demonstration,
    generate_problem,
    load_aime,
    load_dapo_math,
    load_problems,
    problem_split,
)
from envs.math_equivalence import is_equivalent
from envs.math_task import MathEnv
from envs.seeds import SPLITS, seeds

# Any seed of any split (a seed outside them is an error, tested in test_math_splits.py).
SPLIT_SEEDS = st.sampled_from(sorted(SPLITS)).flatmap(
    lambda s: st.integers(SPLITS[s].start, SPLITS[s].stop - 1)
)
HALF = MathProblem(prompt=f"What is 1/2 as a fraction?\n\n{PROMPT_SUFFIX}", answer="\\frac{1}{2}")


def checked(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings(
            "ignore", message=".*alternative render modes.*"
        )  # no spec when built directly
        check_env(env)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"difficulty": None}, {"max_turns": 3}, {"invalid_output": "terminate"}, {"dataset": [HALF]}],
    ids=["default", "mixed", "multi-turn", "terminate", "dataset"],
)
def test_check_env(kwargs):
    checked(MathEnv(**kwargs))


@pytest.mark.parametrize("difficulty", [*DIFFICULTIES, None])
def test_oracle_solves_every_problem(difficulty):
    env = MathEnv(difficulty=difficulty)
    for seed in seeds("train", 100) + seeds("test", 50):
        env.reset(seed=seed)
        (response,) = env.oracle_responses()
        _, reward, terminated, truncated, info = env.step(response)
        assert (reward, terminated, truncated) == (1.0, True, False), env.problem
        assert info["success"] and info["format_ok"] and info["correct"]
        assert info["source"].startswith("generated/")
        assert env.oracle_responses() == []


def test_generator_covers_every_kind_and_level_and_is_ascii():
    rng = np.random.default_rng(0)
    sources = set()
    for _ in range(400):
        for level in DIFFICULTIES:
            problem = generate_problem(rng, level)
            sources.add(problem.source)
            assert problem.prompt.isascii() and problem.solution.isascii()
            assert problem.prompt.endswith(PROMPT_SUFFIX)
            assert is_equivalent(problem.answer, str(int(problem.answer)))
    assert sources == {f"generated/{kind}/{level}" for kind in KINDS for level in DIFFICULTIES}


def test_generator_answers_are_right():
    """Re-derive each answer from the problem text, independently of the worked solution."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        problem = generate_problem(rng, None)
        text = problem.prompt.split("\n")[0]
        kind = problem.source.split("/")[1]
        expected = None
        if kind == "arithmetic":
            expected = eval(text.removeprefix("What is ").removesuffix("?"))  # only digits and + - * ( )
        elif kind == "modular":
            body = text.removeprefix("What is the remainder when ").removesuffix("?")
            value, modulus = body.split(" is divided by ")
            expected = eval(value.replace("^", "**")) % int(modulus)
        if expected is not None:
            assert int(problem.answer) == expected, text


def test_same_seed_same_problem_and_seeds_vary():
    env = MathEnv(difficulty=None)
    prompts = []
    for seed in seeds("train", 30):
        first, _ = env.reset(seed=seed)
        again, _ = env.reset(seed=seed)
        assert first == again
        prompts.append(first)
    assert len(set(prompts)) >= 25


def test_splits_never_share_a_problem():
    env = MathEnv(difficulty=1)
    by_split = {}
    for split in ("train", "validation", "test"):
        problems = set()
        for seed in seeds(split, 300):
            env.reset(seed=seed)
            assert problem_split(env.problem) == split
            problems.add(env.problem.prompt)
        by_split[split] = problems
    assert not by_split["train"] & by_split["test"]
    assert not by_split["train"] & by_split["validation"]
    assert not by_split["validation"] & by_split["test"]


def test_wrong_answer_ends_a_single_turn_episode_with_minus_one():
    env = MathEnv()
    env.reset(seed=5)
    wrong = str(int(env.problem.answer) + 1)
    _, reward, terminated, truncated, info = env.step(f"Answer: {wrong}")
    assert (reward, terminated, truncated) == (-1.0, True, False)
    assert info["answer"] == wrong and not info["correct"] and not info["success"]


def test_multi_turn_feedback_then_success():
    env = MathEnv(max_turns=3)
    env.reset(seed=6)
    wrong = str(int(env.problem.answer) + 1)
    observation, reward, terminated, _, _ = env.step(f"Answer: {wrong}")
    assert reward == 0.0 and not terminated
    assert f"Your answer {wrong} is incorrect" in observation and "2 tries left" in observation
    _, reward, terminated, _, info = env.step(env.oracle_responses()[0])
    assert reward == 1.0 and terminated and info["success"] and info["turn"] == 2


def test_multi_turn_return_is_minus_one_when_never_solved():
    env = MathEnv(max_turns=3)
    env.reset(seed=7)
    wrong = str(int(env.problem.answer) + 1)
    rewards = []
    for _ in range(3):
        _, reward, terminated, truncated, _ = env.step(f"Answer: {wrong}")
        rewards.append(reward)
    assert rewards == [0.0, 0.0, -1.0] and terminated and not truncated


@pytest.mark.parametrize(
    ("policy", "max_turns", "rewards", "ends"),
    [
        ("reprompt", 1, [-1.5], [True]),
        ("terminate", 3, [-1.5], [True]),
        ("noop", 2, [-0.5, -1.5], [False, True]),
        ("reprompt", 2, [-0.5, -1.5], [False, True]),
    ],
)
def test_invalid_responses(policy, max_turns, rewards, ends):
    """Return = -1 (not solved) plus the penalty per invalid response, under every policy."""
    env = MathEnv(max_turns=max_turns, invalid_output=policy, invalid_penalty=-0.5)
    prompt, _ = env.reset(seed=8)
    for reward, end in zip(rewards, ends, strict=True):
        observation, r, terminated, truncated, info = env.step("I have no idea.")
        assert (r, terminated, truncated) == (reward, end, False)
        assert not info["format_ok"] and not info["action_valid"] and info["answer"] == ""
        if policy == "noop" and not end:
            assert observation == prompt
        if policy == "reprompt" and not end:
            assert "Answer: <answer>" in observation


def test_lenient_answer_is_scored_but_not_well_formed():
    env = MathEnv()
    env.reset(seed=9)
    _, reward, _, _, info = env.step(f"Answer: {env.problem.answer}\nThat was easy.")
    assert reward == 1.0 and not info["format_ok"] and info["action_valid"]


def test_boxed_answer_is_accepted():
    env = MathEnv()
    env.reset(seed=10)
    _, reward, _, _, info = env.step(f"The result is $\\boxed{{{env.problem.answer}}}$.")
    assert reward == 1.0 and info["format_ok"]


def test_dataset_seeds_visit_every_problem_once_in_order():
    problems = [MathProblem(prompt=f"P{i}", answer=str(i)) for i in range(7)]
    env = MathEnv(dataset=problems)
    visited = []
    for seed in seeds("test", 7):
        env.reset(seed=seed)
        visited.append(env.problem)
    assert visited == problems
    env.reset(seed=None)
    assert env.problem in problems


@pytest.mark.parametrize(
    ("response", "answer", "reward"),
    [
        ("Answer: 42 is wrong", "42", -1.0),
        ("Answer: 42 not", "42", -1.0),
        ("Answer: 42 or 43", "42", -1.0),
        ("Answer: not 42", "42", -1.0),
        ("Answer: -42", "42", -1.0),
        ("Answer: 42 cm", "42", 1.0),
        ("Answer: \\frac{84}{2}", "42", 1.0),
        ("Answer: 2^{10}", "1024", 1.0),
    ],
)
def test_the_env_scores_what_the_verifier_decides(response, answer, reward):
    """The verifier's edge cases end to end: trailing non-unit words do not score, integer expressions do."""
    env = MathEnv(dataset=[MathProblem(prompt=f"Find it.\n\n{PROMPT_SUFFIX}", answer=answer)])
    env.reset(seed=0)
    assert env.step(response)[1] == reward


def test_symbolic_dataset_answer():
    env = MathEnv(dataset=lambda: [HALF])
    env.reset(seed=0)
    _, reward, *_ = env.step("Half is\nAnswer: 0.5")
    assert reward == 1.0


BAD_ARGUMENTS = [
    ({"difficulty": 4}, ValueError, r"difficulty must be one of \(1, 2, 3\) or None"),
    ({"difficulty": 0}, ValueError, "difficulty"),
    ({"difficulty": "2"}, ValueError, "difficulty"),
    ({"difficulty": 2.0}, ValueError, "difficulty"),
    ({"difficulty": True}, ValueError, "difficulty"),
    ({"max_turns": 0}, ValueError, "max_turns must be an integer >= 1"),
    ({"max_turns": "4"}, ValueError, "max_turns"),
    ({"max_turns": 2.5}, ValueError, "max_turns"),
    ({"max_turns": True}, ValueError, "max_turns"),
    ({"invalid_output": "ignore"}, ValueError, "invalid_output must be one of"),
    ({"invalid_output": None}, ValueError, "invalid_output"),
    ({"invalid_penalty": "-0.1"}, ValueError, "invalid_penalty must be a finite number"),
    ({"invalid_penalty": float("nan")}, ValueError, "invalid_penalty"),
    ({"invalid_penalty": None}, ValueError, "invalid_penalty"),
    ({"check_timeout_s": 0}, ValueError, r"check_timeout_s must be in \(0, 60.0\]"),
    ({"check_timeout_s": -1.0}, ValueError, "check_timeout_s"),
    ({"check_timeout_s": 3600}, ValueError, "check_timeout_s"),
    ({"check_timeout_s": float("inf")}, ValueError, "check_timeout_s"),
    ({"check_timeout_s": "1"}, ValueError, "check_timeout_s"),
    ({"render_mode": "human"}, ValueError, "render_mode 'human' is not supported"),
    ({"render_mode": "rgb_array"}, ValueError, "render_mode"),
    ({"dataset": []}, ValueError, "dataset is empty"),
    ({"dataset": lambda: []}, ValueError, "dataset is empty"),
    ({"dataset": 42}, TypeError, "dataset must be None, a .parquet/.jsonl/.json path"),
    ({"dataset": lambda: 42}, TypeError, "dataset must be"),
    ({"dataset": {"prompt": "p"}}, TypeError, "dataset must be"),
    ({"dataset": [{"prompt": "p", "answer": "1"}]}, TypeError, r"dataset\[0\] is a dict"),
    ({"dataset": [HALF, "What is 1 + 1?"]}, TypeError, r"dataset\[1\] is a str"),
    ({"dataset": [MathProblem("", "1")]}, ValueError, r"dataset\[0\].prompt must be a string of 1 to"),
    ({"dataset": [MathProblem("p" * 70_000, "1")]}, ValueError, r"dataset\[0\].prompt"),
    ({"dataset": [MathProblem("p", " ")]}, ValueError, r"dataset\[0\].answer must be a non-empty string"),
    ({"dataset": [MathProblem("p", 7)]}, ValueError, r"dataset\[0\].answer"),
    ({"dataset": "no/such/file.jsonl"}, FileNotFoundError, "dataset: no file at 'no/such/file.jsonl'"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    BAD_ARGUMENTS,
    ids=[f"{i}-{'-'.join(a[0])}" for i, a in enumerate(BAD_ARGUMENTS)],
)
def test_bad_arguments_name_the_argument_and_the_range(kwargs, error, match):
    with pytest.raises(error, match=match):
        MathEnv(**kwargs)


def test_good_arguments_of_other_numeric_types():
    env = MathEnv(difficulty=np.int64(2), max_turns=np.int32(2), invalid_penalty=np.float32(-0.5))
    assert (env.difficulty, env.max_turns, env.invalid_penalty) == (2, 2, -0.5)
    assert MathEnv(check_timeout_s=2).check_timeout_s == 2.0 and MathEnv(difficulty=None).difficulty is None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=4), SPLIT_SEEDS)
def test_never_raises_on_arbitrary_text(responses, seed):
    env = MathEnv(max_turns=3)
    env.reset(seed=seed)
    for response in responses:
        observation, reward, terminated, truncated, info = env.step(response)
        assert isinstance(observation, str) and env.observation_space.contains(observation)
        assert reward in (1.0, 0.0, -1.0)
        if terminated or truncated:
            break


# --------------------------------------------------------------------------------------- loaders

DAPO_INSTRUCTION = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n{}\n\nRemember to put "
    'your answer on its own line after "Answer:".'
)


def write_dapo_parquet(path, rows):
    table = pa.Table.from_pylist(
        [
            {
                "data_source": "math_dapo",
                "prompt": [{"content": DAPO_INSTRUCTION.format(problem), "role": "user"}],
                "ability": "MATH",
                "reward_model": {"ground_truth": answer, "style": "rule"},
                "extra_info": {"index": str(i)},
            }
            for i, (problem, answer) in enumerate(rows)
        ]
    )
    pq.write_table(table, path)


def test_load_dapo_math_dedupes_repeated_prompts(tmp_path):
    path = tmp_path / "dapo-math-17k.parquet"
    write_dapo_parquet(
        path, [("Find 2+2.", "4"), ("Find 3*3.", "9"), ("Find 2+2.", "4"), ("Find 1-5.", "-4")]
    )
    problems = load_dapo_math(path)
    assert [p.answer for p in problems] == ["4", "9", "-4"]
    assert problems[0].prompt == DAPO_INSTRUCTION.format("Find 2+2.")
    assert problems[0].source == "math_dapo"
    assert len(load_dapo_math(path, dedupe=False)) == 4
    assert len(load_dapo_math(path, limit=2)) == 2
    assert load_problems(path) == problems
    env = MathEnv(dataset=str(path))
    env.reset(seed=seeds("train", 1)[0])
    assert env.step(env.oracle_responses()[0])[1] == 1.0


def test_load_aime_column_variants(tmp_path):
    jsonl = tmp_path / "aime_2024.jsonl"
    rows = [{"ID": "2024-I-1", "Problem": "Find x.", "Solution": "x is 204.", "Answer": 204}]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    parquet = tmp_path / "aime_2025.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "Find y.", "answer": "033"}]), parquet)
    listing = tmp_path / "aime.json"
    listing.write_text(json.dumps([{"problem": "Find z.", "ground_truth": "70", "id": 3}]))

    (first,) = load_aime(jsonl)
    assert first == MathProblem(f"Find x.\n\n{PROMPT_SUFFIX}", "204", "x is 204.", "aime")
    assert demonstration(first) == "x is 204.\nAnswer: 204"
    (second,) = load_aime(parquet)
    assert second.answer == "033" and second.prompt.startswith("Find y.") and second.solution == ""
    assert demonstration(second) == "Answer: 033"
    assert load_problems(listing)[0].answer == "70"
    assert is_equivalent("33", second.answer)


def test_dapo_format_eval_file_loads_through_load_problems(tmp_path):
    """DAPO also publishes AIME 2024 in its own prompt/reward_model format."""
    path = tmp_path / "aime-2024.parquet"
    write_dapo_parquet(path, [("AIME problem one", "204"), ("AIME problem two", "25")])
    assert [p.answer for p in load_problems(path)] == ["204", "25"]


def test_loader_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "no problem column", "label": 3}) + "\n")
    with pytest.raises(ValueError, match="problem column"):
        load_aime(bad)
    with pytest.raises(ValueError, match="unsupported"):
        load_problems(tmp_path / "data.csv")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no rows"):
        load_problems(empty)


def test_ansi_render_shows_the_problem():
    env = MathEnv(render_mode="ansi")
    prompt, _ = env.reset(seed=11)
    assert env.render() == prompt
    assert MathEnv().render() is None
