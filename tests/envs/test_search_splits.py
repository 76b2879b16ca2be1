"""NQSearch splits: a synthetic question's content is the people and towns whose passages
answer it; train, validation and test questions never share a question, a gold passage or an answer that
names a person or town, and a seed outside every split range is an error."""

import pytest

from envs.search import NQSearchEnv, synthetic_setup
from envs.search_data import SearchQuestion
from envs.seeds import seeds

COUNTS = {"train": 20_000, "validation": 2_000, "test": 2_000}
PAIRS = (("train", "validation"), ("train", "test"), ("validation", "test"))
OUTSIDE = [-1, 10_100_000, 19_999_999, 20_100_000, 2**40]


def tasks(env: NQSearchEnv, split: str, count: int) -> list[SearchQuestion]:
    out = []
    for seed in seeds(split, count):
        env.reset(seed=seed)
        out.append(env.question)
    return out


def test_no_task_content_is_shared_between_splits():
    env = NQSearchEnv()
    world, _ = synthetic_setup(0)
    by_split = {split: tasks(env, split, count) for split, count in COUNTS.items()}
    entity_names = {p.title for p in world.passages if p.id.startswith(("person-", "town-"))}

    def content(split: str, part: str) -> set[str]:
        questions = by_split[split]
        if part == "question":
            return {q.question for q in questions}
        if part == "gold passage":
            return {pid for q in questions for pid in q.gold_passage_ids}
        return {a for q in questions for a in q.answers if a in entity_names}  # answers naming an entity

    for part in ("question", "gold passage", "entity answer"):
        shared = {pair: len(content(pair[0], part) & content(pair[1], part)) for pair in PAIRS}
        assert shared == dict.fromkeys(shared, 0), part
    # The held-out splits are not degenerate: their seeds walk all of their questions.
    for split in ("validation", "test"):
        assert {q.question for q in by_split[split]} == {q.question for q in world.questions[split]}
        assert len(world.questions[split]) > 50


@pytest.mark.parametrize("loaded", [False, True], ids=["synthetic", "loaded"])
@pytest.mark.parametrize("seed", OUTSIDE)
def test_a_seed_outside_every_split_is_an_error(loaded, seed):
    _, retriever = synthetic_setup(0)
    questions = [SearchQuestion(f"question {i}?", (str(i),)) for i in range(3)] if loaded else None
    env = NQSearchEnv(questions=questions, retriever=retriever if loaded else None)
    env.reset(seed=seeds("test", 1)[0])
    before = env.question
    with pytest.raises(ValueError, match="outside every split range"):
        env.reset(seed=seed)
    assert env.question == before  # the bad seed changed nothing
    env.reset(seed=None)  # None still draws a training (or, loaded, any) question
    assert env.question is not None
