"""textarena single-player games as multi-turn text envs (textarena 0.7.4, the ``ecosystem`` extra)."""

from __future__ import annotations

import copy
import importlib
import random
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from envs.base import DEFAULT_INVALID_PENALTY, MAX_TEXT_CHARS, MultiTurnEnv, Outcome, Parsed, draw_in_split
from envs.seeds import split_of_reset_seed

# textarena's own turn limit would end a game with partial credit; the env's max_turns limits it instead.
_NO_GAME_LIMIT = 10**9
# textarena only reads bracketed moves; a response is searched only up to here (its regexes scan it all).
MAX_RESPONSE_CHARS = 8_192
_MOVE = re.compile(r"\[[^\[\]\n]{1,200}\]")


def _sudoku_board(game) -> str:
    return game._get_grid_string_with_indices()


def _sudoku_oracle(game) -> list[str]:
    board, full = game.state.game_state["board"], game.full_grid
    return [f"[{r + 1} {c + 1} {full[r][c]}]" for r in range(9) for c in range(9) if board[r][c] == 0]


def _crosswords_board(game) -> str:
    return f"{game._render_board()}\nClues:\n{game._clue_generator()}"


def _crosswords_oracle(game) -> list[str]:
    # The game takes every [row column letter] of a response; one response fills the whole grid.
    board, solution = game.state.game_state["board"], game.state.game_state["solution"]
    cells = [
        f"[{r} {c} {solution[r][c]}]"
        for r, row in enumerate(board)
        for c, cell in enumerate(row)
        if cell == "_"
    ]
    return [" ".join(cells)] if cells else []


@dataclass(frozen=True)
class GameSpec:
    """What the adapter needs to know of one textarena game."""

    board: Callable[[Any], str]  # the current board as text
    oracle: Callable[[Any], list[str]]  # moves from the stored solution, one response per turn
    move_example: str
    max_turns: int
    shared: tuple[str, ...] = ()  # large read-only attributes a trial step need not copy


GAMES: dict[str, GameSpec] = {
    "Sudoku-v0": GameSpec(_sudoku_board, _sudoku_oracle, "[5 3 7] (row 5, column 3, digit 7)", 60),
    "Crosswords-v0": GameSpec(
        _crosswords_board, _crosswords_oracle, "[0 2 d] (row 0, column 2, letter d)", 10, ("word_data",)
    ),
}


def make_game(game: str):
    """textarena's raw game env (none of its wrappers), built from its registry entry."""
    from textarena.envs.registration import ENV_REGISTRY  # the optional extra

    spec = ENV_REGISTRY[game]
    module, name = spec.entry_point.split(":")
    return getattr(importlib.import_module(module), name)(**spec.kwargs)


class TextArenaEnv(MultiTurnEnv):
    """A textarena single-player game as a multi-turn text env; moves are textarena's bracketed actions.

    ## Description
    The game's own rules, prompt and board text. Every move is first played on a copy of the game: a move
    the game rejects (textarena reports it and lets the game go on) or a crash of the game's code changes
    nothing and goes to the ``invalid_output`` policy with the game's reason, so textarena's own
    error allowance never ends a game.

    ## Action Space
    A string holding one or more bracketed moves as the game asks (Sudoku ``[5 3 7]``, Crosswords
    ``[0 2 d]``; Crosswords plays every one in a response, Sudoku the first). Responses without a bracketed
    move go to the ``invalid_output`` policy; only the first 8,192 characters are read.

    ## Observation Space
    Text: the game's prompt and board, then after each move the game's messages and board.

    ## Starting State
    The game reset with a seed drawn from the env's own generator, split by the board's text (a seed of a
    split only yields boards that hash to it). textarena seeds and draws from Python's global ``random``;
    every call into the game runs on this env's own saved ``random`` state, and the caller's global state is
    restored afterwards, so interleaved envs stay reproducible and the caller's ``random`` is untouched.

    ## Rewards
    1.0 when the game is won (textarena's reward 1: the puzzle completed, ``success``), 0.0 otherwise.
    textarena's own completion share (its partial credit at a turn limit) is ``info["completion"]``.
    A rejected move or an unusable response earns ``invalid_penalty``.

    ## Episode End
    Terminated when the game ends; truncated after ``max_turns`` turns (Sudoku 60, one cell a turn;
    Crosswords 10, any number of letters a turn).

    ## Arguments
    ``game``: a key of :data:`GAMES`; ``max_turns`` (default the game's); ``invalid_output``;
    ``invalid_penalty``.

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        game: str,
        max_turns: int | None = None,
        invalid_output: str = "reprompt",
        invalid_penalty: float = DEFAULT_INVALID_PENALTY,
        render_mode: str | None = None,
    ):
        if game not in GAMES:
            raise ValueError(f"unknown textarena game {game!r}; the adapted ones are {sorted(GAMES)}")
        self.game_id = game
        self.spec_ = GAMES[game]
        super().__init__(
            max_turns=self.spec_.max_turns if max_turns is None else max_turns,
            invalid_output=invalid_output,
            invalid_penalty=invalid_penalty,
            render_mode=render_mode,
        )
        self._template = make_game(game)
        self._game = None
        self._random_state = random.Random(0).getstate()
        self._split = "train"

    @contextmanager
    def _own_random(self, state: tuple) -> Iterator[list]:
        """Run a block on ``state`` as the global ``random`` state; the yielded list gets the state after."""
        outer = random.getstate()
        random.setstate(state)
        after: list = []
        try:
            yield after
        finally:
            after.append(random.getstate())
            random.setstate(outer)

    def _copy(self, game):
        memo = {id(getattr(game, name)): getattr(game, name) for name in self.spec_.shared}
        return copy.deepcopy(game, memo)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._split = split_of_reset_seed(seed)
        return super().reset(seed=seed, options=options)

    def _draw(self):
        game = self._copy(self._template)
        with self._own_random(self._random_state) as after:
            game.reset(num_players=1, seed=int(self.np_random.integers(2**31)))
        game.state.max_turns = _NO_GAME_LIMIT
        _, messages = game.get_observation()
        return game, after[0], _join(messages)

    def _new_task(self) -> str:
        self._game, self._random_state, prompt = draw_in_split(
            self._draw,
            lambda task: self.spec_.board(task[0]),
            self._split,
            settings=f"textarena {self.game_id}",
        )
        return _bounded(f"{prompt}\n{self.format_reminder()}")

    def format_reminder(self) -> str:
        return f"Answer with a move in square brackets, e.g. {self.spec_.move_example}."

    def _parse(self, response: str) -> Parsed:
        response = response[:MAX_RESPONSE_CHARS]
        if _MOVE.search(response) is None:
            return Parsed(format_ok=False, valid=False, error="no move in square brackets found")
        trial = self._copy(self._game)
        try:
            with self._own_random(self._random_state) as after:
                done, _ = trial.step(response)
        except Exception as exc:  # textarena's code crashed on this move: the move is unusable, not fatal
            return Parsed(
                format_ok=True, valid=False, error=f"the game could not play it ({type(exc).__name__})"
            )
        _, messages = trial.get_observation()
        if trial.state.error_count > 0 or trial.state.game_info[0].get("invalid_move"):
            reason = next(
                (m for _, m, _ in reversed(messages) if "invalid" in m.lower()), "the game rejected it"
            )
            return Parsed(format_ok=True, valid=False, error=_bounded(reason, 500))
        return Parsed(format_ok=True, valid=True, action=(trial, after[0], bool(done), messages))

    def _apply(self, action) -> Outcome:
        self._game, self._random_state, done, messages = action
        rewards = self._game.state.rewards or {}
        success = bool(done) and rewards.get(0, 0) == 1
        text = _join(messages) or self._state_text()
        return Outcome(
            reward=float(success),
            observation=_bounded(text),
            terminated=bool(done),
            success=success,
            info={"completion": float(self._game._get_percentage_completion())},
        )

    def _state_text(self) -> str:
        return _bounded(self.spec_.board(self._game))

    def oracle_responses(self) -> list[str]:
        """Moves from the game's stored solution, one response per turn; [] once the episode has ended."""
        return [] if self._done else self.spec_.oracle(self._game)


def _join(messages) -> str:
    """textarena's messages to the player as text, without the echo of the player's own move."""
    import textarena as ta

    return "\n".join(text for _, text, kind in messages if kind != ta.ObservationType.PLAYER_ACTION).strip()


def _bounded(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
