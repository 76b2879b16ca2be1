"""Sokoban: level generator, solver optimality, rewards, oracle demonstrations, rendering."""

from collections import deque

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the envs)
from envs.seeds import seeds
from envs.sokoban import DIFFICULTIES, SokobanEnv
from envs.sokoban_levels import (
    MAX_SEARCH_STATES,
    MIN_MAX_LENGTH,
    Level,
    generate_level,
    level_from_text,
    longest_min_length,
    search_states,
    solve,
)

MOVES = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}


def exhaustive_optimum(walls: np.ndarray, boxes, targets, player) -> int | None:
    """Fewest moves to solve, by a plain breadth-first search over (player, frozenset of boxes)."""
    goal = frozenset(targets)
    start = (tuple(player), frozenset(boxes))
    depth = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        (r, c), box_set = state
        if box_set == goal:
            return depth[state]
        for dr, dc in MOVES.values():
            nxt = (r + dr, c + dc)
            if walls[nxt]:
                continue
            new_boxes = box_set
            if nxt in box_set:
                beyond = (r + 2 * dr, c + 2 * dc)
                if walls[beyond] or beyond in box_set:
                    continue
                new_boxes = (box_set - {nxt}) | {beyond}
            new_state = (nxt, new_boxes)
            if new_state not in depth:
                depth[new_state] = depth[state] + 1
                queue.append(new_state)
    return None


def play(env: SokobanEnv, moves: list[str]) -> tuple[float, bool, int]:
    """Play ``moves`` one per turn; return (return, success, turns)."""
    total, success, turns = 0.0, False, 0
    for move in moves:
        _, reward, terminated, truncated, info = env.step(f"<answer>{move}</answer>")
        total += reward
        turns += 1
        success = info["success"]
        if terminated or truncated:
            break
    return total, success, turns


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_generated_levels_respect_the_difficulty(difficulty):
    spec = DIFFICULTIES[difficulty]
    rng = np.random.default_rng(0)
    for _ in range(200):
        level = generate_level(
            rng,
            dim=spec.dim,
            num_boxes=spec.num_boxes,
            min_length=spec.min_solution_length,
            max_length=spec.max_solution_length,
        )
        assert level.walls.shape == spec.dim
        assert level.walls[[0, -1], :].all() and level.walls[:, [0, -1]].all()
        assert len(level.boxes) == len(set(level.boxes)) == spec.num_boxes
        assert len(set(level.targets)) == spec.num_boxes
        assert not set(level.boxes) & set(level.targets), "no box may start on a target"
        cells = [*level.boxes, *level.targets, level.player]
        assert not any(level.walls[cell] for cell in cells)
        assert level.player not in level.boxes
        assert spec.min_solution_length <= level.optimal_length <= spec.max_solution_length


def test_certificate_and_solver_are_optimal_against_exhaustive_search():
    rng = np.random.default_rng(1)
    levels = [generate_level(rng, dim=(6, 6), num_boxes=1, min_length=1, max_length=40) for _ in range(60)]
    levels += [generate_level(rng, dim=(7, 7), num_boxes=2, min_length=1, max_length=40) for _ in range(15)]
    for level in levels:
        reference = exhaustive_optimum(level.walls, level.boxes, level.targets, level.player)
        assert level.optimal_length == reference
        solution = solve(level.walls, level.boxes, level.targets, level.player)
        assert solution is not None and len(solution) == reference


def test_solver_on_hand_made_levels():
    corridor = level_from_text("#######\n#P_X_O#\n#######")
    assert corridor.optimal_length == 3
    assert solve(corridor.walls, corridor.boxes, corridor.targets, corridor.player) == ["Right"] * 3
    # A box in a corner can never leave it.
    walls = np.ones((5, 5), dtype=bool)
    walls[1:4, 1:4] = False
    assert solve(walls, ((1, 1),), ((3, 3),), (2, 2)) is None
    # Two boxes in a row cannot be pushed: the player must go round.
    level = level_from_text("#######\n#_____#\n#PXX_O#\n#____O#\n#######")
    assert level.optimal_length == exhaustive_optimum(level.walls, level.boxes, level.targets, level.player)
    with pytest.raises(ValueError):
        level_from_text("#####\n#PXO_\n#####")  # border not closed
    with pytest.raises(ValueError):
        level_from_text("#####\n#X_O#\n#####")  # no player


def test_rewards_follow_gym_sokoban():
    env = SokobanEnv(max_turns=10)
    env.reset(options={"level": "########\n#P_XO_O#\n#______#\n#___X__#\n#______#\n########"})
    # Into the wall: valid, costs a step, changes nothing.
    _, reward, terminated, _, info = env.step("<answer>Up</answer>")
    assert reward == pytest.approx(-0.1)
    assert info["action_valid"] and not info["action_effective"] and not terminated
    # Push the first box onto a target: -0.1 + 1 for that move.
    _, reward, _, _, info = env.step("<answer>Right, Right</answer>")
    assert reward == pytest.approx(-0.2 + 1.0)
    assert info["boxes_on_target"] == 1 and info["moves_effective"] == 2
    # Push it off again: -0.1 - 1.
    _, reward, _, _, info = env.step("<answer>Right</answer>")
    assert reward == pytest.approx(-0.1 - 1.0)
    assert info["boxes_on_target"] == 0
    # Finish: box 1 onto the far target, then box 2 up onto the first target; +10 on the solving move.
    _, reward, terminated, _, info = env.step("<answer>Right</answer>")
    assert reward == pytest.approx(-0.1 + 1.0)
    _, reward, terminated, truncated, info = env.step("<answer>Down, Down, Down, Left, Up</answer>")
    assert reward == pytest.approx(-0.5) and not terminated
    _, reward, terminated, truncated, info = env.step("<answer>Up, Left, Left</answer>")
    assert reward == pytest.approx(-0.1 + 1.0 + 10.0)
    assert terminated and not truncated and info["success"] and info["moves_executed"] == 1


def test_moves_after_the_solving_move_are_not_executed():
    env = SokobanEnv()
    env.reset(options={"level": "#######\n#P_X_O#\n#######"})
    _, reward, terminated, _, info = env.step("<answer>Right, Right, Right, Left, Left</answer>")
    assert terminated and info["success"] and info["moves_executed"] == 3
    assert reward == pytest.approx(-0.3 + 1.0 + 10.0)


@pytest.mark.parametrize("env_id", ["freshrl/Sokoban-v0", "freshrl/SokobanHard-v0"])
def test_oracle_demonstrations_solve_levels_optimally(env_id):
    env = gym.make(env_id).unwrapped
    # Seeds of every split: held-out levels come from other rooms (envs.seeds).
    for seed in list(range(60)) + seeds("validation", 20) + seeds("test", 20):
        _, info = env.reset(seed=seed)
        level = env.level
        assert info["optimal_length"] == exhaustive_optimum(
            level.walls, level.boxes, level.targets, level.player
        )
        responses = env.oracle_responses()
        assert sum(r.count(",") + 1 for r in responses) == info["optimal_length"]
        assert len(responses) <= env.max_turns
        for response in responses:
            _, _, terminated, truncated, step_info = env.step(response)
            assert step_info["format_ok"] and step_info["action_valid"]
        assert terminated and not truncated and step_info["success"]


def test_one_move_per_turn_until_truncation():
    env = SokobanEnv(max_turns=3, max_actions_per_turn=1)
    obs, info = env.reset(seed=5)
    assert "up to" not in obs and "one move" in obs
    total, success, turns = play(env, ["Up", "Up", "Up", "Up"])
    assert turns == 3 and not success
    with pytest.raises(RuntimeError):
        env.step("<answer>Up</answer>")


def test_too_many_moves_in_a_turn_is_invalid():
    env = SokobanEnv(max_actions_per_turn=2)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("<answer>Up, Up, Up</answer>")
    assert info["format_ok"] and not info["action_valid"]
    assert reward == pytest.approx(-0.1)


def test_rendering():
    env = SokobanEnv("hard", render_mode="rgb_array")
    env.reset(seed=3)
    image = env.render()
    assert image.shape == (8 * 28, 8 * 28, 3) and image.dtype == np.uint8
    env.step("<answer>Left</answer>")
    assert env.render().shape == image.shape
    env = SokobanEnv(render_mode="ansi", cell_pixels=10)
    obs, _ = env.reset(seed=3)
    text = env.map_text()
    assert env.render() == f"Map:\n{text}" and text in obs and len(text.splitlines()) == 6
    assert all(len(row.split(" ")) == 6 and set(row) <= set("#_OX*PS ") for row in text.splitlines())
    assert obs.isascii()
    assert SokobanEnv(render_mode=None).render() is None


def test_given_level_is_played_and_seeded_levels_differ():
    env = SokobanEnv()
    level = level_from_text("#######\n#P_X_O#\n#######")
    _, info = env.reset(seed=0, options={"level": level})
    assert isinstance(env.level, Level) and env.level is level and info["optimal_length"] == 3
    maps = set()
    for seed in range(50):
        env.reset(seed=seed)
        maps.add(env.map_text())
    assert len(maps) >= 45


def test_a_setting_too_large_to_search_fails_fast_naming_it():
    # Reverse play over 12x12 rooms with 4 boxes would allocate 392 million states (about 38 GB).
    assert search_states(100, 4) > 100 * MAX_SEARCH_STATES
    with pytest.raises(ValueError, match=r"dim=\(12, 12\) with num_boxes=4 allows 392,122,500 search states"):
        SokobanEnv(dim=(12, 12), num_boxes=4)
    with pytest.raises(ValueError, match="num_boxes=4"):
        generate_level(np.random.default_rng(0), dim=(12, 12), num_boxes=4)
    with pytest.raises(ValueError, match="num_boxes=3"):
        SokobanEnv(dim=(11, 11), num_boxes=3)


@pytest.mark.parametrize(("dim", "num_boxes"), [((8, 8), 4), ((10, 10), 3), ((12, 12), 2)])
def test_the_largest_allowed_settings_generate(dim, num_boxes):
    assert search_states((dim[0] - 2) * (dim[1] - 2), num_boxes) <= MAX_SEARCH_STATES
    low = MIN_MAX_LENGTH[num_boxes]
    env = SokobanEnv(dim=dim, num_boxes=num_boxes, min_solution_length=low, max_solution_length=low + 4)
    _, info = env.reset(seed=0)
    assert len(env.level.boxes) == num_boxes and low <= info["optimal_length"] <= low + 4


# Corners of the accepted region (envs.sokoban_levels.MIN_INTERIOR): the largest and the longest rooms, the
# most boxes, the smallest interiors, and the shortest and longest exact solution lengths they allow.
EXTREME_SETTINGS = [
    ((12, 12), 1, "longest"),
    ((12, 12), 2, "shortest"),
    ((3, 102), 1, "longest"),
    ((102, 3), 1, "shortest"),
    ((4, 52), 2, "shortest"),
    ((6, 27), 2, "longest"),
    ((16, 4), 5, "shortest"),
    ((10, 10), 3, "longest"),
    ((5, 5), 1, "longest"),
    ((3, 11), 1, "longest"),
]


@pytest.mark.parametrize(("dim", "num_boxes", "end"), EXTREME_SETTINGS)
def test_extreme_accepted_settings_make_levels_of_every_split(dim, num_boxes, end):
    # A window of one length, at either end of the allowed range: the hardest window these settings accept.
    length = longest_min_length(dim, num_boxes) if end == "longest" else MIN_MAX_LENGTH[num_boxes]
    env = SokobanEnv(dim=dim, num_boxes=num_boxes, min_solution_length=length, max_solution_length=length)
    for split in ("train", "validation", "test"):
        _, info = env.reset(seed=seeds(split, 1, offset=3)[0])
        assert env.level.walls.shape == dim and len(env.level.boxes) == num_boxes
        assert info["optimal_length"] == length


def test_every_accepted_setting_makes_levels_of_every_split():
    # Random settings, drawn wide and kept when __init__ accepts them: each must then reset for every split
    # (15x15 rooms, 3 boxes in a corridor or a 40-move minimum in 6x6 were accepted and never generated).
    rng = np.random.default_rng(0)
    accepted = []
    while len(accepted) < 12:
        height, width = (int(side) for side in rng.integers(3, 40, size=2))
        num_boxes = int(rng.integers(1, 6))
        min_length = int(rng.integers(1, 60))
        settings = {
            "dim": (height, width),
            "num_boxes": num_boxes,
            "min_solution_length": min_length,
            "max_solution_length": min_length + int(rng.integers(0, 4)),
        }
        try:
            env = SokobanEnv(**settings)
        except ValueError:
            continue
        accepted.append(settings)
        low, high = settings["min_solution_length"], settings["max_solution_length"]
        for split in ("train", "validation", "test"):
            _, info = env.reset(seed=seeds(split, 1, offset=len(accepted))[0])
            assert low <= info["optimal_length"] <= high
    assert len({s["dim"] for s in accepted}) >= 8


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"dim": (15, 15)}, r"dim=\(15, 15\) has 169 interior cells .* rooms need 9 to 100"),
        ({"dim": (13, 13)}, r"dim=\(13, 13\) has 121 interior cells"),
        ({"dim": (3, 40), "num_boxes": 1}, None),
        ({"dim": (3, 105)}, r"dim=\(3, 105\) has 103 interior cells"),
        ({"dim": (4, 30), "num_boxes": 2, "min_solution_length": 3, "max_solution_length": 3}, None),
        ({"dim": (20, 6), "num_boxes": 2, "min_solution_length": 43, "max_solution_length": 43}, None),
        ({"dim": (30, 6)}, r"dim=\(30, 6\) has 112 interior cells"),
        ({"dim": (3, 10)}, r"dim=\(3, 10\) has 8 interior cells"),
        ({"dim": (4, 4)}, r"dim=\(4, 4\) has 4 interior cells"),
        ({"dim": (3, 40), "num_boxes": 2}, r"num_boxes \(for dim=\(3, 40\)\) must be an integer in \[1, 1\]"),
        ({"num_boxes": 4}, r"num_boxes \(for dim=\(6, 6\)\) must be an integer in \[1, 3\].*fewer boxes"),
        (
            {"min_solution_length": 7, "max_solution_length": 20},
            r"min_solution_length \(for dim=\(6, 6\), num_boxes=1\) must be an integer in \[1, 6\], got 7",
        ),
        (
            {"difficulty": "hard", "min_solution_length": 1, "max_solution_length": 2},
            r"max_solution_length \(for num_boxes=2\) must be an integer >= 3, got 2",
        ),
    ],
)
def test_settings_that_cannot_make_levels_are_rejected_in_init(settings, message):
    # Rooms over 100 interior cells were accepted but never dug (15x15 in none of 1000 walks), and rooms under
    # 9 leave a split without levels; None marks settings at the edge that are accepted.
    if message is None:
        SokobanEnv(**settings)
        return
    with pytest.raises(ValueError, match=message):
        SokobanEnv(**settings)


def test_solving_a_level_too_large_to_search_is_a_clear_error():
    big = "\n".join(["#" * 40] + ["#" + "_" * 38 + "#"] * 38 + ["#" * 40])
    rows = big.splitlines()
    rows[1] = "#P" + "X" * 3 + "_" * 34 + "#"
    rows[2] = "#" + "O" * 3 + "_" * 35 + "#"
    with pytest.raises(ValueError, match="search states, over the bound"):
        level_from_text("\n".join(rows))


def test_levels_without_a_wall_border_or_already_solved_are_rejected():
    walls = np.ones((3, 6), dtype=bool)
    walls[1, 1:5] = False
    level = Level(walls, targets=((1, 4),), boxes=((1, 3),), player=(1, 1), optimal_length=2)
    assert level.optimal_length == 2
    open_walls = walls.copy()
    open_walls[1, 5] = False
    with pytest.raises(ValueError, match="all-wall border"):
        Level(open_walls, targets=((1, 4),), boxes=((1, 3),), player=(1, 1), optimal_length=2)
    with pytest.raises(ValueError, match="already solved"):
        Level(walls, targets=((1, 3),), boxes=((1, 3),), player=(1, 1), optimal_length=1)
    with pytest.raises(ValueError, match="already solved"):
        level_from_text("######\n#P_*_#\n######")
    with pytest.raises(ValueError, match="as many targets as boxes"):
        Level(walls, targets=((1, 4), (1, 2)), boxes=((1, 3),), player=(1, 1), optimal_length=2)
    with pytest.raises(ValueError, match="is a wall"):
        Level(walls, targets=((1, 4),), boxes=((0, 3),), player=(1, 1), optimal_length=2)
    with pytest.raises(ValueError, match="stands on a box"):
        Level(walls, targets=((1, 4),), boxes=((1, 3),), player=(1, 3), optimal_length=2)
    with pytest.raises(ValueError, match="optimal_length"):
        Level(walls, targets=((1, 4),), boxes=((1, 3),), player=(1, 1), optimal_length=0)
    env = SokobanEnv()
    with pytest.raises(ValueError, match="already solved"):
        env.reset(options={"level": "######\n#P_*_#\n######"})
    with pytest.raises(ValueError, match="options\\['level'\\] must be a Level or a map string"):
        env.reset(options={"level": 3})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"difficulty": "medium"}, r"unknown difficulty 'medium'"),
        ({"dim": 6}, r"dim must be a \(height, width\) pair"),
        ({"dim": (6, "6")}, r"dim must be an integer >= 3"),
        ({"dim": (2, 6)}, r"dim must be an integer >= 3, got 2"),
        ({"dim": (6, 6, 6)}, r"dim must be a \(height, width\) pair"),
        ({"num_boxes": 0}, r"num_boxes \(for dim=\(6, 6\)\) must be an integer >= 1, got 0"),
        ({"num_boxes": 15}, r"num_boxes \(for dim=\(6, 6\)\) must be an integer in \[1, 3\]"),
        ({"num_boxes": "1"}, r"num_boxes .* must be an integer"),
        ({"min_solution_length": 0}, r"min_solution_length must be an integer >= 1"),
        (
            {"min_solution_length": 5, "max_solution_length": 4},
            r"max_solution_length must be an integer >= 5",
        ),
        ({"max_turns": 0}, r"max_turns must be an integer >= 1"),
        ({"max_turns": "5"}, r"max_turns must be an integer >= 1"),
        ({"max_actions_per_turn": 0}, r"max_actions_per_turn must be an integer >= 1"),
        ({"invalid_output": "skip"}, r"invalid_output must be one of"),
        ({"invalid_penalty": None}, r"invalid_penalty must be a finite number"),
        ({"render_mode": "human"}, r"render_mode 'human' is not supported"),
        ({"cell_pixels": 0}, r"cell_pixels must be an integer in \[5, 256\], got 0"),
    ],
)
def test_bad_arguments_are_rejected_in_init_naming_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SokobanEnv(**kwargs)


@pytest.mark.parametrize("env_id", ["freshrl/Sokoban-v0", "freshrl/SokobanHard-v0"])
def test_make_with_bad_arguments_raises_the_envs_own_error(env_id):
    with pytest.raises(ValueError, match="render_mode 'human' is not supported"):
        gym.make(env_id, render_mode="human")  # not a pygame window wrapper
    with pytest.raises(ValueError, match="num_boxes"):
        gym.make(env_id, dim=(12, 12), num_boxes=4)
