"""What the grid-world envs (Sokoban, FrozenLake) share: the move-list answer format and tile drawing.

Answer format. Strict: ``<answer>Left, Up</answer>``, the last complete ``<answer>...</answer>`` pair counts,
its content is 1..``max_moves`` of ``Up``, ``Down``, ``Left``, ``Right`` (any case) separated by commas or
spaces. Lenient fallback, when there is no complete tag pair: the direction words (whole words, any case) on
the last non-empty line, if there are 1..``max_moves`` of them. :func:`parse_moves` classifies every string:

- valid, strict format: ``Parsed(format_ok=True, valid=True)``;
- valid through the fallback: ``Parsed(format_ok=False, valid=True)``;
- invalid (tags present, content not a legal move list): ``Parsed(format_ok=True, valid=False)``;
- format error (no tags, no usable last line): ``Parsed(format_ok=False, valid=False)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from envs.base import Parsed

DIRECTIONS = ("Up", "Down", "Left", "Right")
DELTAS = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}

_CANONICAL = {name.lower(): name for name in DIRECTIONS}
_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s,]+")
_DIRECTION_WORD = re.compile(r"\b(up|down|left|right)\b", re.IGNORECASE)


def format_moves(moves: Sequence[str]) -> str:
    """The strict answer for ``moves``, e.g. ``<answer>Left, Up</answer>``."""
    return f"<answer>{', '.join(moves)}</answer>"


def format_turns(moves: Sequence[str], max_moves: int) -> list[str]:
    """``moves`` split into strict answers of at most ``max_moves`` each: one response per turn."""
    return [format_moves(moves[i : i + max_moves]) for i in range(0, len(moves), max_moves)]


def random_moves(rng: np.random.Generator, max_moves: int) -> str:
    """A strict answer of ``max_moves`` moves drawn uniformly, without looking at the map: the blind policy
    whose success is the floor a learnt policy must beat (docs/learning_lab.md, "The blind floor")."""
    return format_moves([DIRECTIONS[i] for i in rng.integers(len(DIRECTIONS), size=max_moves)])


def format_instruction(max_moves: int, example: Sequence[str] = ("Left", "Up")) -> str:
    """The one-line answer-format instruction shown in prompts and reprompts."""
    example = tuple(example)[:max_moves]
    amount = "one move" if max_moves == 1 else f"up to {max_moves} moves"
    return f"Answer with {amount} from Up, Down, Left, Right, e.g. {format_moves(example)}"


def last_answer(response: str) -> str | None:
    """The content of the last complete ``<answer>...</answer>`` pair (tags in any case), or None.

    Pairs are found left to right, each from an opening tag to the first closing tag after it, as
    ``re.findall(r"<answer>(.*?)</answer>")`` would; but in linear time: the lazy regex rescans to the end
    from every unclosed tag, quadratic in the number of tags.
    """
    content, pos = None, 0
    while (opening := _OPEN.search(response, pos)) is not None:
        closing = _CLOSE.search(response, opening.end())
        if closing is None:
            break  # no later opening tag can be closed either
        content, pos = response[opening.end() : closing.start()], closing.end()
    return content


def parse_moves(response: str, max_moves: int) -> Parsed:
    """Parse a response into a list of directions (``Parsed.action``); never raises."""
    answer = last_answer(response)
    if answer is not None:
        tokens = [t for t in _SEPARATORS.split(answer) if t]
        if not tokens:
            return Parsed(format_ok=True, valid=False, error="empty answer")
        unknown = [t for t in tokens if t.lower() not in _CANONICAL]
        if unknown:
            return Parsed(format_ok=True, valid=False, error=f"unknown move {unknown[0][:20]!r}")
        if len(tokens) > max_moves:
            error = f"{len(tokens)} moves, at most {max_moves} allowed"
            return Parsed(format_ok=True, valid=False, error=error)
        return Parsed(format_ok=True, valid=True, action=[_CANONICAL[t.lower()] for t in tokens])
    lines = [line for line in response.splitlines() if line.strip()]
    words = _DIRECTION_WORD.findall(lines[-1]) if lines else []
    if 1 <= len(words) <= max_moves:
        return Parsed(format_ok=False, valid=True, action=[_CANONICAL[w.lower()] for w in words])
    return Parsed(format_ok=False, valid=False, error="no <answer>...</answer> found")


def grid_text(cells: np.ndarray) -> str:
    """A grid of one-character cells as text: rows on lines, cells separated by single spaces.

    The spaces keep every cell its own token under byte-level BPE tokenizers, which otherwise merge runs such
    as ``____`` or ``PH`` into one token and hide which column a cell is in (Qwen's tokenizer does this too).
    """
    return "\n".join(" ".join(row) for row in cells)


def compose_tiles(tile_ids: np.ndarray, tiles: np.ndarray) -> np.ndarray:
    """An RGB image from a grid of tile ids: ``tiles[tile_ids[r, c]]`` drawn at cell ``(r, c)``.

    ``tile_ids`` is ``(rows, cols)`` ints, ``tiles`` is ``(n_tiles, cell, cell, 3)`` uint8; the result is
    ``(rows * cell, cols * cell, 3)`` uint8.
    """
    rows, cols = tile_ids.shape
    cell = tiles.shape[1]
    image = tiles[tile_ids]  # (rows, cols, cell, cell, 3)
    return np.ascontiguousarray(image.transpose(0, 2, 1, 3, 4).reshape(rows * cell, cols * cell, 3))
