"""FrozenLake as multi-turn text and vision envs: walk to the goal without falling into a hole."""

from __future__ import annotations

import math
from collections import deque
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from envs.base import (
    DEFAULT_INVALID_PENALTY,
    MultiTurnEnv,
    Outcome,
    Parsed,
    check_bool,
    check_int,
    check_real,
    draw_in_split,
)
from envs.gridworld import (
    DELTAS,
    DIRECTIONS,
    compose_tiles,
    format_instruction,
    format_turns,
    grid_text,
    parse_moves,
    random_moves,
)
from envs.seeds import split_of_reset_seed

GOAL_REWARD = 1.0
# A slippery move goes the intended way or to either side, each with probability 1/3 (as Gymnasium).
_SIDEWAYS = {
    "Up": ("Left", "Right"),
    "Down": ("Left", "Right"),
    "Left": ("Up", "Down"),
    "Right": ("Up", "Down"),
}
LEGEND = "Legend: P you, _ ice, H hole, G goal."
IMAGE_LEGEND = "In the image you are the red circle, the goal is green, holes are dark blue, ice is white."

# The map text takes two characters a cell: 128x128 (32,768) keeps an observation inside AnyText's bound.
MAX_SIZE = 128
# Tiles smaller than 5 pixels cannot hold the agent's circle (_lake_tiles); 256 keeps an 8x8 image at 2048^2.
CELL_PIXELS_RANGE = (5, 256)
# The longest image side, size * cell_pixels: 128 x 28 fits; 128 x 256 would be a 3 GB image every step, and
# its observation space alone would allocate 24 GB.
MAX_IMAGE_SIDE = 4096
# Default move budget: 2.5 x the longest start-goal Manhattan distance 2 (size - 1), i.e. 5 (size - 1) moves.
# It keeps the FrozenLake settings file's budget at 4x4 (experiments/settings/frozen_lake.yaml: 5 turns of
# 3 moves) and grows with the map, where holes lengthen the detours.
BUDGET_MOVES_PER_SIZE = 5


def default_max_turns(size: int, max_actions_per_turn: int) -> int:
    """The default turn budget: ``5 (size - 1)`` moves, in turns of ``max_actions_per_turn`` moves."""
    return math.ceil(BUDGET_MOVES_PER_SIZE * (size - 1) / max_actions_per_turn)


def map_content(desc: list[str]) -> str:
    """The map's canonical text (its rows on lines): what decides the map's split (``envs.seeds``)."""
    return "\n".join(desc)


def generate_map(
    rng: np.random.Generator,
    size: int = 4,
    hole_prob: float = 0.2,
    max_tries: int = 10_000,
    *,
    max_path_length: int | None = None,
) -> list[str]:
    """A random ``size`` x ``size`` map in Gymnasium's format (rows of ``S``, ``F``, ``H``, ``G``).

    Start and goal are distinct random cells at Manhattan distance at least ``size - 1``; every other cell is
    a hole with probability ``hole_prob``. Maps without a hole-free path from start to goal, or whose
    shortest path takes more than ``max_path_length`` moves, are drawn again, so a path always exists (and
    fits the budget).
    """
    if size < 2:
        raise ValueError(f"size must be >= 2, got {size}")
    if not 0.0 <= hole_prob < 1.0:
        raise ValueError(f"hole_prob must be in [0, 1), got {hole_prob}")
    for _ in range(max_tries):
        start, goal = rng.integers(0, size, size=(2, 2))
        if abs(start - goal).sum() < size - 1:
            continue
        grid = np.where(rng.random((size, size)) < hole_prob, "H", "F")
        grid[tuple(start)] = "S"
        grid[tuple(goal)] = "G"
        desc = ["".join(row) for row in grid]
        path = shortest_path(desc)
        if path is not None and (max_path_length is None or len(path) <= max_path_length):
            return desc
    limit = "" if max_path_length is None else f" of at most {max_path_length} moves"
    raise RuntimeError(
        f"no {size}x{size} map with a path{limit} in {max_tries} tries at hole_prob={hole_prob}"
    )


def shortest_path(desc: list[str], start: tuple[int, int] | None = None) -> list[str] | None:
    """A shortest hole-free move list from ``start`` (default the ``S`` cell) to ``G``; None if there is none.

    Non-slippery moves; ties are broken in the order Up, Down, Left, Right.
    """
    size_r, size_c = len(desc), len(desc[0])
    if start is None:
        start = next((r, c) for r in range(size_r) for c in range(size_c) if desc[r][c] == "S")
    if desc[start[0]][start[1]] == "H":
        return None
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if desc[cell[0]][cell[1]] == "G":
            moves = []
            while previous[cell] is not None:
                cell, move = previous[cell]
                moves.append(move)
            return moves[::-1]
        for move in DIRECTIONS:
            r, c = cell[0] + DELTAS[move][0], cell[1] + DELTAS[move][1]
            if 0 <= r < size_r and 0 <= c < size_c and desc[r][c] != "H" and (r, c) not in previous:
                previous[(r, c)] = (cell, move)
                queue.append((r, c))
    return None


def _check_map(desc: list[str], size: int) -> None:
    """Raise ``ValueError`` unless ``desc`` is a ``size`` x ``size`` map with one S, one G and a path."""
    if len(desc) != size or any(len(row) != size for row in desc):
        raise ValueError(f"the map must be {size}x{size}")
    cells = "".join(desc)
    if set(cells) - set("SFHG") or cells.count("S") != 1 or cells.count("G") != 1:
        raise ValueError("the map needs one S, one G, and otherwise only F and H")
    if shortest_path(desc) is None:
        raise ValueError("the map has no path from S to G")


class FrozenLakeEnv(MultiTurnEnv):
    """FrozenLake (text): cross a frozen lake from the start to the goal without falling into a hole.

    ## Description
    A ``size`` x ``size`` grid of ice, holes and one goal. The agent walks Up, Down, Left or Right; a move off
    the grid leaves it in place. The map is random but always has a hole-free path, and it is rebuilt from the
    seed on every reset. With ``is_slippery=True`` each move goes the intended way or to either side with
    probability 1/3 each (Gymnasium's rule); the default is non-slippery so the task is learnable.

    ## Action Space
    A string. Strict format: ``<answer>Right, Down</answer>`` with 1 to ``max_actions_per_turn`` moves from
    Up, Down, Left, Right, executed in order. Lenient fallback: without a complete tag pair, the direction
    words on the last non-empty line (``format_ok`` False). Anything else goes to the ``invalid_output``
    policy (:mod:`envs.gridworld` has the exact rules).

    ## Observation Space
    Text (``AnyText``). The first observation states the task, the legend, the answer format and the map;
    later ones show the map after the turn. Map characters: ``P`` the agent, ``_`` ice, ``H`` hole,
    ``G`` goal.

    ## Starting State
    The agent on the start cell of a map from :func:`generate_map` (start and goal random and at Manhattan
    distance at least ``size - 1``, each other cell a hole with probability ``hole_prob``), whose shortest
    path fits the move budget ``max_turns * max_actions_per_turn`` (longer maps are drawn again).
    Splits by content: a seed of a split of :mod:`envs.seeds` only yields maps whose text
    (:func:`map_content`) hashes to that split, so no validation or test map is ever a training map;
    ``seed=None`` draws training maps, and a seed outside every split range is a ``ValueError``. The 4x4
    space holds 875,664 maps with a path, about 5% of them (by hash) held out for validation and 5% for test.
    ``reset(options={"map": desc})`` plays a given map instead (Gymnasium's format, ``size`` x ``size``;
    any path length).
    ``reset(options={"member": i})`` (set by :mod:`envs.group`) draws the slips from an independent stream
    for group member ``i``; the map depends on the seed alone.

    ## Rewards
    +1 for reaching the goal, 0 for every other move (falling into a hole included). A response that cannot
    be used earns ``invalid_penalty`` (default -0.1).

    ## Episode End
    Terminated when the agent reaches the goal or falls into a hole (later moves of the turn are not
    executed), or on an unusable response under ``invalid_output="terminate"``. Truncated after
    ``max_turns`` turns.

    ``info`` has ``format_ok``, ``action_valid``, ``action_effective`` (the turn moved the agent),
    ``success`` (goal reached), ``turn``, ``optimal_length`` (shortest non-slippery path from the start),
    ``state_key`` (:meth:`state_key`: the map and the agent's cell, the state the next turn starts from),
    and after a valid turn ``moves_executed``, ``moves_effective`` and ``fell``.

    ## Arguments
    ```python
    gymnasium.make("freshrl/FrozenLake-v0", size=4, hole_prob=0.2, is_slippery=False, max_turns=None,
                   max_actions_per_turn=3, invalid_output="reprompt", invalid_penalty=-0.1,
                   render_mode=None, cell_pixels=28)
    ```
    ``size``: an integer in [2, 128]. ``hole_prob``: in [0, 1). ``max_turns``: at least 1; ``None`` (the
    default) gives ``ceil(5 * (size - 1) / max_actions_per_turn)`` turns (:func:`default_max_turns`: 5 turns
    of 3 moves at 4x4, 12 at 8x8), and the budget must hold the ``size - 1`` moves every map needs at least.
    ``max_actions_per_turn``: at least 1. ``render_mode``: ``None``, ``"ansi"`` (the map) or
    ``"rgb_array"`` (``cell_pixels`` pixels per cell, an integer in [5, 256], and ``size * cell_pixels`` at
    most ``MAX_IMAGE_SIDE`` = 4096 where an image is drawn). Every argument is checked here, with a
    ``ValueError`` naming it and its allowed range.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        size: int = 4,
        hole_prob: float = 0.2,
        is_slippery: bool = False,
        max_turns: int | None = None,
        max_actions_per_turn: int = 3,
        invalid_output: str = "reprompt",
        invalid_penalty: float = DEFAULT_INVALID_PENALTY,
        render_mode: str | None = None,
        cell_pixels: int = 28,
    ):
        self.size = check_int("size", size, 2, MAX_SIZE)
        self.hole_prob = check_real("hole_prob", hole_prob)
        if not 0.0 <= self.hole_prob < 1.0:
            raise ValueError(f"hole_prob must be in [0, 1), got {hole_prob}")
        self.is_slippery = check_bool("is_slippery", is_slippery)
        self.max_actions_per_turn = check_int("max_actions_per_turn", max_actions_per_turn, 1)
        self.cell_pixels = check_int("cell_pixels", cell_pixels, *CELL_PIXELS_RANGE)
        if (self.image_shape is not None or render_mode == "rgb_array") and (
            self.size * self.cell_pixels > MAX_IMAGE_SIDE
        ):
            raise ValueError(
                f"size * cell_pixels (the image side) must be at most {MAX_IMAGE_SIDE} pixels, got "
                f"{self.size} * {self.cell_pixels} = {self.size * self.cell_pixels}; lower cell_pixels"
            )
        if max_turns is None:
            max_turns = default_max_turns(self.size, self.max_actions_per_turn)
        elif check_int("max_turns", max_turns, 1) * self.max_actions_per_turn < self.size - 1:
            raise ValueError(
                f"max_turns * max_actions_per_turn must be >= size - 1 = {self.size - 1} (the fewest moves a "
                f"map needs), got {max_turns} * {self.max_actions_per_turn}; raise max_turns or use None"
            )
        if self.image_shape is not None:
            side = self.size * self.cell_pixels
            self.image_shape = (side, side, 3)
        super().__init__(
            max_turns=max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        self.desc: list[str] = []
        self._given_map: list[str] | None = None
        self._member = 0
        self._split = "train"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._split = split_of_reset_seed(seed)
        options = options or {}
        given = options.get("map")
        if given is not None:
            _check_map(given, self.size)
        self._given_map = given
        self._member = int(options.get("member", 0))
        return super().reset(seed=seed, options=options)

    # ----------------------------------------------------------------- MultiTurnEnv hooks
    def _new_task(self) -> str:
        if self._given_map is not None:
            self.desc = list(self._given_map)
        else:
            budget = self.max_turns * self.max_actions_per_turn
            self.desc = draw_in_split(
                lambda: generate_map(self.np_random, self.size, self.hole_prob, max_path_length=budget),
                map_content,
                self._split,
                settings=f"FrozenLake size={self.size}, hole_prob={self.hole_prob}, move budget {budget}",
            )
        self._grid = np.array([list(row) for row in self.desc])
        self._player = tuple(int(i) for i in np.argwhere(self._grid == "S")[0])
        self._optimal_length = len(shortest_path(self.desc))
        # Slips come from their own stream keyed by the seed and the group member, so the members of a GRPO
        # group share the map but not their luck (envs.group).
        self._slip_rng = np.random.default_rng((int(self.np_random.integers(2**63)), self._member))
        return f"{self._task_text()}\n{self.format_reminder()}\n{self._state_text()}"

    def _task_text(self) -> str:
        text = f"FrozenLake: walk from P to the goal G without stepping into a hole H.\n{LEGEND}"
        if self.is_slippery:
            text += " The ice is slippery: a move may go sideways."
        return text

    def _parse(self, response: str) -> Parsed:
        return parse_moves(response, self.max_actions_per_turn)

    def _apply(self, action: list[str]) -> Outcome:
        executed = effective = 0
        for move in action:
            executed += 1
            if self.is_slippery:
                choice = int(self._slip_rng.integers(3))
                move = move if choice == 0 else _SIDEWAYS[move][choice - 1]
            row = min(max(self._player[0] + DELTAS[move][0], 0), self.size - 1)
            col = min(max(self._player[1] + DELTAS[move][1], 0), self.size - 1)
            effective += (row, col) != self._player
            self._player = (row, col)
            if self._grid[self._player] in ("H", "G"):
                break
        cell = self._grid[self._player]
        success, fell = cell == "G", cell == "H"
        text = self._state_text()
        if success:
            text = f"You reached the goal.\n{text}"
        elif fell:
            text = f"You fell into a hole.\n{text}"
        return Outcome(
            reward=GOAL_REWARD if success else 0.0,
            observation=text,
            terminated=bool(success or fell),
            success=bool(success),
            effective=effective > 0,
            info={"moves_executed": executed, "moves_effective": effective, "fell": bool(fell)},
        )

    def _state_text(self) -> str:
        return f"Map:\n{self.map_text()}"

    def _task_info(self) -> dict[str, Any]:
        return {"optimal_length": self._optimal_length, "state_key": self.state_key()}

    def state_key(self) -> str:
        """The canonical state (docs/adding_an_env.md, "State keys"): the map, start cell included so that
        keys of different maps never coincide, and the agent's cell. Slips are luck, not state."""
        return f"FrozenLake\n{map_content(self.desc)}\nagent {self._player[0]},{self._player[1]}"

    def _render_image(self) -> np.ndarray:
        ids = np.select([self._grid == "H", self._grid == "G"], [1, 2], 0)
        ids[self._player] += 3
        return compose_tiles(ids, _lake_tiles(self.cell_pixels))

    def format_reminder(self) -> str:
        return format_instruction(self.max_actions_per_turn, example=("Right", "Down"))

    def map_text(self) -> str:
        """The map, one line per row, cells space-separated (see the legend); the start cell shows as ice."""
        chars = np.where(self._grid == "H", "H", np.where(self._grid == "G", "G", "_"))
        chars[self._player] = "P"
        return grid_text(chars)

    # ----------------------------------------------------------------- oracle
    def oracle_actions(self) -> list[str]:
        """A shortest non-slippery move list from the current cell to the goal ([] once the episode ended)."""
        return shortest_path(self.desc, self._player) or []

    def oracle_responses(self) -> list[str]:
        """:meth:`oracle_actions` as strict answers, one per turn. Replan every turn when slippery."""
        return format_turns(self.oracle_actions(), self.max_actions_per_turn)

    def blind_response(self, rng: np.random.Generator) -> str:
        """A turn's answer that ignores the observation: ``max_actions_per_turn`` uniform moves."""
        return random_moves(rng, self.max_actions_per_turn)


class FrozenLakeVisionEnv(FrozenLakeEnv):
    """FrozenLake (vision): the map is an image; the text gives only the task and the answer format.

    ## Description
    :class:`FrozenLakeEnv` with the map drawn as an RGB image, ``cell_pixels`` (default 28, one 28-pixel
    patch of Qwen2.5-VL's vision tower) per cell: ice white, holes dark blue, the goal green, the agent a red
    circle. The text never shows the map.

    ## Action Space
    As :class:`FrozenLakeEnv`: ``<answer>Right, Down</answer>``, with the same fallback and policy.

    ## Observation Space
    ``Dict(text=AnyText, image=Box(0, 255, (size * cell_pixels, size * cell_pixels, 3), uint8))``; the
    default 4x4 map gives 112x112 images. The first text states the task, the image legend and the answer
    format; later texts say what happened, and the image shows the lake after the turn.

    ## Starting State
    As :class:`FrozenLakeEnv`.

    ## Rewards
    As :class:`FrozenLakeEnv`: +1 for reaching the goal, 0 otherwise; ``invalid_penalty`` for unusable output.

    ## Episode End
    As :class:`FrozenLakeEnv`: goal or hole terminates; truncated after ``max_turns`` turns.

    ## Arguments
    ```python
    gymnasium.make("freshrl/FrozenLakeVision-v0", size=4, hole_prob=0.2, is_slippery=False, max_turns=None,
                   max_actions_per_turn=3, invalid_output="reprompt", invalid_penalty=-0.1,
                   render_mode=None, cell_pixels=28)
    ```
    ``render_mode``: ``"rgb_array"`` (the observation image) or ``"ansi"`` (the map as text, for people).
    The other arguments, their checks and the splits are as :class:`FrozenLakeEnv`'s; a seed yields the same
    map in both envs.

    ## Version History
    * v0: initial version.
    """

    # The default 4x4 map at 28 pixels a cell; FrozenLakeEnv.__init__ sets each env's own shape.
    image_shape = (112, 112, 3)

    def _task_text(self) -> str:
        text = f"FrozenLake: walk to the goal without stepping into a hole.\n{IMAGE_LEGEND}"
        if self.is_slippery:
            text += " The ice is slippery: a move may go sideways."
        return text

    def _state_text(self) -> str:
        return "The image shows the lake now."

    def render(self):
        if self.render_mode == "ansi":
            return self.map_text()
        return super().render()


@lru_cache(maxsize=8)
def _lake_tiles(cell: int) -> np.ndarray:
    """Tiles for ice, hole, goal, then the same three with the agent on them."""
    ice, hole, goal, line = (236, 244, 250), (24, 44, 104), (56, 168, 80), (170, 190, 205)
    inset = max(2, cell // 5)
    tiles = []
    for with_agent in (False, True):
        for fill in (ice, hole, goal):
            image = Image.new("RGB", (cell, cell), fill)
            draw = ImageDraw.Draw(image)
            draw.rectangle([0, 0, cell - 1, cell - 1], outline=line, width=1)
            if with_agent:
                draw.ellipse([inset, inset, cell - 1 - inset, cell - 1 - inset], fill=(220, 40, 40))
            tiles.append(np.asarray(image, dtype=np.uint8))
    stacked = np.stack(tiles)
    stacked.flags.writeable = False  # shared by every env through the cache
    return stacked
