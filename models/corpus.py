"""The built-in text corpus the offline tiny tokenizer is trained on.

The tiny models have no pretrained tokenizer, so one is trained locally (``models/tiny_tokenizer.py``). Its
merges come from this corpus, which covers what freshrl's environments and prompts say: instruction words,
digits and arithmetic, LaTeX bits, the answer / search / think tags, ``Answer:``, Sokoban and FrozenLake
words, grid symbols and directions. Everything is generated from a fixed ``random.Random`` seed, so the
corpus (and with it the tokenizer and the cache key of every tiny model) is the same on every machine.
Callers add their own texts (for example the first observations of their environments) through ``extra``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable


def _words(text: str) -> list[str]:
    return text.split()


INSTRUCTION_WORDS = _words(
    """
a about above across action actions after again against agent all allowed also always an and another answer
answers any are around as ask at available back be because before begin below best between both box boxes
but by call can cannot cell cells check choose clearly close column columns complete continue correct could
current describe did do does done down each either empty end enter every exactly example explain facts fall
final find first follow following for format found from game get give given go goal grid guess has have
hole holes how if in information inside instead into is it its keep last left legal less let level line lines
list make map may means more most move moved moves must need next no not nothing now number of off on once
one only or order other out output over own player please position possible previous problem push pushed
puzzle question read reach reached reason reasoning remaining reply respond response result right row rows
rule rules same search see should show side simple single size so solve solved solution some square start
state step steps stop such sure target targets task tell than that the their them then there these they
think this those three through to top tried try turn turns two under until up use used valid value wall walls
was way we what when where which while who why will win with within without word words would write wrong
you your yes true false invalid error again reward success failed episode query document documents passage
title wikipedia who when where which year born city country name first last capital river largest president
system user assistant helpful
"""
)

GAME_WORDS = _words(
    """
Sokoban FrozenLake frozen lake ice slippery hole goal start player box target wall floor agent reached fell
Up Down Left Right up down left right UP DOWN LEFT RIGHT north south east west push pushed stuck
"""
)

CAPITALIZED = _words(
    """
The You Your Answer Question Problem Solve Find Compute What Which Who When Where Why How Move Think Search
Information Document Title Reward Step Turn Grid Map Legend Rules Goal Player Box Target Wall Hole Start
Please Output Respond Use Valid Invalid Error Note The Let If Then So Therefore Hence Final Correct Wrong
"""
)

TAGS = (
    ("<answer>", "</answer>"),
    ("<search>", "</search>"),
    ("<information>", "</information>"),
    ("<think>", "</think>"),
)

GRID_SYMBOLS = "#_OXPSGHF."
DIRECTIONS = ("Up", "Down", "Left", "Right")
LATEX_PIECES = (
    r"\boxed{",
    r"\frac{",
    r"\sqrt{",
    r"\cdot",
    r"\times",
    r"\div",
    r"\pi",
    r"\left(",
    r"\right)",
    r"\le",
    r"\ge",
    r"\neq",
    r"$",
    r"$$",
    "^2",
    "^{",
    "_{",
)

DEFAULT_SEED = 0
DEFAULT_SENTENCES = 4000
DEFAULT_GRIDS = 600
DEFAULT_ARITHMETIC = 3000


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(INSTRUCTION_WORDS + GAME_WORDS) for _ in range(rng.randint(4, 16))]
    words[0] = rng.choice(CAPITALIZED) if rng.random() < 0.6 else words[0].capitalize()
    return " ".join(words) + rng.choice((".", ".", ".", "?", ":", "!"))


def _grid(rng: random.Random) -> str:
    size = rng.randint(3, 8)
    symbols = rng.choice(("#_OXP", "SFHG", "#_OXPS", "SFHGP", ".#OXP"))
    return "\n".join("".join(rng.choice(symbols) for _ in range(size)) for _ in range(size))


def _arithmetic(rng: random.Random) -> str:
    a, b = rng.randint(0, 999), rng.randint(1, 999)
    op = rng.choice("+-*/")
    value = {"+": a + b, "-": a - b, "*": a * b, "/": round(a / b, 3)}[op]
    forms = (
        f"{a} {op} {b} = {value}",
        f"What is {a} {op} {b}? Answer: {value}",
        f"Compute ${a} {op} {b}$. The answer is $\\boxed{{{value}}}$.",
        f"$\\frac{{{a}}}{{{b}}}$",
        f"<answer>{value}</answer>",
        f"Answer: {value}",
        f"x^2 + {a}x - {b} = 0",
        f"$\\sqrt{{{a}}} \\cdot {b}$",
    )
    return rng.choice(forms)


def _tagged(rng: random.Random) -> str:
    open_tag, close_tag = rng.choice(TAGS)
    if open_tag == "<answer>":
        body = rng.choice((rng.choice(DIRECTIONS), str(rng.randint(0, 100)), _sentence(rng)[:-1]))
    else:
        body = _sentence(rng)
    return f"{open_tag}{body}{close_tag}"


def _moves(rng: random.Random) -> str:
    moves = ", ".join(rng.choice(DIRECTIONS) for _ in range(rng.randint(1, 6)))
    return rng.choice((f"<answer>{moves}</answer>", f"Moves: {moves}", f"I move {moves}."))


def _turn(rng: random.Random) -> str:
    # Chat roles start a line right after <|im_start|>, with no leading space.
    role = rng.choice(("system", "user", "assistant"))
    return f"{role}\n{rng.choice((_sentence, _tagged, _moves, _arithmetic, _grid))(rng)}"


def corpus_texts(
    extra: Iterable[str] = (),
    *,
    seed: int = DEFAULT_SEED,
    sentences: int = DEFAULT_SENTENCES,
    grids: int = DEFAULT_GRIDS,
    arithmetic: int = DEFAULT_ARITHMETIC,
) -> list[str]:
    """The tokenizer training corpus: a fixed list of texts, then ``extra`` in the order given.

    The same arguments always give the same list (no global RNG, no set ordering), so it can be hashed into a
    cache key.
    """
    rng = random.Random(seed)
    texts: list[str] = []
    texts.append(" ".join(INSTRUCTION_WORDS + GAME_WORDS + CAPITALIZED))
    texts.append(" ".join(str(i) for i in range(1000)))
    texts.append(" ".join(LATEX_PIECES))
    texts.append(" ".join(tag for pair in TAGS for tag in pair))
    texts.append(" ".join(GRID_SYMBOLS) + "\n" + GRID_SYMBOLS)
    texts.extend(_sentence(rng) for _ in range(sentences))
    texts.extend(_grid(rng) for _ in range(grids))
    texts.extend(_arithmetic(rng) for _ in range(arithmetic))
    texts.extend(_tagged(rng) for _ in range(sentences // 4))
    texts.extend(_moves(rng) for _ in range(sentences // 4))
    texts.extend(_turn(rng) for _ in range(sentences // 4))
    texts.extend(extra)
    return texts
