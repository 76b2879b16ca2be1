"""Sokoban levels: a reverse-play generator with an exact certificate, and an optimal solver.

Both are pure functions of their arguments (the generator draws only from the ``np.random.Generator`` it is
given), so they can be imported, tested and benchmarked without the env.

Generation (:func:`generate_level`):

1. Dig a room with gym-sokoban's random-walk topology (a walker stamps small floor masks, walls all round);
   rooms with fewer floor cells than half the interior are dug again (tiny rooms make near-duplicate levels).
2. Put the targets on random floor cells; the solved state has every box on a target. With a ``split``, the
   room and its targets are drawn again until their text (:func:`room_content`) hashes to that split
   (``envs.seeds``), so every level of one room belongs to one split: train, validation and test levels
   never share a room, let alone a level.
3. Reverse play, exhaustively: a breadth-first search over pulls and player moves, backwards from every
   solved state (the player anywhere). Each state it reaches is solvable by construction, and its BFS depth
   is exactly its optimal solution length in moves, because every reverse step undoes one forward move.
4. Pick uniformly among the reached states whose optimal length lies in ``[min_length, max_length]`` and in
   which no box starts on a target. If there is none, dig a new room.

A state is encoded as one integer, ``player * C(n, k) + rank(boxes)`` over the ``n`` floor cells and ``k``
identical boxes (``rank`` is the combinatorial number system of the sorted box cells), so the search runs in
numba over flat arrays. Both searches allocate arrays of ``n * C(n, k)`` states, so a room's state count is
bounded by :data:`MAX_SEARCH_STATES` (:func:`check_search_size`).

Settings are checked up front (:func:`check_level_settings`) against bounds measured on this generator: the
room size it can dig, the boxes a room takes and the solution lengths its rooms reach, so that every accepted
setting makes levels of all three splits.

Solving (:func:`solve`): a forward BFS over the same encoding from any state, returning a shortest action list
(fewest moves). Actions are ``"Up"``, ``"Down"``, ``"Left"``, ``"Right"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import NamedTuple

import numpy as np
from numba import njit

from envs.base import check_int, draw_in_split
from envs.gridworld import DELTAS as GRID_DELTAS
from envs.gridworld import DIRECTIONS, grid_text

DELTAS = tuple(GRID_DELTAS[name] for name in DIRECTIONS)
_DELTA_ARRAY = np.array(DELTAS, dtype=np.int64)
# Index of the opposite direction: Up <-> Down, Left <-> Right.
_OPPOSITE = np.array([1, 0, 3, 2], dtype=np.int64)

# gym-sokoban's room topology: 3x3 floor stamps, and the walker's chance to turn at each step.
_ROOM_MASKS = np.array(
    [
        [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
        [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
        [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
        [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
    ],
    dtype=bool,
)
_P_CHANGE_DIRECTION = 0.35

# The most search states (player cell x box set: n * C(n, k) over n floor cells and k boxes) a room may have.
# Reverse play and the solver allocate about 14 + 8k and 17 + 8k bytes per state, so this caps one search near
# 120 MB (k = 3). It allows 8x8 rooms with up to 4 boxes, 10x10 with 3 and 12x12 with 2; 12x12 with 4 boxes
# would need 392 million states (38 GB).
MAX_SEARCH_STATES = 3_000_000

# The bounds below are measured: for each of the 937 dim/box-count pairs they accept (both orientations),
# 300 rooms with targets were dug and fully reverse-played. Every pair digs a room in at least 2.4% of walks,
# and at every length from MIN_MAX_LENGTH to longest_min_length at least 5% of its rooms have a level of
# exactly that length, so generate_level (1000 tries) practically never fails. SokobanEnv resets then took at
# most 0.3 s (one process) for seeds of all three splits, at the 120 weakest or slowest of those windows
# [L, L] (30 seeds a split) and at every window of interiors under 17 cells (100 seeds a split), where the few
# rooms are split by content hash.
#
# Interior cells, (height - 2) * (width - 2). The walker (1.7 * (height + width) steps) digs half of a larger
# interior too rarely: 12x12 (100 cells) in 5% of walks, 13x13 in 2%, 14x14 in 0.3%, 15x15 never (a room draw
# gives up after 1000 walks); a 3x102 corridor in 2.4%. Below 9 cells there are so few rooms that some split
# has none with a level of some length (3x5, 3x10, 4x5).
MIN_INTERIOR, MAX_INTERIOR = 9, 100
# Interior cells per box: with more boxes, too few rooms have a state with every box off its target.
INTERIOR_PER_BOX = 5
# By box count (1 to 5; MAX_SEARCH_STATES allows no more), the least max_solution_length: every box must be
# pulled off its target, and two-row rooms (height or width 4) need the most moves for that.
MIN_MAX_LENGTH = {1: 1, 2: 3, 3: 8, 4: 12, 5: 21}


def search_states(n_floor: int, num_boxes: int) -> int:
    """The size of the search space of a room with ``n_floor`` floor cells and ``num_boxes`` boxes."""
    return n_floor * comb(n_floor, num_boxes)


def check_search_size(dim: tuple[int, int], num_boxes: int) -> None:
    """Raise ``ValueError`` naming ``dim`` and ``num_boxes`` unless every room of ``dim`` fits the bound.

    A room's floor is at most its interior, ``(dim[0] - 2) * (dim[1] - 2)`` cells, so the interior's state
    count bounds every room's.
    """
    interior = (dim[0] - 2) * (dim[1] - 2)
    states = search_states(interior, num_boxes)
    if states > MAX_SEARCH_STATES:
        raise ValueError(
            f"dim={tuple(dim)} with num_boxes={num_boxes} allows {states:,} search states (interior of "
            f"{interior} cells), over the bound of {MAX_SEARCH_STATES:,} (envs.sokoban_levels."
            f"MAX_SEARCH_STATES); use a smaller dim or fewer boxes (8x8 takes 4 boxes, 10x10 3, 12x12 2)"
        )


@dataclass(frozen=True, eq=False)
class Level:
    """A Sokoban start state. Cells are ``(row, col)``; ``walls`` is a bool ``(H, W)`` array (True = wall).

    Checked on construction (``ValueError``): the border is all wall, there are as many distinct targets as
    distinct boxes (at least one), player, boxes and targets are on floor, the player is not on a box, the
    level is not already solved, and ``optimal_length`` is at least 1.
    """

    walls: np.ndarray
    targets: tuple[tuple[int, int], ...]
    boxes: tuple[tuple[int, int], ...]
    player: tuple[int, int]
    optimal_length: int

    def __post_init__(self):
        walls = np.asarray(self.walls, dtype=bool)
        if walls.ndim != 2 or min(walls.shape) < 3:
            raise ValueError(f"Level.walls must be a 2-D array of at least 3x3, got shape {walls.shape}")
        if not (walls[[0, -1], :].all() and walls[:, [0, -1]].all()):
            raise ValueError(
                "Level.walls must have an all-wall border (True on the first and last row/column)"
            )
        object.__setattr__(self, "walls", walls)
        boxes, targets = set(self.boxes), set(self.targets)
        if not boxes or len(boxes) != len(self.boxes) or len(targets) != len(self.targets):
            raise ValueError("a Level needs at least one box, and no box or target listed twice")
        if len(boxes) != len(targets):
            raise ValueError(f"a Level needs as many targets as boxes, got {len(targets)} and {len(boxes)}")
        for cell in (*boxes, *targets, self.player):
            if not (len(cell) == 2 and 0 <= cell[0] < walls.shape[0] and 0 <= cell[1] < walls.shape[1]):
                raise ValueError(f"Level cell {cell} is outside the {walls.shape} map")
            if walls[cell[0], cell[1]]:
                raise ValueError(f"Level cell {cell} (player, box or target) is a wall")
        if tuple(self.player) in boxes:
            raise ValueError(f"the Level's player {self.player} stands on a box")
        if boxes == targets:
            raise ValueError("the Level is already solved (every box on a target); nothing to play")
        check_int("Level.optimal_length", self.optimal_length, 1)


def level_from_text(text: str) -> Level:
    """A level from a map in the env's characters (``#`` wall, ``_`` floor, ``O`` target, ``X`` box,
    ``*`` box on target, ``P`` player, ``S`` player on target), with its optimal length from :func:`solve`.

    Raises ``ValueError`` if the map is malformed (rows of unequal length, unknown characters, not exactly
    one player, a border that is not all wall, boxes and targets of different counts) or unsolvable.
    """
    rows = [row for row in text.strip().splitlines() if row.strip()]
    if not rows or len({len(row) for row in rows}) != 1:
        raise ValueError("a level map needs equally long, non-empty rows")
    grid = np.array([list(row) for row in rows])
    if not np.isin(grid, list("#_OX*PS")).all():
        raise ValueError("unknown map character; use # _ O X * P S")
    walls = grid == "#"
    if min(walls.shape) < 3 or not (walls[[0, -1], :].all() and walls[:, [0, -1]].all()):
        raise ValueError("the map border must be all wall (#)")

    def cells(chars: str) -> tuple[tuple[int, int], ...]:
        return tuple((int(r), int(c)) for r, c in np.argwhere(np.isin(grid, list(chars))))

    boxes, targets, players = cells("X*"), cells("O*S"), cells("PS")
    if len(players) != 1:
        raise ValueError(f"a level needs exactly one player, found {len(players)}")
    player = players[0]
    if boxes and set(boxes) == set(targets):
        raise ValueError("the level is already solved (every box on a target); nothing to play")
    solution = solve(walls, boxes, targets, player)
    if solution is None:
        raise ValueError("the level is not solvable")
    return Level(walls=walls, targets=targets, boxes=boxes, player=player, optimal_length=len(solution))


# ----------------------------------------------------------------------------------------- room topology
def dig_room(rng: np.random.Generator, dim: tuple[int, int], steps: int) -> np.ndarray:
    """gym-sokoban's room topology: a random walk stamping floor masks. Returns a bool floor array.

    The walker's centres stay inside the border and consecutive centres touch, so the floor is connected.
    """
    height, width = dim
    floor = np.zeros(dim, dtype=bool)
    turn = rng.random(steps) < _P_CHANGE_DIRECTION
    new_dir = rng.integers(0, 4, size=steps)
    mask_ids = rng.integers(0, len(_ROOM_MASKS), size=steps)
    direction = int(rng.integers(0, 4))
    row = int(rng.integers(1, height - 1))
    col = int(rng.integers(1, width - 1))
    _walk(floor, turn, new_dir, mask_ids, direction, row, col, _ROOM_MASKS, _DELTA_ARRAY)
    floor[[0, -1], :] = False
    floor[:, [0, -1]] = False
    return floor


@njit(cache=True)
def _walk(floor, turn, new_dir, mask_ids, direction, row, col, masks, deltas):
    """The walker of :func:`dig_room`, in numba (held-out splits dig about 20 rooms per level)."""
    height, width = floor.shape
    for step in range(turn.shape[0]):
        if turn[step]:
            direction = new_dir[step]
        row = min(max(row + deltas[direction, 0], 1), height - 2)
        col = min(max(col + deltas[direction, 1], 1), width - 2)
        for i in range(3):
            for j in range(3):
                if masks[mask_ids[step], i, j]:
                    floor[row - 1 + i, col - 1 + j] = True


def room_steps(dim: tuple[int, int]) -> int:
    """gym-sokoban's walk length for a room of ``dim``."""
    return int(1.7 * (dim[0] + dim[1]))


# ----------------------------------------------------------------------------------------- encoding
def _floor_tables(walls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Floor cells ``(n, 2)``, the cell -> floor index map (-1 for walls), and floor neighbours ``(n, 4)``."""
    height, width = walls.shape
    cells = np.argwhere(~walls)
    index = np.full(walls.shape, -1, dtype=np.int64)
    index[cells[:, 0], cells[:, 1]] = np.arange(len(cells))
    padded = np.full((height + 2, width + 2), -1, dtype=np.int64)
    padded[1:-1, 1:-1] = index
    neighbours = np.empty((len(cells), 4), dtype=np.int64)
    for d, (dr, dc) in enumerate(DELTAS):
        neighbours[:, d] = padded[cells[:, 0] + 1 + dr, cells[:, 1] + 1 + dc]
    return cells, index, neighbours


def _binomials(n: int, k: int) -> np.ndarray:
    """``table[m, j] = C(m, j)`` for m <= n, j <= k, as int64."""
    table = np.zeros((n + 1, k + 1), dtype=np.int64)
    for m in range(n + 1):
        for j in range(k + 1):
            table[m, j] = comb(m, j)
    return table


@njit(cache=True)
def _rank(boxes, binom):
    """Combinatorial-number-system rank of a sorted box tuple."""
    r = 0
    for i in range(boxes.shape[0]):
        r += binom[boxes[i], i + 1]
    return r


@njit(cache=True)
def _sorted_replace(boxes, old, new, out):
    """``out`` = ``boxes`` with ``old`` replaced by ``new``, sorted (k is tiny: insertion sort)."""
    k = boxes.shape[0]
    for i in range(k):
        out[i] = new if boxes[i] == old else boxes[i]
    for i in range(1, k):
        v = out[i]
        j = i - 1
        while j >= 0 and out[j] > v:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = v


# ----------------------------------------------------------------------------------------- reverse play
@njit(cache=True)
def _reverse_play(neighbours, targets, is_target, binom, min_length, max_length):
    """Exhaustive reverse play from all solved states, up to depth ``max_length``.

    Returns the candidate starts (player, sorted boxes, depth) with depth in [min_length, max_length] and no
    box on a target, in BFS order.
    """
    n = neighbours.shape[0]
    k = targets.shape[0]
    n_box_sets = binom[n, k]
    seen = np.zeros(n * n_box_sets, dtype=np.uint8)
    queue_player = np.empty(n * n_box_sets, dtype=np.int64)
    queue_boxes = np.empty((n * n_box_sets, k), dtype=np.int64)
    queue_depth = np.empty(n * n_box_sets, dtype=np.int32)
    is_candidate = np.zeros(n * n_box_sets, dtype=np.uint8)
    occupied = np.zeros(n, dtype=np.uint8)
    solved = np.sort(targets)
    solved_rank = _rank(solved, binom)
    for i in range(k):
        occupied[solved[i]] = 1

    tail = 0
    for p in range(n):
        if occupied[p] == 0:
            seen[p * n_box_sets + solved_rank] = 1
            queue_player[tail] = p
            queue_boxes[tail] = solved
            queue_depth[tail] = 0
            tail += 1
    for i in range(k):
        occupied[solved[i]] = 0

    pulled = np.empty(k, dtype=np.int64)
    n_cand = 0
    head = 0
    while head < tail:
        p = queue_player[head]
        boxes = queue_boxes[head]
        depth = queue_depth[head]
        head += 1
        if depth >= min_length:
            on_target = False
            for i in range(k):
                if is_target[boxes[i]]:
                    on_target = True
            if not on_target:
                is_candidate[head - 1] = 1
                n_cand += 1
        if depth >= max_length:
            continue
        for i in range(k):
            occupied[boxes[i]] = 1
        rank = _rank(boxes, binom)
        for d in range(4):
            # Undo a forward move into p from q: the player steps back to q, and may pull the box in front.
            q = neighbours[p, d]
            if q < 0 or occupied[q]:
                continue
            code = q * n_box_sets + rank
            if seen[code] == 0:
                seen[code] = 1
                queue_player[tail] = q
                queue_boxes[tail] = boxes
                queue_depth[tail] = depth + 1
                tail += 1
            c = neighbours[p, _OPPOSITE[d]]
            if c >= 0 and occupied[c]:
                _sorted_replace(boxes, c, p, pulled)
                code = q * n_box_sets + _rank(pulled, binom)
                if seen[code] == 0:
                    seen[code] = 1
                    queue_player[tail] = q
                    queue_boxes[tail] = pulled
                    queue_depth[tail] = depth + 1
                    tail += 1
        for i in range(k):
            occupied[boxes[i]] = 0
    # The candidates are copied out of the queue (rather than kept alongside it) to halve peak memory.
    cand_player = np.empty(n_cand, dtype=np.int64)
    cand_boxes = np.empty((n_cand, k), dtype=np.int64)
    cand_depth = np.empty(n_cand, dtype=np.int64)
    j = 0
    for i in range(tail):
        if is_candidate[i]:
            cand_player[j] = queue_player[i]
            cand_boxes[j] = queue_boxes[i]
            cand_depth[j] = queue_depth[i]
            j += 1
    return cand_player, cand_boxes, cand_depth


class Room(NamedTuple):
    """A dug room with its targets: walls, floor cells ``(n, 2)`` in row-major order, target floor indices."""

    walls: np.ndarray
    cells: np.ndarray
    targets: np.ndarray


def room_content(room: Room) -> str:
    """The room's canonical text (``#`` wall, ``_`` floor, ``O`` target): what decides its levels' split."""
    chars = np.where(room.walls, "#", "_")
    chars[room.cells[room.targets, 0], room.cells[room.targets, 1]] = "O"
    return grid_text(chars)


def max_boxes(dim: tuple[int, int]) -> int:
    """The most boxes a room of ``dim`` takes: one per :data:`INTERIOR_PER_BOX` interior cells, and one in a
    corridor (height or width 3), where the player cannot pass a box to pull the next one off its target."""
    if min(dim) == 3:
        return 1
    return max(1, (dim[0] - 2) * (dim[1] - 2) // INTERIOR_PER_BOX)


def longest_min_length(dim: tuple[int, int], num_boxes: int) -> int:
    """The largest ``min_length`` for ``dim`` and ``num_boxes``: ``(num_boxes + 1) / 5`` of the interior.

    Measured (see :data:`MIN_INTERIOR`): the longest length that 5% of rooms reach is at least 0.44, 0.71,
    1.06, 1.35 and 1.46 times the interior cells for 1 to 5 boxes (the least in the largest or two-row rooms).
    """
    return (num_boxes + 1) * (dim[0] - 2) * (dim[1] - 2) // 5


def check_level_settings(dim: tuple[int, int], num_boxes: int, min_length: int, max_length: int) -> None:
    """Raise ``ValueError`` naming the setting, its range and the fix unless levels of these settings can be
    generated for seeds of every split (the measured bounds at :data:`MIN_INTERIOR`)."""
    if not (isinstance(dim, tuple | list) and len(dim) == 2):
        raise ValueError(f"dim must be a (height, width) pair of integers >= 3, got {dim!r}")
    height, width = (check_int("dim", side, 3) for side in dim)
    dim = (height, width)
    interior = (height - 2) * (width - 2)
    if not MIN_INTERIOR <= interior <= MAX_INTERIOR:
        raise ValueError(
            f"dim={dim} has {interior} interior cells ((height - 2) * (width - 2)); rooms need "
            f"{MIN_INTERIOR} to {MAX_INTERIOR} (envs.sokoban_levels.MIN_INTERIOR, MAX_INTERIOR: the digger "
            f"rarely fills a larger one, and a smaller one has too few rooms for every split); use a dim in "
            f"that range, such as (5, 5) to (12, 12), (6, 27) or (4, 52)"
        )
    most = max_boxes(dim)
    check_int(f"num_boxes (for dim={dim})", num_boxes, 1)
    if num_boxes > most:
        raise ValueError(
            f"num_boxes (for dim={dim}) must be an integer in [1, {most}], got {num_boxes}: a room takes one "
            f"box per {INTERIOR_PER_BOX} interior cells (one in a corridor of height or width 3); use fewer "
            f"boxes or a larger dim"
        )
    check_search_size(dim, num_boxes)
    check_int("min_solution_length", min_length, 1)
    longest = longest_min_length(dim, num_boxes)
    if min_length > longest:
        raise ValueError(
            f"min_solution_length (for dim={dim}, num_boxes={num_boxes}) must be an integer in "
            f"[1, {longest}], got {min_length}: too few rooms have a level that long ((num_boxes + 1) / 5 of "
            f"the {interior} interior cells); use a smaller min_solution_length or a larger dim"
        )
    check_int("max_solution_length", max_length, min_length)
    least = MIN_MAX_LENGTH[num_boxes]
    if max_length < least:
        raise ValueError(
            f"max_solution_length (for num_boxes={num_boxes}) must be an integer >= {least}, got "
            f"{max_length}: too few rooms have a level that short (each box must leave its target); use a "
            f"larger max_solution_length or fewer boxes"
        )


def generate_level(
    rng: np.random.Generator,
    *,
    dim: tuple[int, int] = (6, 6),
    num_boxes: int = 1,
    min_length: int = 1,
    max_length: int = 30,
    max_tries: int = 1000,
    split: str | None = None,
) -> Level:
    """A random level whose optimal solution takes between ``min_length`` and ``max_length`` moves.

    Solvable by construction (reverse play from the solved state); no box starts on a target; at least half
    of the room's interior is floor. With ``split`` (a split of ``envs.seeds``), only rooms whose
    :func:`room_content` hashes to that split are used. Raises ``ValueError`` for settings outside the
    measured bounds or over :data:`MAX_SEARCH_STATES` (:func:`check_level_settings`), and ``RuntimeError`` if
    ``max_tries`` rooms in a row have no such state (for accepted settings, practically never).
    """
    check_level_settings(dim, num_boxes, min_length, max_length)
    dim = (int(dim[0]), int(dim[1]))
    steps = room_steps(dim)
    min_floor = max(num_boxes + 2, (dim[0] - 2) * (dim[1] - 2) // 2)

    def draw_room() -> Room:
        for _ in range(max_tries):
            floor = dig_room(rng, dim, steps)
            if floor.sum() >= min_floor:
                cells = np.argwhere(floor)
                targets = np.sort(rng.choice(len(cells), size=num_boxes, replace=False)).astype(np.int64)
                return Room(~floor, cells, targets)
        raise RuntimeError(f"no room of {dim} with {min_floor} floor cells in {max_tries} tries")

    settings = f"Sokoban dim={dim}, num_boxes={num_boxes}"
    for _ in range(max_tries):
        room = (
            draw_room() if split is None else draw_in_split(draw_room, room_content, split, settings=settings)
        )
        cells, _, neighbours = _floor_tables(room.walls)
        n = len(cells)
        is_target = np.zeros(n, dtype=np.uint8)
        is_target[room.targets] = 1
        players, boxes, depths = _reverse_play(
            neighbours, room.targets, is_target, _binomials(n, num_boxes), min_length, max_length
        )
        if len(players) == 0:
            continue
        pick = int(rng.integers(len(players)))
        return Level(
            walls=room.walls,
            targets=tuple((int(r), int(c)) for r, c in cells[room.targets]),
            boxes=tuple((int(r), int(c)) for r, c in cells[boxes[pick]]),
            player=(int(cells[players[pick], 0]), int(cells[players[pick], 1])),
            optimal_length=int(depths[pick]),
        )
    raise RuntimeError(
        f"no level with {num_boxes} boxes and a {min_length}..{max_length}-move solution in {max_tries} "
        f"rooms of {dim}"
    )


# ----------------------------------------------------------------------------------------- solver
@njit(cache=True)
def _forward_bfs(neighbours, is_target, start_player, start_boxes, binom, max_states):
    """Shortest move sequence (direction indices) to a state with every box on a target; -1 if none."""
    n = neighbours.shape[0]
    k = start_boxes.shape[0]
    n_box_sets = binom[n, k]
    total = n * n_box_sets
    parent = np.full(total, -1, dtype=np.int64)
    move = np.zeros(total, dtype=np.int8)
    queue_player = np.empty(total, dtype=np.int64)
    queue_boxes = np.empty((total, k), dtype=np.int64)
    occupied = np.zeros(n, dtype=np.uint8)
    pushed = np.empty(k, dtype=np.int64)

    start_code = start_player * n_box_sets + _rank(start_boxes, binom)
    parent[start_code] = start_code
    queue_player[0] = start_player
    queue_boxes[0] = start_boxes
    head = 0
    tail = 1
    goal = -1
    while head < tail and tail <= max_states:
        p = queue_player[head]
        boxes = queue_boxes[head]
        head += 1
        code = p * n_box_sets + _rank(boxes, binom)
        done = True
        for i in range(k):
            if not is_target[boxes[i]]:
                done = False
        if done:
            goal = code
            break
        for i in range(k):
            occupied[boxes[i]] = 1
        rank = _rank(boxes, binom)
        for d in range(4):
            q = neighbours[p, d]
            if q < 0:
                continue
            if occupied[q]:
                beyond = neighbours[q, d]
                if beyond < 0 or occupied[beyond]:
                    continue
                _sorted_replace(boxes, q, beyond, pushed)
                next_code = q * n_box_sets + _rank(pushed, binom)
                if parent[next_code] < 0:
                    parent[next_code] = code
                    move[next_code] = d
                    queue_player[tail] = q
                    queue_boxes[tail] = pushed
                    tail += 1
            else:
                next_code = q * n_box_sets + rank
                if parent[next_code] < 0:
                    parent[next_code] = code
                    move[next_code] = d
                    queue_player[tail] = q
                    queue_boxes[tail] = boxes
                    tail += 1
        for i in range(k):
            occupied[boxes[i]] = 0
    if goal < 0:
        return np.full(1, -1, dtype=np.int64)
    length = 0
    code = goal
    while parent[code] != code:
        length += 1
        code = parent[code]
    path = np.empty(length, dtype=np.int64)
    code = goal
    for i in range(length - 1, -1, -1):
        path[i] = move[code]
        code = parent[code]
    return path


def solve(
    walls: np.ndarray,
    boxes: tuple[tuple[int, int], ...],
    targets: tuple[tuple[int, int], ...],
    player: tuple[int, int],
    *,
    max_states: int = 5_000_000,
) -> list[str] | None:
    """A shortest solution (fewest moves) as a list of directions, or None if unsolvable.

    ``walls`` is a bool array; cells off the array count as walls. Boxes are identical and there are as many
    targets as boxes. ``max_states`` bounds the search (None is also returned when it is exceeded). Raises
    ``ValueError`` when the level's search space exceeds :data:`MAX_SEARCH_STATES` (the search allocates it).
    """
    if len(boxes) != len(targets) or not boxes:
        raise ValueError(f"need as many boxes as targets (>= 1), got {len(boxes)} and {len(targets)}")
    _, index, neighbours = _floor_tables(np.asarray(walls, dtype=bool))
    n = len(neighbours)
    states = search_states(n, len(boxes))
    if states > MAX_SEARCH_STATES:
        raise ValueError(
            f"a level with {n} floor cells and {len(boxes)} boxes has {states:,} search states, over the "
            f"bound of {MAX_SEARCH_STATES:,} (envs.sokoban_levels.MAX_SEARCH_STATES); use a smaller level"
        )
    box_ids = np.sort(np.array([index[cell] for cell in boxes], dtype=np.int64))
    target_ids = np.array([index[cell] for cell in targets], dtype=np.int64)
    player_id = int(index[player])
    if player_id < 0 or (box_ids < 0).any() or (target_ids < 0).any():
        raise ValueError("player, boxes and targets must be on floor cells")
    is_target = np.zeros(n, dtype=np.uint8)
    is_target[target_ids] = 1
    path = _forward_bfs(neighbours, is_target, player_id, box_ids, _binomials(n, len(boxes)), max_states)
    if len(path) == 1 and path[0] < 0:
        return None
    return [DIRECTIONS[d] for d in path]
