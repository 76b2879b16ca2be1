"""minigrid's BabyAI levels as multi-turn text and vision envs (minigrid 3.2.0, the ``ecosystem`` extra)."""

from __future__ import annotations

import contextlib
import copy
import io
import re
from typing import Any

import numpy as np

from envs.base import (
    DEFAULT_INVALID_PENALTY,
    MultiTurnEnv,
    Outcome,
    Parsed,
    check_int,
    draw_in_split,
)
from envs.gridworld import grid_text, last_answer
from envs.seeds import split_of_reset_seed

# minigrid's action order (minigrid.core.actions.Actions).
ACTIONS = ("left", "right", "forward", "pickup", "drop", "toggle", "done")
_SEPARATORS = re.compile(r"[\s,]+")
FACING = ("east", "south", "west", "north")
AGENT = ("A>", "Av", "A<", "A^")
COLOR_LETTERS = {"red": "r", "green": "g", "blue": "b", "purple": "p", "yellow": "y", "grey": "e"}
TYPE_LETTERS = {"ball": "B", "key": "K", "box": "X", "goal": "G", "lava": "V"}
LEGEND = (
    "Legend: ## wall, .. floor, A> you facing east (Av south, A< west, A^ north); other cells are a colour "
    "letter (r red, g green, b blue, p purple, y yellow, e grey) and an object letter (B ball, K key, X box, "
    "D closed door, O open door, L locked door, G goal). Row 0 is the top row, column 0 the left column."
)
IMAGE_LEGEND = "The image shows the whole room from above; you are the red triangle, pointing where you face."
# Pixels per grid cell in the vision env: one 28-pixel patch of Qwen2.5-VL's vision tower, as FrozenLake.
TILE_PIXELS = 28
# Rooms drawn (each in the reset's split) before ``max_solution_length`` gives up on finding a short one.
MAX_LENGTH_DRAWS = 1_000
# Held-out rooms found, by (level, max_solution_length, reset seed): the room's minigrid seed, the env's
# generator state after the draws, BabyAIBot's plan. Evaluations replay the same validation seeds, and each
# costs ~20 room draws to find (~45 and two BabyAIBot plans with max_solution_length=4); the room's own seed
# rebuilds it in one (15-30x faster), and restoring the generator makes the reset what the draws would have.
_HELD_OUT_ROOMS: dict[tuple[str, int | None, int | None], tuple[int, dict[str, Any], tuple]] = {}
HELD_OUT_ROOMS_KEPT = 4096


def _make_level(level: str):
    import gymnasium as gym
    import minigrid  # noqa: F401  (the optional extra; registers the BabyAI ids)

    return gym.make(level).unwrapped


def _cell(obj) -> str:
    if obj is None:
        return ".."
    if obj.type == "wall":
        return "##"
    color = COLOR_LETTERS.get(obj.color, "?")
    if obj.type == "door":
        return color + ("L" if obj.is_locked else "O" if obj.is_open else "D")
    return color + TYPE_LETTERS.get(obj.type, "?")


def _key(env) -> bytes:
    """What identifies a room's state: the grid, the agent's cell, heading, load and step count."""
    where = f"{tuple(env.agent_pos)} {env.agent_dir} {_thing(env.carrying)} {env.step_count}"
    return env.grid.encode().tobytes() + where.encode()


def _thing(obj) -> str:
    return "nothing" if obj is None else f"a {obj.color} {obj.type}"


def _progress(instr) -> str:
    """What the map does not show of a mission: which parts of a sequenced one ("go to the red ball, then
    open the door") are done, as minigrid's verifier records them (``SeqInstr.a_done``, ``b_done``)."""
    if not hasattr(instr, "instr_a"):
        return "-"
    return f"({instr.a_done} {instr.b_done} {_progress(instr.instr_a)} {_progress(instr.instr_b)})"


class BabyAIEnv(MultiTurnEnv):
    """A BabyAI level (minigrid) as a text env: the whole room as a text map, the mission in words.

    ## Description
    BabyAI's levels are partially observed by the agent; here the model sees the full map (an LLM has no
    egocentric view to read), the mission, which way it faces and what it carries.

    ## Action Space
    A string: ``<answer>forward, left</answer>`` with 1 to ``max_actions_per_turn`` of left, right, forward,
    pickup, drop, toggle, done (any case), executed in order. Anything else goes to the ``invalid_output``
    policy.

    ## Observation Space
    Text: the mission, the legend, the answer format and the map; after a turn, the map again.

    ## Starting State
    The level reset with a seed drawn from the env's own generator, split by content (the mission and the
    map): a seed of a split of :mod:`envs.seeds` only yields rooms that hash to it.

    ## Rewards
    1.0 when the mission is accomplished (``success``), 0.0 otherwise. minigrid's own reward,
    ``1 - 0.9 * steps / max_steps`` on success (partial credit for speed), is ``info["minigrid_reward"]``.
    An unusable response earns ``invalid_penalty``.
    Every ``info`` holds ``state_key`` (:meth:`state_key`), the room the next turn starts from, for GiGPO's
    turn-level credit (``advantage_estimator="gigpo"``).

    ## Episode End
    Terminated on success, or when minigrid's step limit (the level's ``max_steps``) runs out; truncated
    after ``max_turns`` turns (default ``max_steps // max_actions_per_turn``).

    ## Oracle
    ``oracle_responses()`` replays BabyAI's ``BabyAIBot`` from the current state on a copy of the level.

    ## Arguments
    ``level``: a BabyAI id, e.g. ``"BabyAI-GoToLocal-v0"``; ``max_actions_per_turn`` (default 4);
    ``max_turns``; ``max_solution_length``: only rooms that BabyAIBot solves in at most this many actions (an
    easier setting, named as such where it is used; default None, every room); ``invalid_output``;
    ``invalid_penalty``.

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        level: str,
        max_actions_per_turn: int = 4,
        max_turns: int | None = None,
        max_solution_length: int | None = None,
        invalid_output: str = "reprompt",
        invalid_penalty: float = DEFAULT_INVALID_PENALTY,
        render_mode: str | None = None,
    ):
        if not isinstance(level, str) or not level.startswith("BabyAI-"):
            raise ValueError(f"level must be a BabyAI id such as 'BabyAI-GoToLocal-v0', got {level!r}")
        self.level = level
        self.max_actions_per_turn = check_int("max_actions_per_turn", max_actions_per_turn, 1)
        self.max_solution_length = (
            None if max_solution_length is None else check_int("max_solution_length", max_solution_length, 1)
        )
        self._env = _make_level(level)
        with contextlib.redirect_stdout(io.StringIO()):
            self._env.reset(seed=0)  # some levels set max_steps only when they build a room
        if self.image_shape is not None:
            self.image_shape = (self._env.height * TILE_PIXELS, self._env.width * TILE_PIXELS, 3)
        if max_turns is None:
            max_turns = max(1, self._env.max_steps // self.max_actions_per_turn)
        super().__init__(
            max_turns=max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        self._split = "train"
        self._reset_seed: int | None = None
        self._room_seed = 0
        # BabyAIBot's last plan: the state key before each of its actions, and the actions.
        self._plan: tuple[list[bytes], list[str]] = ([], [])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._split = split_of_reset_seed(seed)
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def _draw(self) -> str:
        self._room_seed = int(self.np_random.integers(2**31))
        self._build_room(self._room_seed)
        return f"{self._env.mission}\n{self.map_text()}"

    def _build_room(self, room_seed: int) -> None:
        # BabyAI prints every rejected object placement ("Sampling rejected: ...") while it builds a room.
        with contextlib.redirect_stdout(io.StringIO()):
            self._env.reset(seed=room_seed)

    def _new_task(self) -> str:
        key = (self.level, self.max_solution_length, self._reset_seed)
        cached = _HELD_OUT_ROOMS.get(key) if self._split != "train" else None
        if cached is None:
            self._plan = self._draw_room()
            if self._split != "train":
                if len(_HELD_OUT_ROOMS) >= HELD_OUT_ROOMS_KEPT:
                    _HELD_OUT_ROOMS.pop(next(iter(_HELD_OUT_ROOMS)))
                plan = (tuple(self._plan[0]), tuple(self._plan[1]))
                _HELD_OUT_ROOMS[key] = (self._room_seed, self.np_random.bit_generator.state, plan)
        else:
            room_seed, generator_state, (keys, actions) = cached
            self._build_room(room_seed)
            self.np_random.bit_generator.state = generator_state
            self._plan = (list(keys), list(actions))
        return f"{self._task_text()}\n{self.format_reminder()}\n{self._state_text()}"

    def _draw_room(self) -> tuple[list[bytes], list[str]]:
        """Draw rooms until one is in the reset's split (and, with ``max_solution_length``, short enough for
        BabyAIBot); BabyAIBot's plan for it, or an empty one (planned when the oracle is first asked)."""
        settings = f"minigrid {self.level}, max_solution_length={self.max_solution_length}"
        for _ in range(MAX_LENGTH_DRAWS):
            draw_in_split(self._draw, str, self._split, settings=settings)
            if self.max_solution_length is None:
                return [], []
            plan = self._bot_plan()
            if len(plan[1]) <= self.max_solution_length:
                return plan
        raise RuntimeError(
            f"no {self._split} room in {MAX_LENGTH_DRAWS} draws at {settings}: BabyAIBot needs more actions "
            "on every room drawn; raise max_solution_length"
        )

    def _task_text(self) -> str:
        return f"BabyAI: accomplish the mission in the room.\n{LEGEND}"

    def format_reminder(self) -> str:
        amount = (
            "one action" if self.max_actions_per_turn == 1 else f"up to {self.max_actions_per_turn} actions"
        )
        return f"Answer with {amount} from {', '.join(ACTIONS)}, e.g. <answer>forward, left</answer>."

    def _parse(self, response: str) -> Parsed:
        answer = last_answer(response)
        if answer is None:
            return Parsed(format_ok=False, valid=False, error="no <answer>...</answer> found")
        tokens = [t.lower() for t in _SEPARATORS.split(answer) if t]
        if not tokens:
            return Parsed(format_ok=True, valid=False, error="empty answer")
        unknown = [t for t in tokens if t not in ACTIONS]
        if unknown:
            return Parsed(format_ok=True, valid=False, error=f"unknown action {unknown[0][:20]!r}")
        if len(tokens) > self.max_actions_per_turn:
            error = f"{len(tokens)} actions, at most {self.max_actions_per_turn} allowed"
            return Parsed(format_ok=True, valid=False, error=error)
        return Parsed(format_ok=True, valid=True, action=tokens)

    def _apply(self, action: list[str]) -> Outcome:
        before = _key(self._env)
        reward, terminated, executed = 0.0, False, 0
        for name in action:
            _, reward, terminated, truncated, _ = self._env.step(ACTIONS.index(name))
            executed += 1
            terminated = bool(terminated or truncated)
            if terminated:
                break
        success = float(reward) > 0
        text = self._state_text()
        if success:
            text = f"Mission accomplished.\n{text}"
        elif terminated:
            text = f"The level's step limit ran out.\n{text}"
        return Outcome(
            reward=float(success),
            observation=text,
            terminated=terminated,
            success=success,
            effective=_key(self._env) != before,
            info={"minigrid_reward": float(reward), "actions_executed": executed},
        )

    def _task_info(self) -> dict[str, Any]:
        return {"state_key": self.state_key()}

    def state_key(self) -> str:
        """The canonical state (docs/adding_an_env.md, "State keys"): the level, the mission and its progress,
        the map (objects, doors, the agent's cell and heading) and what the agent carries. minigrid's step
        count is left out, as FrozenLake and Sokoban leave out the turn: the same room is the same state."""
        env = self._env
        return (
            f"BabyAI {self.level}\n{env.mission} {_progress(env.instrs)}\n{self.map_text()}\n"
            f"carrying {_thing(env.carrying)}"
        )

    def map_text(self) -> str:
        """The room, one line per row, cells as two letters (see the legend), space-separated."""
        env = self._env
        cells = np.array([[_cell(env.grid.get(x, y)) for x in range(env.width)] for y in range(env.height)])
        x, y = env.agent_pos
        cells[y, x] = AGENT[env.agent_dir]
        return grid_text(cells)

    def _state_text(self) -> str:
        env = self._env
        return (
            f"Mission: {env.mission}\nMap:\n{self.map_text()}\n"
            f"You face {FACING[env.agent_dir]} and carry {_thing(env.carrying)}."
        )

    def _render_image(self) -> np.ndarray:
        return np.ascontiguousarray(
            self._env.get_frame(highlight=False, tile_size=TILE_PIXELS), dtype=np.uint8
        )

    # ----------------------------------------------------------------- oracle
    def oracle_actions(self) -> list[str]:
        """BabyAIBot's actions from the current state to the end of the mission (played on a copy)."""
        if self._done:
            return []
        key = _key(self._env)
        if key not in self._plan[0]:  # the agent left the plan: plan again from here
            self._plan = self._bot_plan()
        keys, actions = self._plan
        return actions[keys.index(key) :] if key in keys else []

    def _bot_plan(self) -> tuple[list[bytes], list[str]]:
        """BabyAIBot played from the current state on a copy of the level: the state key before each of its
        actions, and the actions."""
        from minigrid.utils.baby_ai_bot import BabyAIBot

        env = copy.deepcopy(self._env)
        bot, keys, actions = BabyAIBot(env), [], []
        for _ in range(env.max_steps - env.step_count):
            action = int(bot.replan())
            keys.append(_key(env))
            actions.append(ACTIONS[action])
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        return keys, actions

    def oracle_responses(self) -> list[str]:
        """:meth:`oracle_actions` as strict answers, one per turn."""
        actions, size = self.oracle_actions(), self.max_actions_per_turn
        return [f"<answer>{', '.join(actions[i : i + size])}</answer>" for i in range(0, len(actions), size)]

    def blind_response(self, rng: np.random.Generator) -> str:
        """A turn's answer that ignores the observation: ``max_actions_per_turn`` uniform actions (the floor
        a learnt policy must beat, docs/learning_lab.md)."""
        drawn = rng.integers(len(ACTIONS), size=self.max_actions_per_turn)
        return f"<answer>{', '.join(ACTIONS[i] for i in drawn)}</answer>"


class BabyAIVisionEnv(BabyAIEnv):
    """A BabyAI level as a vision env: the room is minigrid's RGB frame; the text gives the mission.

    As :class:`BabyAIEnv` (actions, rewards, splits, oracle), except the observation is
    ``Dict(text=AnyText, image=Box(0, 255, (height * 28, width * 28, 3), uint8))``: the whole room drawn by
    minigrid at 28 pixels a cell (224x224 for 8x8 levels), and text that never shows the map.
    """

    image_shape = (224, 224, 3)  # the 8x8 levels; __init__ sets each level's own shape

    def _task_text(self) -> str:
        return f"BabyAI: accomplish the mission in the room.\n{IMAGE_LEGEND}"

    def _state_text(self) -> str:
        env = self._env
        return f"Mission: {env.mission}\nYou carry {_thing(env.carrying)}. The image shows the room now."

    def render(self):
        if self.render_mode == "ansi":
            return self.map_text()
        return super().render()
