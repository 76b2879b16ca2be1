"""Question answering with a search tool (Search-R1's protocol), over NQ or a synthetic corpus."""

from __future__ import annotations

import functools
import re
import string
import warnings
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from envs.base import MAX_TEXT_CHARS, MultiTurnEnv, Outcome, Parsed, check_int, check_real
from envs.retrieval.base import Passage, Retriever
from envs.retrieval.bm25 import BM25Retriever
from envs.retrieval.http_client import HTTPRetriever
from envs.search_data import SearchQuestion, SyntheticWorld, load_questions, make_world, oracle_plan
from envs.seeds import SPLITS, split_of_reset_seed

PROMPT = (
    "Answer the question. To search, write <search>query</search>; the results come back in "
    "<information>...</information>. You can search up to {max_searches} times. When you know the answer, "
    "write <answer>answer</answer> with only the answer inside.\nQuestion: {question}"
)
FORMAT_REMINDER = "Write <search>query</search> to search or <answer>answer</answer> to answer."
# How the messages after a search limit or a failed search tell the model to answer.
ANSWER_HINT = "<answer>answer</answer>"
# Each passage shown is cut to this many characters (a Wikipedia passage of 100 words is about 600).
PASSAGE_CHARS = 1500
MAX_TOPK = 50
# Queries and answers echoed in the state text, and a failed search's error, are cut to this many
# characters; the state text as a whole keeps room for the reprompt around it within MAX_TEXT_CHARS.
ECHO_CHARS = 200
STATE_CHARS = MAX_TEXT_CHARS - 1024
# A loaded question longer than this is no question (NQ's are under 200 characters); it keeps the prompt and
# the state text within MAX_TEXT_CHARS.
MAX_QUESTION_CHARS = 4096

_TAGS = ("search", "answer")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles (a, an, the), single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: Sequence[str]) -> bool:
    """Whether the prediction equals any gold alias after :func:`normalize_answer`."""
    predicted = normalize_answer(prediction)
    return any(predicted == normalize_answer(a) for a in answers)


def format_passages(passages: Sequence[Passage], max_chars: int = MAX_TEXT_CHARS) -> str:
    """Search-R1's observation: ``<information>Doc 1 (Title: ...) text\\n...</information>``, at most
    ``max_chars`` characters: the passages past them are cut or left out, never the closing tag."""
    if not passages:
        return "<information>No results.</information>"
    lines: list[str] = []
    room = max_chars - len("<information></information>")
    for rank, passage in enumerate(passages, start=1):
        room -= bool(lines)  # the newline before it
        if room <= 0:
            break
        text = passage.text[:PASSAGE_CHARS]
        line = f"Doc {rank} (Title: {passage.title}) {text}" if passage.title else f"Doc {rank} {text}"
        lines.append(line[:room])
        room -= len(lines[-1])
    return "<information>" + "\n".join(lines) + "</information>"


@functools.lru_cache(maxsize=4)
def synthetic_setup(world_seed: int) -> tuple[SyntheticWorld, BM25Retriever]:
    """The synthetic world of ``world_seed`` and its BM25 index, built once per process and shared."""
    world = make_world(world_seed)
    return world, BM25Retriever.build(world.passages)


def _resolve_retriever(retriever: Retriever | str | PathLike) -> Retriever:
    if isinstance(retriever, str) and retriever.startswith(("http://", "https://")):
        return HTTPRetriever(retriever)
    if isinstance(retriever, str | PathLike):
        try:
            return BM25Retriever.load(Path(retriever))
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"retriever: {exc}; or give an http URL or a Retriever") from exc
    if not isinstance(retriever, Retriever):
        raise TypeError(
            f"retriever must be a Retriever, an index path or an http URL, got {type(retriever).__name__}"
        )
    return retriever


def _checked_questions(questions: str | PathLike | Sequence[SearchQuestion]) -> list[SearchQuestion]:
    """The questions of a path or a list, each checked; errors name the argument and what it may be."""
    if isinstance(questions, str | PathLike):
        if not Path(questions).is_file():
            raise FileNotFoundError(
                f"questions: no file at {str(questions)!r}; give a .jsonl, .json or .parquet"
            )
        questions = load_questions(questions)
    if isinstance(questions, bytes) or not isinstance(questions, Sequence):
        raise TypeError(
            f"questions must be None, a .jsonl/.json/.parquet path or a list of SearchQuestion, got "
            f"{type(questions).__name__}"
        )
    loaded = list(questions)
    if not loaded:
        raise ValueError("questions is empty; give at least one SearchQuestion")
    for index, question in enumerate(loaded):
        if not isinstance(question, SearchQuestion):
            raise TypeError(f"questions[{index}] is a {type(question).__name__}, not a SearchQuestion")
        if not isinstance(question.question, str) or not 0 < len(question.question) <= MAX_QUESTION_CHARS:
            raise ValueError(
                f"questions[{index}].question must be a string of 1 to {MAX_QUESTION_CHARS} characters"
            )
        answers = question.answers
        if (
            not isinstance(answers, tuple | list)
            or not answers
            or not all(isinstance(a, str) for a in answers)
        ):
            raise ValueError(
                f"questions[{index}].answers must be a non-empty tuple of strings, got {answers!r}"
            )
    return loaded


class NQSearchEnv(MultiTurnEnv):
    """Answer a factual question, searching a passage corpus as often as needed (Search-R1's protocol).

    ## Description
    The observation states the question and the protocol. Each turn the model either searches, with
    ``<search>query</search>`` (the observation is the top ``topk`` passages inside
    ``<information>...</information>``), or answers, with ``<answer>...</answer>``, which ends the episode.
    By default questions and corpus are a synthetic world (``envs.search_data.make_world``): invented
    people, towns and countries, with distractor passages, searched by an in-process BM25 index, so the
    env runs offline. ``questions`` and ``retriever`` point it at NQ and a real retriever (a saved BM25
    index or a Search-R1-compatible HTTP server, such as e5 over Wikipedia).

    Only the model's response is parsed, never the prompt, so the example tags in the prompt cannot
    count as an answer.

    ## Action Space
    Any string. Strict format: exactly one complete ``<search>...</search>`` or ``<answer>...</answer>`` with
    non-empty content, followed by nothing but whitespace (text before it, such as ``<think>...</think>``,
    is allowed). Lenient fallback (``info["format_ok"]`` False): the first complete tag when there are
    several or text follows; an unclosed ``<search>`` or ``<answer>`` at the very end (a generation stopped
    at the closing tag without returning it). Anything else is invalid.

    ## Observation Space
    ``AnyText``: the prompt at reset; then the ``<information>`` block of a search, "Correct." or
    "Incorrect." after an answer, a note when the search limit is reached, "search failed: ..." when the
    retriever raised, or what the ``invalid_output`` policy shows. Every observation fits ``AnyText``'s
    bound: passages are cut, and queries echoed in the state text are cut to ``ECHO_CHARS`` (older ones are
    dropped when many would not fit).

    ## Starting State
    ``reset(seed=s)`` picks the question. Synthetic world: questions are split by content, the people and
    towns whose passages answer them (``envs.search_data``), so a validation or test question shares no
    person or town with a training question; a seed of a split of ``envs/seeds.py`` picks question
    ``(s - split.start) % n`` of that split, ``seed=None`` a random train question. Loaded questions: a seed
    of a split picks question ``(s - split.start) % len(questions)``, ``seed=None`` one at random; keep
    separate files for training and evaluation (NQ train and test). A seed outside every split range is a
    ``ValueError``.

    ## Rewards
    An answer gets 1 if it matches any gold alias exactly after SQuAD normalisation (lower case, no
    punctuation or articles), else ``format_reward`` if every response of the episode was well formed,
    else 0. Searches get 0. An invalid response gets ``invalid_penalty``. With the defaults
    (``format_reward=0``, ``invalid_penalty=0``) the return is Search-R1's exact match.

    ## Episode End
    Terminated: an answer; an invalid response under ``invalid_output="terminate"``. Truncated: ``max_turns``
    responses without an answer. A search beyond ``max_searches`` is not run; the observation asks for an
    answer (``info["action_effective"]`` False). A search whose retriever raises (a server down, a bad reply)
    never ends the episode: the observation says "search failed: ..." and to try again or answer,
    ``info["action_effective"]`` is False, it does not count against ``max_searches``, and
    ``info["search_failures"]`` counts it.

    ## Arguments
    ```python
    import gymnasium as gym
    import envs

    env = gym.make(
        "freshrl/NQSearch-v0",
        questions=None,            # None: the synthetic world; or a .jsonl/.json/.parquet path, or a list
                                   # of SearchQuestion (then retriever is required)
        retriever=None,            # None: BM25 over the synthetic corpus; or a Retriever, a saved
                                   # BM25 index directory, or an http URL of a /retrieve server
        topk=3,                    # passages per search, in [1, 50]
        max_turns=4,               # responses per episode, an int >= 1
        max_searches=3,            # searches per episode, an int >= 0
        format_reward=0.0,         # reward of a wrong answer in an episode without format errors, [0, 1)
        invalid_output="reprompt", # "noop" | "reprompt" | "terminate"
        invalid_penalty=0.0,       # reward of a response without a usable tag, any finite number
        world_seed=0,              # seed of the synthetic world, an int >= 0
        render_mode=None,          # None or "ansi" (renders the question and the searches so far)
    )
    ```
    A bad argument is a ``ValueError`` (``TypeError`` for questions or a retriever of the wrong kind,
    ``FileNotFoundError`` for a missing file or index) naming the argument and what it may be. Loaded
    questions have 1 to ``MAX_QUESTION_CHARS`` characters and at least one answer.
    ``info`` adds ``searches`` (searches run so far) and ``search_failures`` (searches whose retriever
    failed), on every step; ``query`` (on a search turn),
    ``answer`` and ``exact_match`` (on the answer turn). ``env.unwrapped.oracle_responses()`` returns the
    oracle's responses from the current state: one well-chosen search per needed fact, then the answer.

    ## Version History
    - v0: first version.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}
    # The protocol's texts; the tool-call variant (envs.search_tools) replaces them.
    prompt_template = PROMPT
    reminder = FORMAT_REMINDER
    answer_hint = ANSWER_HINT

    def __init__(
        self,
        questions: str | PathLike | Sequence[SearchQuestion] | None = None,
        retriever: Retriever | str | PathLike | None = None,
        topk: int = 3,
        max_turns: int = 4,
        max_searches: int = 3,
        format_reward: float = 0.0,
        invalid_output: str = "reprompt",
        invalid_penalty: float = 0.0,
        world_seed: int = 0,
        render_mode: str | None = None,
    ):
        super().__init__(
            max_turns=max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        self.topk = check_int("topk", topk, 1, MAX_TOPK)
        self.max_searches = check_int("max_searches", max_searches, 0)
        self.format_reward = check_real("format_reward", format_reward)
        if not 0 <= self.format_reward < 1:
            raise ValueError(
                f"format_reward must be in [0, 1) (below a correct answer's 1), got {format_reward!r}"
            )
        world_seed = check_int("world_seed", world_seed, 0)
        self._by_split: dict[str, list[SearchQuestion]] | None = None
        self._questions: list[SearchQuestion] | None = None
        if questions is None:
            world, default_retriever = synthetic_setup(world_seed)
            self._by_split = world.questions
            self.retriever = default_retriever if retriever is None else _resolve_retriever(retriever)
        else:
            if retriever is None:
                raise ValueError("questions need a retriever: an index path, an http URL or a Retriever")
            self._questions = _checked_questions(questions)
            self.retriever = _resolve_retriever(retriever)
        self.question: SearchQuestion | None = None
        self.searches = 0
        self.search_failures = 0
        self._history: list[str] = []
        self._searched: set[str] = set()
        self._all_format_ok = True
        self._seed: int | None = None
        self._split = "train"
        self._warned_of_failure = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._split = split_of_reset_seed(seed)  # first: a bad seed leaves the env as it was
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def oracle_responses(self) -> list[str]:
        """The oracle's responses from the current state (a demonstration): the searches of
        ``envs.search_data.oracle_plan`` not yet run, as many as the limits allow, then the answer."""
        if self.question is None:
            raise RuntimeError("call reset() before oracle_responses()")
        if self._done:
            return []
        queries, answer = oracle_plan(self.question)
        queries = [q for q in queries if q not in self._searched]
        room = min(self.max_searches - self.searches, self.max_turns - self.turn - 1)
        searches = [self._search_response(q) for q in queries[: max(room, 0)]]
        return searches + [self._answer_response(answer)]

    def format_reminder(self) -> str:
        return self.reminder

    def _search_response(self, query: str) -> str:
        """The response that searches ``query`` (the oracle's)."""
        return f"<search>{query}</search>"

    def _answer_response(self, answer: str) -> str:
        """The response that answers ``answer`` (the oracle's)."""
        return f"<answer>{answer}</answer>"

    # ----------------------------------------------------------------- hooks
    def _new_task(self) -> str:
        pool = self._questions if self._by_split is None else self._by_split[self._split]
        if self._seed is None:
            index = int(self.np_random.integers(len(pool)))
        else:
            index = self._seed - SPLITS[self._split].start
        self.question = pool[index % len(pool)]
        self.searches = 0
        self.search_failures = 0
        self._history = []
        self._searched = set()
        self._all_format_ok = True
        return self.prompt_template.format(max_searches=self.max_searches, question=self.question.question)

    def _parse(self, response: str) -> Parsed:
        parsed = _parse_action(response)
        self._all_format_ok &= parsed.format_ok  # the format reward needs every turn's verdict
        return parsed

    def _apply(self, action: tuple[str, str]) -> Outcome:
        kind, content = action
        if kind == "answer":
            correct = exact_match(content, self.question.answers)
            reward = 1.0 if correct else (self.format_reward if self._all_format_ok else 0.0)
            info = {"answer": content, "exact_match": correct}
            self._history.append(f"answer: {_echo(content)}")
            observation = "Correct." if correct else "Incorrect."
            return Outcome(reward, observation, terminated=True, success=correct, info=info)
        if self.searches >= self.max_searches:
            message = f"Search limit reached ({self.max_searches}). Answer with {self.answer_hint}."
            return Outcome(0.0, message, effective=False, info={"query": content})
        try:
            observation = format_passages(self.retriever.search([content], self.topk)[0])
        except Exception as exc:  # a retriever that is down or broken must not end the rollout
            self.search_failures += 1
            self._history.append(f"search failed: {_echo(content)}")
            reason = _echo(f"{type(exc).__name__}: {exc}")
            if not self._warned_of_failure:  # once per env, so that a dead retriever is not silent in logs
                self._warned_of_failure = True
                note = f"NQSearchEnv: search failed ({reason}); info['search_failures'] counts failures"
                warnings.warn(note, stacklevel=3)  # points at the caller of step()
            message = f"search failed: {reason}. Search again or answer with {self.answer_hint}."
            return Outcome(0.0, message, effective=False, info={"query": content})
        self.searches += 1
        self._history.append(f"search: {_echo(content)}")
        self._searched.add(content)
        return Outcome(0.0, observation, info={"query": content})

    def _task_info(self) -> dict[str, Any]:
        return {"searches": self.searches, "search_failures": self.search_failures}

    def _state_text(self) -> str:
        """The question, the search count and as many of the latest searches as fit in ``STATE_CHARS``."""
        if self.question is None:
            return ""
        lines = [f"Question: {self.question.question}", f"Searches: {self.searches}/{self.max_searches}"]
        room = STATE_CHARS - sum(len(line) + 1 for line in lines) - len("(earlier searches omitted)")
        shown: list[str] = []
        for line in reversed(self._history):
            room -= len(line) + 1
            if room < 0:
                shown.append("(earlier searches omitted)")
                break
            shown.append(line)
        return "\n".join(lines + shown[::-1])


def _echo(text: str) -> str:
    """``text`` cut to ``ECHO_CHARS`` characters for showing it back."""
    return text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + "..."


def _first_complete_tag(response: str) -> tuple[str, int, int] | None:
    """``(kind, start of content, start of closing tag)`` of the first complete tag, in linear time.

    A regex with a lazy body would rescan the rest of the text from every unclosed opening tag (quadratic on
    adversarial input); here an opening tag is only followed up when a closing tag of its kind comes later.
    """
    first_open = {kind: response.find(f"<{kind}>") for kind in _TAGS}
    for at, kind in sorted((at, kind) for kind, at in first_open.items() if at >= 0):
        start = at + len(kind) + 2
        close = response.find(f"</{kind}>", start)
        if close >= 0:
            return kind, start, close
        # No closing tag after this kind's first opening one, so none after any later one either.
    return None


def _parse_action(response: str) -> Parsed:
    """The ``<search>`` or ``<answer>`` of a response, strict, then lenient (see the class docstring)."""
    found = _first_complete_tag(response)
    if found is not None:
        kind, start, close = found
        content = response[start:close].strip()
        if not content:
            return Parsed(format_ok=False, valid=False, error=f"empty <{kind}> tag")
        strict = not response[close + len(kind) + 3 :].strip()
        return Parsed(format_ok=strict, valid=True, action=(kind, content))
    at, kind = max((response.rfind(f"<{kind}>"), kind) for kind in _TAGS)
    content = response[at + len(kind) + 2 :].strip() if at >= 0 else ""
    if content and not any(tag in content for t in _TAGS for tag in (f"<{t}>", f"</{t}>")):
        # An unclosed tag ends the response: a generation stopped at the closing tag without returning it.
        return Parsed(format_ok=False, valid=True, action=(kind, content))
    return Parsed(format_ok=False, valid=False, error="no <search>query</search> or <answer>answer</answer>")
