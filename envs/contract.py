"""The contract every freshrl environment is held to, as one check a user runs on their own env.

``check_env_contract(env)`` checks, for an env id (``"ns/Name-v0"`` or Gymnasium's ``"module:ns/Name-v0"``)
or a factory ``factory(**kwargs) -> env``, each property below and raises :class:`ContractViolation` naming
every property that failed and why::

    check_env         gymnasium's ``check_env`` passes, its warnings counted as failures
    never_raises      no string makes ``step`` raise or hang: a fixed list of adversarial outputs plus a
                      seeded random set built from them, the env's own prompt words and its oracle's answers;
                      every step returns an observation in the space, a finite float reward, bool
                      flags and the ``info`` keys (``format_ok``, ``action_valid``, ``action_effective``,
                      ``success``, ``turn``)
    observation_space every observation (reset on each split, then steps) lies in ``observation_space``
    invalid_output    the three policies of ``envs.base.MultiTurnEnv``: ``noop`` keeps the state and shows it,
                      ``reprompt`` keeps the state and explains the format, ``terminate`` ends the episode;
                      each turn gets ``invalid_penalty``; invalid turns count towards ``max_turns``
    determinism       ``reset(seed=s)`` and a list of responses fix the trajectory: in two envs, after a
                      reset of a used env, and (for an id) in fresh interpreters with other hash seeds;
                      different seeds give different tasks
    group             ``envs.group.make_group`` members start from the same task
    oracle            when the env has ``oracle_responses()`` (the warm start's demonstrations): it returns a
                      list of strings, asking twice changes nothing, the env accepts each answer, and it
                      solves at least ``oracle_min_success`` of the train tasks
    splits            no task leaks across splits: the first observations (text, and image bytes for vision)
                      of ``split_tasks`` train, validation and test seeds never coincide across splits
    state_key         when the env reports ``info["state_key"]`` (optional; GiGPO's step groups): every
                      info has one, hashable and equal to itself after pickling; an invalid turn keeps it;
                      tasks with different first observations never share a reset key
    tools             ``tools`` (OpenAI function schemas; optional) passes ``envs.tool_schemas.check_tools``;
                      when there are any: the oracle calls them, every valid call's ``info["tool_call"]`` is
                      ``{"id", "name", "arguments"}`` naming a declared tool, and malformed JSON or an
                      unknown tool is an invalid response whose ``reprompt`` observation says so

From pytest, ``test_contract = contract_test("mymodule:ns/Name-v0")`` makes one test per property.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import pickle
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the freshrl/... ids)
from envs.base import INVALID_OUTPUT_POLICIES, MAX_TEXT_CHARS
from envs.group import make_group
from envs.seeds import seeds as split_seeds

EnvSpec = str | Callable[..., gym.Env]

PROPERTIES = (
    "check_env",
    "never_raises",
    "observation_space",
    "invalid_output",
    "determinism",
    "group",
    "oracle",
    "splits",
    "state_key",
    "tools",
)
INFO_KEYS = ("format_ok", "action_valid", "action_effective", "success", "turn")
DEFAULT_OPTIONS: dict[str, Any] = {
    "fuzz_samples": 64,
    "split_tasks": 300,
    "oracle_episodes": 16,
    "oracle_min_success": 0.5,  # the warm start's own limit (algorithms.warm_start.demonstrations)
    "max_step_seconds": 10.0,  # a hang guard, not a benchmark: the suite's parsers take milliseconds
    "fresh_interpreter": True,
    "seed": 0,
}

# Model outputs that broke or slowed parsers here or in the suites freshrl learned from: empty and control
# strings, lone surrogates (``str.encode`` raises), unclosed and nested tags, huge numbers, special tokens,
# regex-hostile repetitions (tests/envs/test_math_equivalence.py), and a string longer than the action space.
ADVERSARIAL_RESPONSES: tuple[str, ...] = (
    "",
    " ",
    "\n\n",
    "\x00",
    "\t\r\n\x0b\x0c",
    "\x1b[31mred\x1b[0m",
    "\ud800",
    "\U0001f600",
    "\u00e9\u00e8\u00ea",
    "\u202eup",
    "<answer>",
    "</answer>",
    "<answer></answer>",
    "<answer> </answer>",
    "<answer><answer>1</answer></answer>",
    "</answer>1<answer>",
    "<ANSWER>Up</ANSWER>",
    "<answer>" + "9" * 5_000 + "</answer>",
    "<answer>-1</answer>",
    "<answer>0</answer>",
    "<answer>1e309</answer>",
    "<answer>nan</answer>",
    "<answer>inf</answer>",
    "<answer>Up, Up, Up, Up, Up, Up, Up, Up</answer>",
    "up up up up up up up up",
    "Answer: 42",
    "\\boxed{42}",
    "\\boxed{",
    "\\boxed{\\frac{1}{0}}",
    "Answer: 9^{9^{9}}",
    "<search>",
    "<search></search>",
    "<search>" + "a " * 5_000 + "</search>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|im_start|>assistant\n",
    "<tool_call>",
    "</tool_call>",
    "<tool_call></tool_call>",
    "<tool_call>{}</tool_call>",
    '<tool_call>{"name": 1, "arguments": []}</tool_call>',
    '<tool_call>{"name": "answer", "arguments": {"answer": NaN}}</tool_call>',
    '<tool_call>{"name": "search", "arguments": {"query": ' + "9" * 5_000 + "}}</tool_call>",
    "<tool_call>" + "[" * 10_000 + "</tool_call>",
    '<tool_call>{"name": "x"}</tool_call>' * 500,
    "{}",
    "%s %d {0} {x}",
    "\\\\\\",
    "(((((((((((((((((((((",
    "a" * 50_000,
    "<answer>" * 20_000,
    "\\boxed{" * 20_000,
    "Answer:" * 20_000,
    "<search>\n" * 20_000,
    ("Answer: 1\n" + "\\boxed{" * 10) * 5_000,
    "x" * (MAX_TEXT_CHARS + 1),
)
# Building blocks of the random responses (with the env's prompt words and oracle answers).
FRAGMENTS: tuple[str, ...] = (
    "<answer>", "</answer>", "<ANSWER>", "</answer", "<answer", "<search>", "</search>", "\\boxed{", "}",
    "Answer:", "Up", "down", "LEFT", "Right", ",", " ", "\n", "\r\n", "\x00", "\t", "x", "3", "-7", "0.5",
    "1/2", "\u00e9", "\U0001f600", "<|im_end|>", "upward", "<tool_call>", "</tool_call>", '{"name": ',
    '"arguments": {', '"query": ', '"answer": ', "}}", "[", "null", "true",
)  # fmt: skip
# Code point ranges the random responses draw from: ASCII, control characters, Latin-1 and accents, CJK,
# emoji, and lone surrogates.
CODE_POINTS = (
    (0x20, 0x7F),
    (0x00, 0x20),
    (0x80, 0x300),
    (0x4E00, 0x4F00),
    (0x1F600, 0x1F650),
    (0xD800, 0xD900),
)
# Candidates for a response every env rejects, tried in order by the invalid_output check.
INVALID_CANDIDATES = ("", "\x00", "no answer in this response", "???", "<answer></answer>")


class ContractViolation(AssertionError):
    """One or more contract properties failed; ``failures`` maps each property to its message."""

    def __init__(self, env: EnvSpec, failures: dict[str, str]):
        self.failures = failures
        lines = [f"{_name(env)} breaks the freshrl env contract ({len(failures)} properties):"]
        lines += [f"  [{prop}] {message}" for prop, message in failures.items()]
        lines.append("Each property is described in envs/contract.py and docs/adding_an_env.md.")
        super().__init__("\n".join(lines))


class _Failed(Exception):
    """A property's own failure, turned into a ContractViolation entry."""


def check_env_contract(
    env: EnvSpec,
    *,
    env_kwargs: dict[str, Any] | None = None,
    properties: Iterable[str] | None = None,
    **options: Any,
) -> dict[str, str]:
    """Check ``env`` against the contract; returns {property: "ok" or "skipped: <why>"}.

    Args:
        env: a registered id (``"ns/Name-v0"``, or ``"module:ns/Name-v0"`` to import ``module`` first), or a
            factory called as ``factory(**kwargs)``.
        env_kwargs: keyword arguments for every env made (``gymnasium.make(env, **env_kwargs)``).
        properties: the names to check (default: all of :data:`PROPERTIES`).
        options: any of :data:`DEFAULT_OPTIONS`: ``fuzz_samples``, random responses on top of
            :data:`ADVERSARIAL_RESPONSES` (drawn from ``seed``); ``split_tasks``, seeds per split whose first
            observations the ``splits`` check compares; ``oracle_episodes``, train tasks the oracle plays,
            of which it must solve ``oracle_min_success`` (the warm start gives up below one half);
            ``max_step_seconds``, a step slower than this (twice) counts as a hang; ``fresh_interpreter``,
            also replay the determinism check in two fresh Python processes (ids only).

    Raises:
        ContractViolation: naming every property that failed, with the response, seed or task involved.
        ValueError: an unknown property or option name.
    """
    chosen = list(PROPERTIES if properties is None else properties)
    unknown = sorted(set(chosen) - set(PROPERTIES))
    if unknown:
        raise ValueError(f"unknown contract properties {unknown}; choose from {list(PROPERTIES)}")
    report: dict[str, str] = {}
    failures: dict[str, str] = {}
    for prop in chosen:
        try:
            report[prop] = check_property(env, prop, env_kwargs=env_kwargs, **options)
        except ContractViolation as violation:
            failures.update(violation.failures)
    if failures:
        raise ContractViolation(env, failures)
    return report


def check_property(
    env: EnvSpec, prop: str, *, env_kwargs: dict[str, Any] | None = None, **options: Any
) -> str:
    """Check one property of :data:`PROPERTIES` (options as in :func:`check_env_contract`); "ok" or
    "skipped: <why>", else :class:`ContractViolation`."""
    if prop not in PROPERTIES:
        raise ValueError(f"unknown contract property {prop!r}; choose from {list(PROPERTIES)}")
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise ValueError(f"unknown contract options {unknown}; choose from {sorted(DEFAULT_OPTIONS)}")
    make = _maker(env, env_kwargs or {})
    options = {**DEFAULT_OPTIONS, **options}
    try:
        return _CHECKS[prop](env, make, env_kwargs or {}, options) or "ok"
    except _Failed as failed:
        raise ContractViolation(env, {prop: str(failed)}) from None
    except ContractViolation:
        raise
    except Exception as exc:  # the env itself raised where the contract expects it not to
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise ContractViolation(env, {prop: f"raised {last}"}) from exc


def contract_test(*env_specs: EnvSpec, env_kwargs: dict[str, Any] | None = None, **options: Any):
    """A pytest test function with one case per (env, property)::

    test_my_env_contract = contract_test("mymodule:ns/Name-v0")
    """
    import pytest

    cases = [(spec, prop) for spec in env_specs for prop in PROPERTIES]
    ids = [f"{_name(spec).split('/')[-1]}-{prop}" for spec, prop in cases]

    @pytest.mark.parametrize(("env_spec", "contract_property"), cases, ids=ids)
    def test_env_contract(env_spec: EnvSpec, contract_property: str) -> None:
        result = check_property(env_spec, contract_property, env_kwargs=env_kwargs, **options)
        if result.startswith("skipped"):
            pytest.skip(result)

    return test_env_contract


# ------------------------------------------------------------------------------------------- properties
def _check_env(env, make, kwargs, options) -> None:
    gc.collect()  # objects left unclosed before the check warn when collected, not during it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_env(make(), skip_render_check=False)
        except AssertionError as exc:
            raise _Failed(f"gymnasium's check_env failed: {exc}") from None
    # Not the env's fault: a directly constructed env has no spec to re-make in other render modes; and a
    # ResourceWarning is the garbage collector finalizing whatever object it reached during the check (a
    # socket another test left unclosed), which check_env itself never emits.
    found = [
        str(w.message)
        for w in caught
        if "alternative render modes" not in str(w.message) and not issubclass(w.category, ResourceWarning)
    ]
    if found:
        raise _Failed(f"gymnasium's check_env warned: {found[0]}")


def _never_raises(env, make, kwargs, options) -> None:
    instance = make()
    oracle = getattr(instance, "oracle_responses", None)
    queue = list(ADVERSARIAL_RESPONSES)
    queue += random_responses(instance, options["fuzz_samples"], options["seed"])
    train = split_seeds("train", 8)
    episode = 0
    history: list[str] = []  # this episode's responses so far, to replay a slow step
    instance.reset(seed=train[0])
    while queue:
        # Every other turn, move on with the oracle's answer, so later responses meet deeper states.
        answers = oracle() if oracle is not None and len(history) % 2 else []
        response = answers[0] if answers else queue.pop(0)
        seed = train[episode % len(train)]
        took = _checked_step(instance, response, seed, len(history))
        if took > options["max_step_seconds"]:
            # A first slow call may be a one-off start-up (a verifier's worker process): replay the
            # episode on a fresh env and time the step again.
            fresh = make()
            fresh.reset(seed=seed)
            for earlier in history:
                fresh.step(earlier)
            again = _checked_step(fresh, response, seed, len(history))
            if again > options["max_step_seconds"]:
                raise _Failed(
                    f"after reset(seed={seed}) and {len(history)} steps, step({_short(response)}) took "
                    f"{took:.1f} s, and {again:.1f} s again (limit {options['max_step_seconds']:g} s): bound "
                    "the parser's work"
                )
        history.append(response)
        if _is_done(instance):
            episode += 1
            history = []
            instance.reset(seed=train[episode % len(train)])


def _observation_space(env, make, kwargs, options) -> None:
    instance = make()
    space = instance.observation_space
    oracle = getattr(instance, "oracle_responses", None)
    for split in ("train", "validation", "test"):
        for seed in split_seeds(split, 4):
            observation, _ = instance.reset(seed=seed)
            _in_space(space, observation, f"reset(seed={seed})")
            for turn in range(_max_turns(instance) + 1):
                answers = oracle() if oracle is not None else []
                response = answers[0] if answers and turn % 2 == 0 else INVALID_CANDIDATES[turn % 5]
                observation, _, terminated, truncated, _ = instance.step(response)
                _in_space(space, observation, f"step {turn + 1} after reset(seed={seed}), {response[:40]!r}")
                if terminated or truncated:
                    break


def _invalid_output(env, make, kwargs, options) -> None:
    from envs.base import MultiTurnEnv

    if not isinstance(make(), MultiTurnEnv):
        raise _Failed(
            "the env does not derive from envs.base.MultiTurnEnv, which owns the invalid-output policy"
        )
    try:
        make(invalid_output="ignore")
    except ValueError:
        pass
    else:
        raise _Failed("invalid_output='ignore' was accepted; only noop | reprompt | terminate are")
    seed = split_seeds("train", 1)[0]
    penalty = -0.5
    for policy in INVALID_OUTPUT_POLICIES:
        instance, response, (before_state, before_image), step = _first_invalid(make, policy, penalty, seed)
        observation, reward, terminated, truncated, info = step
        where = f"invalid_output={policy!r}, reset(seed={seed}), step({_short(response)})"
        ended = terminated or truncated
        # A turn that ends the episode may add the task's own failure reward (Math: -1 for an unsolved
        # problem), never more than the penalty.
        if (reward != penalty and not ended) or reward > penalty:
            raise _Failed(f"{where}: reward {reward}, expected invalid_penalty {penalty}")
        if info["action_effective"] or info["success"]:
            raise _Failed(f"{where}: info says the invalid turn was effective or a success: {info}")
        text = _text(observation)
        if policy == "terminate":
            if not terminated or truncated:
                raise _Failed(f"{where}: the episode should end (terminated=True, truncated=False)")
            continue
        if terminated and instance.turn < instance.max_turns:
            raise _Failed(f"{where}: the episode ended; only 'terminate' ends it before the turn limit")
        if instance._state_text() != before_state:
            raise _Failed(f"{where}: the state changed after an invalid response")
        if policy == "noop" and text != instance._state_text():
            raise _Failed(
                f"{where}: the observation should be the unchanged state (_state_text()), got {text!r}"
            )
        if policy == "reprompt":
            reminder = instance.format_reminder()
            if not text.startswith("Invalid response:") or reminder not in text:
                raise _Failed(
                    f"{where}: the observation should start 'Invalid response:' and restate "
                    f"format_reminder() {reminder!r}; got {text[:200]!r}"
                )
        if before_image is not None and not np.array_equal(observation["image"], before_image):
            raise _Failed(f"{where}: the image changed after an invalid response")
    _invalid_turns_count(make, seed, response)


def _determinism(env, make, kwargs, options) -> None:
    seeds = [*split_seeds("train", 3), *split_seeds("validation", 1), *split_seeds("test", 1)]
    first, second = make(), make()
    scripts = {seed: _script(first, seed) for seed in seeds}
    for seed in seeds:
        a = episode_digests(first, seed, scripts[seed])
        b = episode_digests(second, seed, scripts[seed])
        if a != b:
            raise _Failed(
                f"two envs reset with seed {seed} and given the same responses differ {_first_diff(a, b)}"
            )
        again = episode_digests(first, seed, scripts[seed])
        if again != a:
            raise _Failed(
                f"a used env reset again with seed {seed} differs from its first run {_first_diff(a, again)}"
            )
    layouts = {episode_digests(first, seed, [])[0] for seed in split_seeds("train", 16)}
    if len(layouts) == 1:
        raise _Failed(
            "16 different train seeds gave the same first observation: reset(seed=...) ignores the seed, "
            "or the task is hidden from the first observation (then show what tells tasks apart, such as "
            "a range or a parameter, so that the split check can see leaks)"
        )
    module = _importable_module(env)
    if not options["fresh_interpreter"]:
        return None
    if module is None:
        return "ok (not replayed in a fresh interpreter: that needs an importable env id, not a factory)"
    expected = {str(seed): episode_digests(first, seed, scripts[seed]) for seed in seeds}
    payload = json.dumps(
        {"env": env, "module": module, "kwargs": kwargs, "scripts": {str(s): v for s, v in scripts.items()}}
    )
    code = (
        "import importlib, json, sys; import envs.contract as c;"
        "p = json.loads(sys.stdin.read()); importlib.import_module(p['module']) if p['module'] else None;"
        "e = c._maker(p['env'], p['kwargs'])();"
        "print(json.dumps({s: c.episode_digests(e, int(s), r) for s, r in p['scripts'].items()}))"
    )
    for hash_seed in ("0", "4242"):
        result = subprocess.run(
            [sys.executable, "-c", code],
            input=payload,
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise _Failed(
                f"replaying in a fresh interpreter failed: {result.stderr.strip().splitlines()[-1:]}"
            )
        if json.loads(result.stdout.strip().splitlines()[-1]) != expected:
            raise _Failed(
                f"a fresh interpreter with PYTHONHASHSEED={hash_seed} gives other tasks or trajectories: "
                "the env depends on hash() or a global RNG; draw everything from self.np_random"
            )
    return None


def _group(env, make, kwargs, options) -> None:
    factory = env if isinstance(env, str) else (lambda: make())
    for seed in split_seeds("train", 3):
        group = make_group(factory, 4, seed, **(kwargs if isinstance(env, str) else {}))
        if len({id(member) for member in group.envs}) != 4:
            raise _Failed("make_group returned one env several times")
        digests = {_digest(observation) for observation in group.observations}
        if len(digests) != 1:
            raise _Failed(
                f"the 4 members of a group reset with seed {seed} start from different observations"
            )
        if len({_digest(info) for info in group.infos}) != 1:
            raise _Failed(f"the 4 members of a group reset with seed {seed} return different reset infos")


def _oracle(env, make, kwargs, options) -> str | None:
    instance = make()
    if getattr(instance, "oracle_responses", None) is None:
        return "skipped: no oracle_responses() (the warm start needs one; see docs/adding_an_env.md)"
    solved = 0
    seeds = split_seeds("train", options["oracle_episodes"])
    for seed in seeds:
        instance.reset(seed=seed)
        success = False
        for turn in range(_max_turns(instance) + 1):
            answers = instance.oracle_responses()
            where = f"oracle_responses() at turn {turn} of reset(seed={seed})"
            if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
                raise _Failed(f"{where} returned {type(answers).__name__} {answers!r:.80}, not a list of str")
            state = _state(instance)
            if instance.oracle_responses() != answers or _state(instance) != state:
                raise _Failed(
                    f"{where}: asking again gave other answers or changed the state; it must be pure"
                )
            if not answers:
                break
            _, _, terminated, truncated, info = instance.step(answers[0])
            if not info.get("action_valid", False):
                raise _Failed(f"{where}: the env rejected the oracle's answer {answers[0]!r:.80}")
            success = success or bool(info.get("success", False))
            if terminated or truncated:
                break
        solved += success
    if solved < options["oracle_min_success"] * len(seeds):
        raise _Failed(
            f"the oracle solved {solved} of {len(seeds)} train tasks; at least "
            f"{options['oracle_min_success']:.0%} needed (the warm start learns from solved episodes only)"
        )
    return None


def _splits(env, make, kwargs, options) -> None:
    instance = make()
    count = options["split_tasks"]
    fingerprints: dict[str, dict[str, int]] = {}
    for split in ("train", "validation", "test"):
        fingerprints[split] = {}
        for seed in split_seeds(split, count):
            fingerprints[split].setdefault(episode_digests(instance, seed, [])[0], seed)
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        shared = sorted(set(fingerprints[a]) & set(fingerprints[b]))
        if shared:
            example = shared[0]
            raise _Failed(
                f"{len(shared)} first observations of the first {count} {b} seeds also appear among the "
                f"first {count} {a} seeds (e.g. {b} seed {fingerprints[b][example]} = {a} seed "
                f"{fingerprints[a][example]}): a task leaks across splits. Decide a task's split by its "
                "content (envs.seeds.split_of_content) and draw again until it matches the reset seed's "
                "split (envs.seeds.split_of_reset_seed)"
            )


def _state_key(env, make, kwargs, options) -> str | None:
    instance = make()
    seeds = split_seeds("train", 8)
    if "state_key" not in instance.reset(seed=seeds[0])[1]:
        return "ok (no info['state_key']: it is optional; GiGPO then falls back to episode advantages)"
    oracle = getattr(instance, "oracle_responses", None)
    tasks: dict[Any, tuple[str, int]] = {}  # reset key -> (first observation's digest, seed)
    for seed in seeds:
        observation, info = instance.reset(seed=seed)
        key = _checked_state_key(info, f"reset(seed={seed})")
        first, earlier = _digest(observation), tasks.setdefault(key, (_digest(observation), seed))
        if earlier[0] != first:
            raise _Failed(
                f"reset(seed={earlier[1]}) and reset(seed={seed}) start different tasks with the same "
                f"state_key {key!r:.80}: include the task's identity (map, level) in the key"
            )
        for turn in range(_max_turns(instance)):
            answers = oracle() if oracle is not None else []
            # An invalid response first, then the oracle's answer every other turn.
            response = answers[0] if answers and turn % 2 else INVALID_CANDIDATES[turn % 5]
            _, _, terminated, truncated, info = instance.step(response)
            where = f"step {turn + 1} after reset(seed={seed}), {_short(response)}"
            before, key = key, _checked_state_key(info, where)
            if not info["action_valid"] and not terminated and key != before:
                raise _Failed(
                    f"{where}: the invalid response left the state unchanged but changed state_key from "
                    f"{before!r:.80} to {key!r:.80}"
                )
            if terminated or truncated:
                break
    return None


def _checked_state_key(info: dict[str, Any], where: str) -> Any:
    """``info["state_key"]``, checked: present, hashable, and equal to itself after a pickle round trip
    (remote EnvRunners ship trajectories to the learner)."""
    if "state_key" not in info:
        raise _Failed(f"{where}: info lacks state_key, which reset's info reports; report it in every info")
    key = info["state_key"]
    try:
        hash(key)
    except TypeError:
        raise _Failed(f"{where}: state_key {key!r:.80} is not hashable; use a str or a tuple") from None
    copy = pickle.loads(pickle.dumps(key))
    if copy != key or hash(copy) != hash(key):
        raise _Failed(f"{where}: state_key {key!r:.80} is not equal to itself after pickling; use a str")
    return key


def _tools(env, make, kwargs, options) -> None:
    from envs.tool_schemas import check_tools, tool_names

    instance = make()
    try:
        tools = check_tools(getattr(instance, "tools", ()))
    except ValueError as exc:
        raise _Failed(f"the declared tools are not OpenAI function schemas: {exc}") from None
    if not tools:
        return None
    names = tool_names(tools)
    oracle = getattr(instance, "oracle_responses", None)
    seed = split_seeds("train", 1)[0]
    instance.reset(seed=seed)
    calls = 0
    for turn in range(_max_turns(instance)):
        answers = oracle() if oracle is not None else []
        if not answers:
            break
        _, _, terminated, truncated, info = instance.step(answers[0])
        call = info.get("tool_call")
        where = f"step {turn + 1} after reset(seed={seed}), {_short(answers[0])}"
        if call is not None:
            calls += 1
            if (
                not isinstance(call, dict)
                or set(call) != {"id", "name", "arguments"}
                or not isinstance(call["id"], str)
                or call["name"] not in names
                or not isinstance(call["arguments"], dict)
            ):
                raise _Failed(
                    f"{where}: info['tool_call'] is {call!r:.120}, not {{'id': str, 'name': one of {names}, "
                    "'arguments': dict}; derive tool envs from MultiTurnEnv's _parse_tool_call"
                )
        if terminated or truncated:
            break
    if oracle is not None and calls == 0:
        raise _Failed(
            f"the oracle's episode after reset(seed={seed}) calls none of the tools {names}: its "
            "demonstrations would not teach them"
        )
    bad_calls = {
        "<tool_call>{not json}</tool_call>": "JSON",
        '<tool_call>{"name": "freshrl_no_such_tool", "arguments": {}}</tool_call>': "freshrl_no_such_tool",
    }
    for response, named in bad_calls.items():
        instance = make(invalid_output="reprompt")
        instance.reset(seed=seed)
        observation, _, _, _, info = instance.step(response)
        where = f"invalid_output='reprompt', reset(seed={seed}), step({_short(response)})"
        if info["action_valid"] or "tool_call" in info:
            raise _Failed(f"{where}: the call was accepted; it must be an invalid response")
        if named not in _text(observation):
            raise _Failed(
                f"{where}: the observation should say what was wrong ({named!r}); got "
                f"{_text(observation)[:200]!r}"
            )
    return None


_CHECKS: dict[str, Callable[..., str | None]] = {
    "check_env": _check_env,
    "never_raises": _never_raises,
    "observation_space": _observation_space,
    "invalid_output": _invalid_output,
    "determinism": _determinism,
    "group": _group,
    "oracle": _oracle,
    "splits": _splits,
    "state_key": _state_key,
    "tools": _tools,
}


# ------------------------------------------------------------------------------------------- helpers
def random_responses(env: gym.Env, count: int, seed: int) -> list[str]:
    """``count`` responses drawn from ``seed``: fragments (:data:`FRAGMENTS`, the words of ``env``'s first
    train observation and its oracle's answers, whole or cut) joined at random, or random code points."""
    rng = np.random.default_rng(seed)
    observation, _ = env.reset(seed=split_seeds("train", 1)[0])
    pieces = list(FRAGMENTS) + _text(observation).split()[:40]
    oracle = getattr(env, "oracle_responses", None)
    for answer in (oracle() if oracle is not None else [])[:4]:
        pieces += [answer, answer[: len(answer) // 2], answer.upper(), answer * 3]
    responses = []
    for _ in range(count):
        if rng.random() < 0.6:
            picks = rng.integers(len(pieces), size=int(rng.integers(0, 30)))
            responses.append("".join(pieces[i] for i in picks))
        else:
            low, high = CODE_POINTS[int(rng.integers(len(CODE_POINTS)))]
            responses.append("".join(map(chr, rng.integers(low, high, size=int(rng.integers(0, 300))))))
    return responses


def episode_digests(env: gym.Env, seed: int, responses: Sequence[str]) -> list[str]:
    """Digests of ``reset(seed=seed)``'s observation and info, then of each step under ``responses``
    (stopping when the episode ends)."""
    observation, info = env.reset(seed=seed)
    digests = [_digest((observation, info))]
    for response in responses:
        observation, reward, terminated, truncated, info = env.step(response)
        digests.append(_digest((observation, round(float(reward), 9), terminated, truncated, info)))
        if terminated or truncated:
            break
    return digests


def _is_done(env: gym.Env) -> bool:
    return bool(getattr(env, "_done", False))


def _max_turns(env: gym.Env) -> int:
    return int(getattr(env, "max_turns", 64))


def _maker(env: EnvSpec, env_kwargs: dict[str, Any]) -> Callable[..., gym.Env]:
    """A function making a fresh unwrapped env, with ``env_kwargs`` and per-call overrides."""
    if isinstance(env, str):
        return lambda **overrides: gym.make(env, **{**env_kwargs, **overrides}).unwrapped
    return lambda **overrides: env(**{**env_kwargs, **overrides}).unwrapped


def _name(env: EnvSpec) -> str:
    return env if isinstance(env, str) else getattr(env, "__name__", repr(env))


def _importable_module(env: EnvSpec) -> str | None:
    """The module a fresh interpreter imports to make ``env`` ("" for ``module:id`` and freshrl ids)."""
    if not isinstance(env, str):
        return None
    if ":" in env or env in gym.registry and env.startswith("freshrl/"):
        return ""
    entry = gym.spec(env).entry_point
    module = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", None)
    return None if module in (None, "__main__") else module


def _checked_step(env: gym.Env, response: str, seed: int, turn: int) -> float:
    """Step ``env`` with ``response``; a failure names what the step returned wrong; returns its seconds."""
    where = f"after reset(seed={seed}) and {turn} steps, step({_short(response)})"
    started = time.perf_counter()
    try:
        observation, reward, terminated, truncated, info = env.step(response)
    except Exception as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise _Failed(
            f"{where} raised {last}; model output is never bad input: parse it, never raise"
        ) from exc
    took = time.perf_counter() - started
    if not isinstance(reward, float | int | np.floating) or not math.isfinite(float(reward)):
        raise _Failed(f"{where} returned reward {reward!r}, not a finite float")
    if not isinstance(terminated, bool | np.bool_) or not isinstance(truncated, bool | np.bool_):
        raise _Failed(f"{where} returned terminated={terminated!r}, truncated={truncated!r}, not bools")
    if not env.observation_space.contains(observation):
        raise _Failed(f"{where}: the observation is not in observation_space {env.observation_space}")
    missing = [key for key in INFO_KEYS if key not in info]
    if missing:
        raise _Failed(f"{where}: info lacks {missing} (derive from envs.base.MultiTurnEnv to get them)")
    return took


def _first_invalid(make, policy: str, penalty: float, seed: int):
    """The first of :data:`INVALID_CANDIDATES` the env rejects, played under ``policy`` after
    ``reset(seed=seed)``: (env, response, (state text before, image before), the step's result)."""
    for response in INVALID_CANDIDATES:
        instance = _with_turns(make, invalid_output=policy, invalid_penalty=penalty)
        observation, _ = instance.reset(seed=seed)
        before = (instance._state_text(), observation["image"] if isinstance(observation, dict) else None)
        step = instance.step(response)
        if not step[4]["action_valid"]:
            return instance, response, before, step
    raise _Failed(f"none of {list(INVALID_CANDIDATES)} was invalid: the parser accepts anything")


def _with_turns(make, **kwargs: Any) -> gym.Env:
    """An env with 3 turns where it takes ``max_turns`` (so a policy's effect is seen before the limit)."""
    try:
        return make(max_turns=3, **kwargs)
    except TypeError:
        return make(**kwargs)


def _invalid_turns_count(make, seed: int, response: str) -> None:
    """Under ``noop``, ``max_turns`` invalid responses truncate the episode at the last one, not before."""
    instance = make(invalid_output="noop")
    instance.reset(seed=seed)
    limit = _max_turns(instance)
    for turn in range(1, min(limit, 64) + 1):
        _, _, terminated, truncated, info = instance.step(response)
        if info["action_valid"]:
            return  # accepted in this later state (e.g. a number that became legal); nothing to count
        if (terminated or truncated) != (turn == limit):
            raise _Failed(
                f"invalid_output='noop': invalid turn {turn} of max_turns={limit} gave "
                f"terminated={terminated}, truncated={truncated}; invalid turns count towards the turn limit"
            )
        if terminated or truncated:
            return


def _script(env: gym.Env, seed: int) -> list[str]:
    """Responses for a determinism replay: the oracle's answers mixed with a few fixed bad ones."""
    env.reset(seed=seed)
    oracle = getattr(env, "oracle_responses", None)
    answers = oracle() if oracle is not None else []
    bad = [ADVERSARIAL_RESPONSES[i] for i in (0, 10, 17, 25)]
    return [bad[0], *answers[:1], bad[1], *answers[1:3], bad[2], *answers[3:], bad[3]]


def _state(env: gym.Env) -> str:
    state_text = getattr(env, "_state_text", None)
    return state_text() if state_text is not None else ""


def _in_space(space: gym.Space, observation: Any, where: str) -> None:
    if not space.contains(observation):
        shape = getattr(observation.get("image"), "shape", None) if isinstance(observation, dict) else None
        detail = f"image shape {shape}" if shape is not None else f"{_short(_text(observation))}"
        raise _Failed(f"the observation of {where} is not in observation_space {space} ({detail})")


def _text(observation: Any) -> str:
    return observation["text"] if isinstance(observation, dict) else str(observation)


def _short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} chars)"


def _first_diff(a: list[str], b: list[str]) -> str:
    index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return "at the first observation" if index == 0 else f"at step {index}"


def _digest(value: Any) -> str:
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()[:16]


def _feed(digest, value: Any) -> None:
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            _feed(digest, str(key))
            _feed(digest, value[key])
    elif isinstance(value, list | tuple):
        digest.update(b"[")
        for item in value:
            _feed(digest, item)
        digest.update(b"]")
    elif isinstance(value, np.ndarray):
        digest.update(f"{value.dtype}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, str):
        digest.update(value.encode("utf-8", "surrogatepass"))
    else:
        digest.update(repr(value).encode())


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m envs.contract mymodule:ns/Name-v0 [--env-config JSON]``: check an env, print the report."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m envs.contract", description=main.__doc__)
    parser.add_argument("env", nargs="+", help="env ids: ns/Name-v0 or module:ns/Name-v0")
    parser.add_argument("--env-config", default="{}", help="JSON kwargs for gymnasium.make")
    parser.add_argument("--split-tasks", type=int, default=300, help="seeds per split for the leak check")
    args = parser.parse_args(argv)
    failed = False
    for env_id in args.env:
        try:
            report = check_env_contract(
                env_id, env_kwargs=json.loads(args.env_config), split_tasks=args.split_tasks
            )
        except ContractViolation as violation:
            print(violation, flush=True)
            failed = True
            continue
        print(f"{env_id} keeps the freshrl env contract:")
        for prop, result in report.items():
            print(f"  {prop:<18} {result}")
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
