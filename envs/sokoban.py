"""Sokoban as a multi-turn text env: push every box onto a target, a few moves per turn."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from envs.base import DEFAULT_INVALID_PENALTY, MultiTurnEnv, Outcome, Parsed, check_int
from envs.gridworld import (
    DELTAS,
    compose_tiles,
    format_instruction,
    format_turns,
    grid_text,
    parse_moves,
    random_moves,
)
from envs.seeds import split_of_reset_seed
from envs.sokoban_levels import Level, check_level_settings, generate_level, level_from_text, solve

# gym-sokoban's rewards (its SokobanEnv), per move.
STEP_PENALTY = -0.1
BOX_ON_TARGET = 1.0
BOX_OFF_TARGET = -1.0
SOLVED_BONUS = 10.0


@dataclass(frozen=True)
class SokobanDifficulty:
    """Level size and difficulty, and the turn budget that goes with it."""

    dim: tuple[int, int]
    num_boxes: int
    min_solution_length: int
    max_solution_length: int
    max_turns: int
    max_actions_per_turn: int


# The turn budget leaves room for about twice the longest optimal solution: 25 moves for at most 12 (simple),
# 50 for at most 30 (hard).
DIFFICULTIES = {
    "simple": SokobanDifficulty((6, 6), 1, 4, 12, max_turns=5, max_actions_per_turn=5),
    "hard": SokobanDifficulty((8, 8), 2, 10, 30, max_turns=10, max_actions_per_turn=5),
}

WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET_CHAR, PLAYER, PLAYER_ON_TARGET = "#", "_", "O", "X", "*", "P", "S"
LEGEND = "Legend: # wall, _ floor, O target, X box, * box on target, P you, S you on target."
# Tiles smaller than 5 pixels cannot hold the target frame and the player (_sokoban_tiles).
CELL_PIXELS_RANGE = (5, 256)


class SokobanEnv(MultiTurnEnv):
    """Sokoban: push every box onto a target. Several moves per turn, levels certified solvable.

    ## Description
    A warehouse room of walls and floor holds boxes and as many targets. The agent walks Up, Down, Left or
    Right; walking into a box pushes it one cell if the cell behind it is free floor. Boxes cannot be
    pulled, and two boxes in a row cannot be pushed. Every level comes from exhaustive reverse play from the
    solved state (:mod:`envs.sokoban_levels`), so it is solvable, no box starts on a target, and its optimal
    solution length in moves is known exactly (``info["optimal_length"]``).

    ## Action Space
    A string (the assistant's response). Strict format: ``<answer>Left, Up</answer>`` with 1 to
    ``max_actions_per_turn`` moves from Up, Down, Left, Right, executed in order. Lenient fallback: without a
    complete tag pair, the direction words on the last non-empty line (``format_ok`` False). Anything else is
    handled by the ``invalid_output`` policy (:mod:`envs.gridworld` has the exact rules).

    ## Observation Space
    Text (``AnyText``). The first observation states the task, the legend, the answer format and the map;
    later ones show the map after the turn's moves. Map characters: ``#`` wall, ``_`` floor, ``O`` target,
    ``X`` box, ``*`` box on target, ``P`` the agent, ``S`` the agent on a target.

    ## Starting State
    A level drawn from ``reset(seed=...)`` alone: a ``dim`` room dug by gym-sokoban's random walk, random
    targets, and a start state picked uniformly among the reverse-play states whose optimal solution takes
    ``min_solution_length`` to ``max_solution_length`` moves. ``reset(options={"level": level})`` plays a
    given :class:`~envs.sokoban_levels.Level` or map string (:func:`~envs.sokoban_levels.level_from_text`);
    a level without an all-wall border, or already solved, is a ``ValueError``.

    Splits by content: a seed of a split of :mod:`envs.seeds` only yields levels whose room (walls and
    targets, :func:`~envs.sokoban_levels.room_content`) hashes to that split, so validation and test levels
    never share a room with a training level; ``seed=None`` draws training levels, and a seed outside every
    split range is a ``ValueError``.

    ## Rewards
    Per move, as gym-sokoban: -0.1, plus +1 for pushing a box onto a target, -1 for pushing one off, and
    +10 when the last box reaches its target. A turn's reward is the sum over its moves. A response that
    cannot be used earns ``invalid_penalty`` (default -0.1) instead. Walking into a wall or an immovable box
    is a valid move that costs -0.1 and changes nothing.

    ## Episode End
    Terminated when every box is on a target (moves after the solving one are not executed), or on an
    unusable response under ``invalid_output="terminate"``. Truncated after ``max_turns`` turns.

    ``info`` has ``format_ok``, ``action_valid``, ``action_effective`` (the turn moved the agent),
    ``success`` (solved), ``turn``, ``optimal_length`` (optimal moves from the start state),
    ``boxes_on_target``, ``state_key`` (:meth:`state_key`: the map with boxes and agent, the state the next
    turn starts from), and after a valid turn ``moves_executed`` and ``moves_effective``.

    ## Arguments
    ```python
    gymnasium.make("freshrl/Sokoban-v0", difficulty="simple", dim=None, num_boxes=None,
                   min_solution_length=None, max_solution_length=None, max_turns=None,
                   max_actions_per_turn=None, invalid_output="reprompt", invalid_penalty=-0.1,
                   render_mode=None, cell_pixels=28)
    ```
    ``difficulty``: ``"simple"`` (6x6 room, 1 box, 4-12 moves, 5 turns of up to 5 moves) or ``"hard"`` (8x8,
    2 boxes, 10-30 moves, 10 turns of up to 5 moves; ``freshrl/SokobanHard-v0``). Each ``None`` argument
    takes the difficulty's. ``dim``: a (height, width) pair of integers >= 3 whose interior, (height - 2) x
    (width - 2), has 9 to 100 cells (5x5 to 12x12, or longer and narrower, such as 4x52). ``num_boxes``: 1 to
    one per 5 interior cells (one if height or width is 3), with a search space (interior cells x box
    placements) of at most :data:`~envs.sokoban_levels.MAX_SEARCH_STATES` = 3,000,000: up to 4 boxes at 8x8, 3
    at 10x10, 2 at 12x12. ``min_solution_length``: 1 to (num_boxes + 1) / 5 of the interior cells.
    ``max_solution_length``: at least ``min_solution_length``, and at least 1, 3, 8, 12 or 21 for 1 to 5
    boxes. These bounds are measured so that every accepted setting makes levels for seeds of every split
    (:func:`~envs.sokoban_levels.check_level_settings`). ``max_turns``, ``max_actions_per_turn``: at least 1.
    ``render_mode``: ``None``, ``"ansi"`` (the map) or ``"rgb_array"`` (``cell_pixels`` pixels per cell, an
    integer in [5, 256]). Every argument is checked here, with a ``ValueError`` naming it and its range.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        difficulty: str = "simple",
        *,
        dim: tuple[int, int] | None = None,
        num_boxes: int | None = None,
        min_solution_length: int | None = None,
        max_solution_length: int | None = None,
        max_turns: int | None = None,
        max_actions_per_turn: int | None = None,
        invalid_output: str = "reprompt",
        invalid_penalty: float = DEFAULT_INVALID_PENALTY,
        render_mode: str | None = None,
        cell_pixels: int = 28,
    ):
        if not isinstance(difficulty, str) or difficulty not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty {difficulty!r}; choose from {sorted(DIFFICULTIES)}")
        base = DIFFICULTIES[difficulty]
        self.difficulty = difficulty
        dim = dim if dim is not None else base.dim
        num_boxes = num_boxes if num_boxes is not None else base.num_boxes
        min_length = min_solution_length if min_solution_length is not None else base.min_solution_length
        max_length = max_solution_length if max_solution_length is not None else base.max_solution_length
        check_level_settings(dim, num_boxes, min_length, max_length)
        self.dim = (int(dim[0]), int(dim[1]))
        self.num_boxes = int(num_boxes)
        self.min_solution_length = int(min_length)
        self.max_solution_length = int(max_length)
        self.max_actions_per_turn = check_int(
            "max_actions_per_turn",
            max_actions_per_turn if max_actions_per_turn is not None else base.max_actions_per_turn,
            1,
        )
        self.cell_pixels = check_int("cell_pixels", cell_pixels, *CELL_PIXELS_RANGE)
        super().__init__(
            max_turns=max_turns if max_turns is not None else base.max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        self.level: Level | None = None
        self._given_level: Level | None = None
        self._split = "train"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._split = split_of_reset_seed(seed)
        given = (options or {}).get("level")
        if given is not None and not isinstance(given, str | Level):
            raise ValueError(f"options['level'] must be a Level or a map string, got {type(given).__name__}")
        self._given_level = level_from_text(given) if isinstance(given, str) else given
        return super().reset(seed=seed, options=options)

    # ----------------------------------------------------------------- MultiTurnEnv hooks
    def _new_task(self) -> str:
        if self._given_level is not None:
            self.level = self._given_level
        else:
            self.level = generate_level(
                self.np_random,
                dim=self.dim,
                num_boxes=self.num_boxes,
                min_length=self.min_solution_length,
                max_length=self.max_solution_length,
                split=self._split,
            )
        self._walls = self.level.walls
        self._targets = np.zeros(self._walls.shape, dtype=bool)
        self._targets[tuple(zip(*self.level.targets, strict=True))] = True
        self._boxes = np.zeros(self._walls.shape, dtype=bool)
        self._boxes[tuple(zip(*self.level.boxes, strict=True))] = True
        self._player = self.level.player
        return (
            "Sokoban: push every box (X) onto a target (O). You push boxes, never pull, one at a time.\n"
            f"{LEGEND}\n{self.format_reminder()}\n{self._state_text()}"
        )

    def _parse(self, response: str) -> Parsed:
        return parse_moves(response, self.max_actions_per_turn)

    def _apply(self, action: list[str]) -> Outcome:
        reward = 0.0
        executed = effective = 0
        solved = False
        for move in action:
            executed += 1
            moved, step_reward = self._move(move)
            reward += step_reward
            effective += moved
            solved = bool((self._boxes == self._targets).all())
            if solved:
                break
        text = self._state_text()
        if solved:
            text = f"Solved: every box is on a target.\n{text}"
        return Outcome(
            reward=round(reward, 6),  # sums of -0.1 otherwise print as 10.700000000000001
            observation=text,
            terminated=solved,
            success=solved,
            effective=effective > 0,
            info={"moves_executed": executed, "moves_effective": effective},
        )

    def _state_text(self) -> str:
        return f"Map:\n{self.map_text()}"

    def _task_info(self) -> dict[str, Any]:
        return {
            "optimal_length": self.level.optimal_length,
            "boxes_on_target": int((self._boxes & self._targets).sum()),
            "state_key": self.state_key(),
        }

    def state_key(self) -> str:
        """The canonical state (docs/adding_an_env.md, "State keys"): the map text, which holds the room
        (walls and targets, the level's identity), the boxes and the agent, so equal keys are equal states."""
        return f"Sokoban\n{self.map_text()}"

    def _render_image(self) -> np.ndarray:
        return compose_tiles(self._tile_ids(), _sokoban_tiles(self.cell_pixels))

    def format_reminder(self) -> str:
        return format_instruction(self.max_actions_per_turn)

    # ----------------------------------------------------------------- game logic
    def _move(self, move: str) -> tuple[bool, float]:
        """One move: (whether the agent moved, its reward)."""
        dr, dc = DELTAS[move]
        row, col = self._player
        nxt = (row + dr, col + dc)
        if self._walls[nxt]:
            return False, STEP_PENALTY
        if not self._boxes[nxt]:
            self._player = nxt
            return True, STEP_PENALTY
        beyond = (row + 2 * dr, col + 2 * dc)
        if self._walls[beyond] or self._boxes[beyond]:
            return False, STEP_PENALTY
        self._boxes[nxt] = False
        self._boxes[beyond] = True
        self._player = nxt
        reward = STEP_PENALTY
        reward += BOX_ON_TARGET * self._targets[beyond] + BOX_OFF_TARGET * self._targets[nxt]
        if (self._boxes == self._targets).all():
            reward += SOLVED_BONUS
        return True, float(reward)

    def _tile_ids(self) -> np.ndarray:
        ids = np.where(self._walls, 0, np.where(self._targets, 2, 1))
        ids[self._boxes] = np.where(self._targets[self._boxes], 4, 3)
        ids[self._player] = 6 if self._targets[self._player] else 5
        return ids

    def map_text(self) -> str:
        """The map, one line per row, cells space-separated (see the legend)."""
        chars = np.array([WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET_CHAR, PLAYER, PLAYER_ON_TARGET])
        return grid_text(chars[self._tile_ids()])

    # ----------------------------------------------------------------- oracle
    def oracle_actions(self) -> list[str]:
        """A shortest move list from the current state (empty once solved); [] if no longer solvable."""
        boxes = tuple(map(tuple, np.argwhere(self._boxes).tolist()))
        targets = tuple(map(tuple, np.argwhere(self._targets).tolist()))
        return solve(self._walls, boxes, targets, self._player) or []

    def oracle_responses(self) -> list[str]:
        """:meth:`oracle_actions` as strict answers, one per turn (a demonstration)."""
        return format_turns(self.oracle_actions(), self.max_actions_per_turn)

    def blind_response(self, rng: np.random.Generator) -> str:
        """A turn's answer that ignores the observation: ``max_actions_per_turn`` uniform moves."""
        return random_moves(rng, self.max_actions_per_turn)


@lru_cache(maxsize=8)
def _sokoban_tiles(cell: int) -> np.ndarray:
    """Tiles for wall, floor, target, box, box on target, player, player on target (in that order)."""
    floor, wall = (236, 232, 220), (96, 90, 84)
    inset = max(2, cell // 7)

    def tile(base, draw_fn=None) -> np.ndarray:
        image = Image.new("RGB", (cell, cell), base)
        draw = ImageDraw.Draw(image)
        if draw_fn is not None:
            draw_fn(draw)
        return np.asarray(image, dtype=np.uint8)

    def target(draw):
        draw.rectangle([inset, inset, cell - 1 - inset, cell - 1 - inset], outline=(200, 40, 40), width=2)

    def box(color):
        return lambda draw: draw.rectangle(
            [inset // 2, inset // 2, cell - 1 - inset // 2, cell - 1 - inset // 2],
            fill=color,
            outline=(70, 40, 10),
            width=2,
        )

    def player(draw):
        draw.ellipse([inset, inset, cell - 1 - inset, cell - 1 - inset], fill=(40, 80, 220))

    def wall_tile(draw):
        draw.line([0, cell // 2, cell, cell // 2], fill=(130, 124, 116), width=1)
        draw.line([cell // 2, 0, cell // 2, cell // 2], fill=(130, 124, 116), width=1)

    def player_on_target(draw):
        target(draw)
        player(draw)

    tiles = np.stack(
        [
            tile(wall, wall_tile),
            tile(floor),
            tile(floor, target),
            tile(floor, box((176, 112, 48))),
            tile(floor, box((70, 170, 70))),
            tile(floor, player),
            tile(floor, player_on_target),
        ]
    )
    tiles.flags.writeable = False  # shared by every env through the cache
    return tiles
