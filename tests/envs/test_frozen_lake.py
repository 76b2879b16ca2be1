"""FrozenLake (text and vision): maps, moves, slipperiness, oracle, rendering."""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the envs)
from envs.frozen_lake import (
    FrozenLakeEnv,
    FrozenLakeVisionEnv,
    default_max_turns,
    generate_map,
    shortest_path,
)
from envs.seeds import seeds

ALL_OPEN = ["SFFF", "FFFF", "FFFF", "FFFG"]
# Seeds of every split: held-out tasks come from another part of the map space (envs.seeds).
SPLIT_SEEDS = list(range(60)) + seeds("validation", 20) + seeds("test", 20)


def player(env) -> tuple[int, int]:
    """The agent's cell, as the env's state key gives it ("... agent row,col")."""
    row, col = env.state_key().rsplit("agent ", 1)[1].split(",")
    return int(row), int(col)


def exhaustive_distance(desc: list[str]) -> int | None:
    """Shortest path length by relaxing distances until nothing changes (independent of BFS)."""
    size = len(desc)
    inf = size * size + 1
    dist = np.full((size, size), inf)
    start = next((r, c) for r in range(size) for c in range(size) if desc[r][c] == "S")
    dist[start] = 0
    changed = True
    while changed:
        changed = False
        for r in range(size):
            for c in range(size):
                if desc[r][c] == "H":
                    continue
                best = min(
                    [dist[r, c]]
                    + [
                        dist[r + dr, c + dc] + 1
                        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
                        if 0 <= r + dr < size and 0 <= c + dc < size and desc[r + dr][c + dc] != "H"
                    ]
                )
                if best < dist[r, c]:
                    dist[r, c], changed = best, True
    goal = next((r, c) for r in range(size) for c in range(size) if desc[r][c] == "G")
    return None if dist[goal] >= inf else int(dist[goal])


@pytest.mark.parametrize(("size", "hole_prob"), [(4, 0.2), (5, 0.4), (8, 0.3)])
def test_generated_maps_have_a_path_and_are_well_formed(size, hole_prob):
    rng = np.random.default_rng(size)
    holes = 0
    for _ in range(200):
        desc = generate_map(rng, size, hole_prob)
        cells = "".join(desc)
        assert len(desc) == size and all(len(row) == size for row in desc)
        assert cells.count("S") == 1 and cells.count("G") == 1 and set(cells) <= set("SFHG")
        start, goal = divmod(cells.index("S"), size), divmod(cells.index("G"), size)
        assert abs(start[0] - goal[0]) + abs(start[1] - goal[1]) >= size - 1
        path = shortest_path(desc)
        assert path is not None and len(path) == exhaustive_distance(desc)
        holes += cells.count("H")
    assert holes > 0


def test_shortest_path_none_when_blocked():
    assert shortest_path(["SH", "HG"]) is None
    assert shortest_path(ALL_OPEN) == ["Down", "Down", "Down", "Right", "Right", "Right"]


@pytest.mark.parametrize("env_id", ["freshrl/FrozenLake-v0", "freshrl/FrozenLakeVision-v0"])
def test_oracle_reaches_the_goal(env_id):
    env = gym.make(env_id).unwrapped
    for seed in SPLIT_SEEDS:
        _, info = env.reset(seed=seed)
        assert info["optimal_length"] == exhaustive_distance(env.desc)
        responses = env.oracle_responses()
        assert len(responses) <= env.max_turns
        total = 0.0
        for response in responses:
            _, reward, terminated, truncated, step_info = env.step(response)
            total += reward
        assert terminated and not truncated and step_info["success"] and total == 1.0
        assert step_info["moves_executed"] <= env.max_actions_per_turn
        assert sum(r.count(",") + 1 for r in responses) == info["optimal_length"]


def test_hole_terminates_with_zero_reward_and_stops_the_turn():
    env = FrozenLakeEnv()
    env.reset(options={"map": ["SHFF", "FFFF", "FFFF", "FFFG"]})
    _, reward, terminated, truncated, info = env.step("<answer>Right, Down, Down</answer>")
    assert terminated and not truncated and reward == 0.0
    assert info["fell"] and not info["success"] and info["moves_executed"] == 1
    assert env.oracle_actions() == []


def test_off_grid_move_is_valid_but_not_effective():
    env = FrozenLakeEnv()
    obs, _ = env.reset(options={"map": ALL_OPEN})
    _, reward, _, _, info = env.step("<answer>Up, Left</answer>")
    assert info["action_valid"] and not info["action_effective"] and reward == 0.0
    assert env.map_text().splitlines()[0] == "P _ _ _"


def test_slippery_moves_go_sideways_a_third_of_the_time_each():
    env = FrozenLakeEnv(is_slippery=True, size=5, max_turns=4, max_actions_per_turn=1)
    desc = ["FFFFF", "FFFFF", "FFSFF", "FFFFF", "FFFFG"]
    counts = {"Up": 0, "Left": 0, "Right": 0, "Down": 0}
    for seed in range(900):
        env.reset(seed=seed, options={"map": desc})
        env.step("<answer>Up</answer>")
        row, col = player(env)
        counts[{(1, 2): "Up", (2, 1): "Left", (2, 3): "Right", (3, 2): "Down"}[(row, col)]] += 1
    assert counts["Down"] == 0
    for direction in ("Up", "Left", "Right"):
        assert 240 < counts[direction] < 360, counts  # 300 expected, about 5 standard deviations


def test_not_slippery_by_default_and_prompt_says_when_slippery():
    obs, _ = FrozenLakeEnv().reset(seed=0)
    assert "slippery" not in obs
    obs, _ = FrozenLakeEnv(is_slippery=True).reset(seed=0)
    assert "slippery" in obs


def test_map_is_rebuilt_from_the_seed_on_every_reset():
    env = FrozenLakeEnv()
    env.reset(seed=1)
    first = list(env.desc)
    env.reset(seed=2)
    assert env.desc != first
    env.reset(seed=1)
    assert env.desc == first
    maps = set()
    for seed in range(100):
        env.reset(seed=seed)
        maps.add(tuple(env.desc))
    assert len(maps) >= 90


def test_text_observation_shows_the_map():
    env = FrozenLakeEnv(render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.map_text() in obs and obs.isascii() and "<answer>" in obs
    assert env.render() == f"Map:\n{env.map_text()}"


def test_vision_observation_has_an_image_and_no_map():
    env = gym.make("freshrl/FrozenLakeVision-v0", render_mode="rgb_array").unwrapped
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"text", "image"}
    assert obs["image"].shape == env.image_shape == (112, 112, 3) and obs["image"].dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert env.map_text() not in obs["text"] and "<answer>" in obs["text"] and obs["text"].isascii()
    assert np.array_equal(env.render(), obs["image"])
    # The agent is the red circle: the centre of its cell is red.
    row, col = player(env)
    assert tuple(obs["image"][row * 28 + 14, col * 28 + 14]) == (220, 40, 40)
    first_move = env.oracle_actions()[0]
    obs2, *_ = env.step(f"<answer>{first_move}</answer>")
    assert not np.array_equal(obs2["image"], obs["image"])


def test_vision_image_size_follows_the_map():
    env = FrozenLakeVisionEnv(size=6, cell_pixels=32, render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert obs["image"].shape == (192, 192, 3) == env.observation_space["image"].shape
    assert env.render() == env.map_text()
    assert FrozenLakeVisionEnv.image_shape == (112, 112, 3)


def test_bad_given_maps_are_rejected():
    env = FrozenLakeEnv()
    for desc in (["SH", "HG"], ["SFFF", "FFFF", "FFFF", "FFFF"], ["SF", "FG"]):
        with pytest.raises(ValueError):
            env.reset(options={"map": desc})


@pytest.mark.parametrize(("size", "max_actions_per_turn"), [(4, 3), (8, 3), (8, 1), (12, 5)])
def test_every_map_fits_the_default_turn_budget(size, max_actions_per_turn):
    # Before the budget grew with the map, 8x8 maps kept the 4x4 budget (15 moves), too few for some maps.
    env = FrozenLakeEnv(size=size, hole_prob=0.3, max_actions_per_turn=max_actions_per_turn)
    assert env.max_turns == default_max_turns(size, max_actions_per_turn)
    assert env.max_turns * max_actions_per_turn >= 5 * (size - 1)
    for seed in seeds("train", 150) + seeds("validation", 15):
        _, info = env.reset(seed=seed)
        assert info["optimal_length"] <= env.max_turns * max_actions_per_turn
        assert len(env.oracle_responses()) <= env.max_turns


def test_an_explicit_budget_only_yields_maps_that_fit_it():
    env = FrozenLakeEnv(size=8, hole_prob=0.35, max_turns=3, max_actions_per_turn=3)
    lengths = set()
    for seed in range(300):
        _, info = env.reset(seed=seed)
        lengths.add(info["optimal_length"])
    assert max(lengths) <= 9 and min(lengths) >= 7
    with pytest.raises(ValueError, match=r"max_turns \* max_actions_per_turn must be >= size - 1 = 7"):
        FrozenLakeEnv(size=8, max_turns=2, max_actions_per_turn=3)


def test_the_default_budget_is_the_settings_files_at_4x4():
    assert FrozenLakeEnv().max_turns == 5 and FrozenLakeVisionEnv().max_turns == 5
    assert FrozenLakeEnv(size=8).max_turns == 12


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": "4"}, r"size must be an integer in \[2, 128\], got '4'"),
        ({"size": 4.0}, r"size must be an integer"),
        ({"size": 1}, r"size must be an integer in \[2, 128\], got 1"),
        ({"size": 129}, r"size must be an integer in \[2, 128\]"),
        ({"size": True}, r"size must be an integer"),
        ({"hole_prob": 1.0}, r"hole_prob must be in \[0, 1\)"),
        ({"hole_prob": -0.1}, r"hole_prob must be in \[0, 1\)"),
        ({"hole_prob": "0.2"}, r"hole_prob must be a finite number"),
        ({"hole_prob": float("nan")}, r"hole_prob must be a finite number"),
        ({"is_slippery": "yes"}, r"is_slippery must be True or False"),
        ({"is_slippery": 1}, r"is_slippery must be True or False"),
        ({"max_turns": 0}, r"max_turns must be an integer >= 1, got 0"),
        ({"max_turns": 2.5}, r"max_turns must be an integer >= 1"),
        ({"max_actions_per_turn": 0}, r"max_actions_per_turn must be an integer >= 1"),
        ({"invalid_output": "ignore"}, r"invalid_output must be one of"),
        ({"invalid_output": None}, r"invalid_output must be one of"),
        ({"invalid_penalty": "a lot"}, r"invalid_penalty must be a finite number"),
        ({"invalid_penalty": float("inf")}, r"invalid_penalty must be a finite number"),
        ({"render_mode": "human"}, r"render_mode 'human' is not supported; choose None or one of"),
        ({"cell_pixels": 0}, r"cell_pixels must be an integer in \[5, 256\], got 0"),
        ({"cell_pixels": 4}, r"cell_pixels must be an integer in \[5, 256\]"),
        ({"cell_pixels": 300}, r"cell_pixels must be an integer in \[5, 256\]"),
    ],
)
@pytest.mark.parametrize("cls", [FrozenLakeEnv, FrozenLakeVisionEnv])
def test_bad_arguments_are_rejected_in_init_naming_the_argument(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(**kwargs)


@pytest.mark.parametrize("env_id", ["freshrl/FrozenLake-v0", "freshrl/FrozenLakeVision-v0"])
def test_make_with_bad_arguments_raises_the_envs_own_error(env_id):
    with pytest.raises(ValueError, match="render_mode 'human' is not supported"):
        gym.make(env_id, render_mode="human")  # not a pygame window wrapper
    with pytest.raises(ValueError, match="size must be an integer"):
        gym.make(env_id, size="4")


def test_an_image_too_large_to_draw_is_rejected_in_init():
    # Each argument is in its range, but 20 x 256 = 5120-pixel sides: gigabytes a step (24 GB at 128 x 256).
    with pytest.raises(ValueError, match=r"size \* cell_pixels .* at most 4096 pixels, got 20 \* 256 = 5120"):
        FrozenLakeVisionEnv(size=20, cell_pixels=256)
    with pytest.raises(ValueError, match=r"size \* cell_pixels"):
        FrozenLakeEnv(size=20, cell_pixels=256, render_mode="rgb_array")
    assert FrozenLakeEnv(size=20, cell_pixels=256).cell_pixels == 256  # text only: no image is drawn


def test_smallest_tiles_render():
    env = FrozenLakeVisionEnv(cell_pixels=5, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    assert obs["image"].shape == (20, 20, 3) and env.observation_space.contains(obs)
