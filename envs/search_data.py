"""Questions for the search env: loaders for NQ / Search-R1 files, and a synthetic offline world.

Loaders (:func:`load_questions`) read jsonl, json or parquet rows in the formats the search-agent papers use:

- FlashRAG / Search-R1 raw: ``{"id": ..., "question": ..., "golden_answers": [...]}``;
- Search-R1's processed parquet: ``prompt`` (chat messages ending in ``Question: ...``) and ``reward_model``
  (``{"ground_truth": {"target": [...]}}``), with or without the raw columns;
- NQ-open: ``{"question": ..., "answer": [...]}``.

A question without a final ``?`` gets one, as Search-R1's preprocessing does.

The synthetic world (:func:`make_world`) is invented, not real: people, towns and countries with made-up
ASCII names, deterministic from a seed. Each person has a passage (birth town, birth year, occupation, best
known work); each town one (country, river, product); each country one (capital, river). Distractors share
surface words with the gold passages: relatives share a surname, and ships, prizes and streets named after a
person mention other towns and years. Questions ask one fact (town, year, occupation, work of a person;
country of a town) or two (the country a person was born in: find the town, then its country). Since the
facts are invented, a model can only answer by searching.

Splits are by task content. A question's content is the people and towns whose passages answer it (its
``gold_passage_ids``): the person, and for "In which country was X born?" also X's birth town. Every person
and town belongs to one split (80 / 10 / 10, at least one town per split), and people are born in towns of
their own split, so a question only needs passages of its split: no training question asks about, answers
with, or retrieves as gold a validation or test person or town. The six countries are shared, as real
countries are shared by NQ's train and test questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envs.math_data import iter_records
from envs.retrieval.base import Passage

# --------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SearchQuestion:
    """A question with its gold answers (any alias counts).

    Synthetic questions also carry the oracle's search queries and the ids of the passages they need.
    """

    question: str
    answers: tuple[str, ...]
    id: str = ""
    oracle_queries: tuple[str, ...] = ()
    gold_passage_ids: tuple[str, ...] = ()


def oracle_plan(question: SearchQuestion) -> tuple[tuple[str, ...], str]:
    """What an oracle does: one search per needed fact (its queries), then the answer.

    For a loaded question (no oracle queries) the oracle searches the question itself once.
    """
    return question.oracle_queries or (question.question,), question.answers[0]


def oracle_responses(question: SearchQuestion) -> list[str]:
    """The oracle's plan (:func:`oracle_plan`) as ``<search>`` and ``<answer>`` responses."""
    queries, answer = oracle_plan(question)
    return [f"<search>{q}</search>" for q in queries] + [f"<answer>{answer}</answer>"]


# --------------------------------------------------------------------------------------- loaders

_QUESTION_MARK = "Question:"


def _answers(row: dict[str, Any]) -> tuple[str, ...]:
    for key in ("golden_answers", "answers", "answer"):
        if row.get(key) is not None:
            value = row[key]
            break
    else:
        truth = row.get("reward_model", {})
        value = truth.get("ground_truth") if isinstance(truth, dict) else None
        if isinstance(value, dict):
            value = value.get("target")
    if value is None:
        raise ValueError(f"no answers in row with keys {sorted(row)}")
    values = [value] if isinstance(value, str | int | float) else list(value)
    answers = tuple(str(v).strip() for v in values if str(v).strip())
    if not answers:
        raise ValueError(f"empty answers in row with keys {sorted(row)}")
    return answers


def _question(row: dict[str, Any]) -> str:
    if isinstance(row.get("question"), str):
        return row["question"]
    extra = row.get("extra_info")
    if isinstance(extra, dict) and isinstance(extra.get("question"), str):
        return extra["question"]
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        prompt = users[-1] if users else None
    if isinstance(prompt, str) and _QUESTION_MARK in prompt:
        return prompt.rsplit(_QUESTION_MARK, 1)[1]
    raise ValueError(f"no question in row with keys {sorted(row)}")


def load_questions(path: str | Path, *, limit: int | None = None) -> list[SearchQuestion]:
    """Questions of an NQ / Search-R1 file (see the module docstring), in file order."""
    questions: list[SearchQuestion] = []
    for index, row in enumerate(iter_records(path)):
        text = " ".join(_question(row).split())
        if not text.endswith("?"):
            text += "?"
        questions.append(SearchQuestion(text, _answers(row), id=str(row.get("id", index))))
        if limit is not None and len(questions) >= limit:
            break
    if not questions:
        raise ValueError(f"{path}: no questions")
    return questions


# --------------------------------------------------------------------------------------- synthetic world

_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "k", "kr", "l", "m", "n", "p", "r", "s", "st", "t", "v")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
_CODAS = ("", "", "", "n", "r", "l", "s", "k", "m")
_COUNTRY_ENDINGS = ("ia", "land", "ar", "ovia", "istan")
_OCCUPATIONS = {
    "painter": "painting",
    "poet": "poem",
    "architect": "palace",
    "engineer": "bridge",
    "composer": "symphony",
    "sculptor": "statue",
    "astronomer": "star catalogue",
    "cartographer": "atlas",
    "chemist": "treatise",
    "botanist": "herbarium",
}
_ADJECTIVES = (
    "Amber", "Silent", "Golden", "Hollow", "Crimson", "Northern", "Broken", "Hidden", "Lonely", "Iron",
    "Silver", "Winter", "Green", "Last", "Distant", "Quiet", "Burning", "Pale", "Endless", "Open",
)  # fmt: skip
_NOUNS = (
    "Gate", "River", "Tower", "Garden", "Harbor", "Lantern", "Mountain", "Orchard", "Bell", "Mirror",
    "Road", "Island", "Crown", "Forest", "Window", "Shore", "Valley", "Compass", "Bridge", "Star",
)  # fmt: skip
_PRODUCTS = ("glass", "wool", "salt", "clocks", "paper", "copper", "cheese", "silk", "boats", "honey")
_FIELDS = ("poetry", "medicine", "music", "painting", "engineering", "astronomy", "botany", "chemistry")
_SPLIT_SHARES = (("train", 0.8), ("validation", 0.1), ("test", 0.1))


@dataclass
class SyntheticWorld:
    """A generated corpus and its questions, by split."""

    passages: list[Passage]
    questions: dict[str, list[SearchQuestion]] = field(default_factory=dict)
    seed: int = 0


class _Names:
    """Unique invented words from syllables."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int, ending: str = "") -> str:
        while True:
            parts = [
                self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS)
                for _ in range(syllables)
            ]
            word = ("".join(parts) + ending).capitalize()
            if word not in self.used and 4 <= len(word) <= 12:
                self.used.add(word)
                return word


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def _split_of_entities(rng: np.random.Generator, count: int) -> list[str]:
    """Split names for ``count >= 3`` entities in a random order: 80% train, 10% validation, 10% test, and
    at least one of each."""
    held_out = [(name, max(1, round(share * count))) for name, share in _SPLIT_SHARES if name != "train"]
    labels = [name for name, size in held_out for _ in range(size)]
    labels = ["train"] * (count - len(labels)) + labels
    return [labels[i] for i in rng.permutation(count)]


def make_world(
    seed: int = 0, *, num_people: int = 160, num_towns: int = 32, num_countries: int = 6
) -> SyntheticWorld:
    """The synthetic corpus and questions (see the module docstring), the same for the same arguments."""
    if num_countries < 1 or num_towns < max(num_countries, 10) or num_people < 10:
        raise ValueError(
            "need num_countries >= 1, num_towns >= max(num_countries, 10) and num_people >= 10 (every split "
            f"needs its own towns and people); got {num_countries}, {num_towns} and {num_people}"
        )
    rng = np.random.default_rng(seed)
    names = _Names(rng)
    passages: list[Passage] = []
    questions = {name: [] for name, _ in _SPLIT_SHARES}

    countries = [names.word(2, str(rng.choice(_COUNTRY_ENDINGS))) for _ in range(num_countries)]
    rivers = [names.word(2) for _ in range(num_countries * 2)]
    towns = [names.word(3) for _ in range(num_towns)]
    town_country = [countries[i % num_countries] for i in range(num_towns)]  # every country gets a town
    town_country = [town_country[i] for i in rng.permutation(num_towns)]
    capitals = {c: next(t for t, tc in zip(towns, town_country, strict=True) if tc == c) for c in countries}

    for country in countries:
        river = rivers[int(rng.integers(len(rivers)))]
        contents = (
            f'"{country}"\n{country} is a country. Its capital is {capitals[country]}, and its longest river '
            f"is the {river}."
        )
        passages.append(Passage(contents, id=f"country-{country.lower()}"))

    town_splits = _split_of_entities(rng, num_towns)
    towns_of = {
        name: [i for i, split in enumerate(town_splits) if split == name] for name, _ in _SPLIT_SHARES
    }
    for town, country, split in zip(towns, town_country, town_splits, strict=True):
        river, product = rivers[int(rng.integers(len(rivers)))], rng.choice(_PRODUCTS)
        pid = f"town-{town.lower()}"
        contents = (
            f'"{town}"\n{town} is a town in {country}. It lies on the {river} river and is known for its '
            f"{product}."
        )
        passages.append(Passage(contents, id=pid))
        questions[split].append(
            SearchQuestion(
                f"In which country is the town of {town}?",
                (country,),
                id=pid,
                oracle_queries=(f"{town} town",),
                gold_passage_ids=(pid,),
            )
        )

    first_names = [names.word(2) for _ in range(max(8, num_people // 2))]
    surnames = [names.word(2) for _ in range(max(4, num_people // 3))]  # about three relatives per surname
    titles = [f"The {a} {n}" for a in _ADJECTIVES for n in _NOUNS]
    title_order = rng.permutation(len(titles))
    people: set[str] = set()
    splits = _split_of_entities(rng, num_people)
    for index in range(num_people):
        while True:
            surname = surnames[int(rng.integers(len(surnames)))]
            name = f"{first_names[int(rng.integers(len(first_names)))]} {surname}"
            if name not in people:
                people.add(name)
                break
        home_towns = towns_of[splits[index]]  # born in a town of the person's own split: no cross-split hop
        town_index = home_towns[int(rng.integers(len(home_towns)))]
        town, year = towns[town_index], int(rng.integers(1650, 1991))
        occupation = str(rng.choice(list(_OCCUPATIONS)))
        title = titles[title_order[index % len(titles)]]
        pid = f"person-{index}"
        work = f"{_OCCUPATIONS[occupation]} {title}"
        contents = (
            f'"{name}"\n{name} was {_article(occupation)} {occupation} born in {town} in {year}. '
            f"{surname} is best known for the {work}."
        )
        passages.append(Passage(contents, id=pid))
        passages.extend(_namesakes(rng, name, towns, index))
        born, known = f"{name} born", f"{name} best known for"
        town_pid = f"town-{town.lower()}"
        two_hop = ((born, f"{town} town"), (pid, town_pid))
        asked = (
            ("town", f"In which town was {name} born?", town, (born,), (pid,)),
            ("year", f"In what year was {name} born?", str(year), (born,), (pid,)),
            ("occupation", f"What was the occupation of {name}?", occupation, (known,), (pid,)),
            ("work", f"What is {name} best known for?", title, (known,), (pid,)),
            ("country", f"In which country was {name} born?", town_country[town_index], *two_hop),
        )
        for kind, text, answer, queries, gold in asked:
            question = SearchQuestion(
                text, (answer,), id=f"{pid}-{kind}", oracle_queries=queries, gold_passage_ids=gold
            )
            questions[splits[index]].append(question)
    # Shuffled so that consecutive seeds (which index the list) mix question kinds.
    shuffled = {name: [qs[i] for i in rng.permutation(len(qs))] for name, qs in questions.items()}
    return SyntheticWorld(passages=passages, questions=shuffled, seed=seed)


def _namesakes(rng: np.random.Generator, name: str, towns: Sequence[str], index: int) -> list[Passage]:
    """Distractors for about half the people: things named after them, with other towns and years."""
    if rng.random() >= 0.5:
        return []
    town, year = towns[int(rng.integers(len(towns)))], int(rng.integers(1700, 2001))
    kind = int(rng.integers(3))
    if kind == 0:
        title = f"{name} (ship)"
        sailed = int(rng.integers(10, 40))
        text = f"The {name} was a cargo ship built in {town} in {year}. She sailed for {sailed} years."
    elif kind == 1:
        title = f"{name} Prize"
        prize_field = str(rng.choice(_FIELDS))
        text = f"The {name} Prize is given each year in {town} for {prize_field}. First given in {year}."
    else:
        title = f"{name} Street"
        text = f"{name} Street is a street in {town}. It was named in {year}."
    return [Passage(f'"{title}"\n{text}', id=f"namesake-{index}")]
