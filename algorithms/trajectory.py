"""The trajectory record: one episode, token-in / token-out (docs/design.md, section 2).

``token_ids`` are exactly what the policy saw and produced: prompt tokens, response-1 tokens as sampled,
observation-1 tokens (chat-template glue included), response-2 tokens, ... A response is never decoded and
re-tokenized. ``loss_mask`` is 1 on response tokens and 0 elsewhere; ``behaviour_logprobs`` holds the
sampler's logprob of each response token (0.0 elsewhere).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Trajectory:
    token_ids: list[int]
    loss_mask: list[int]
    behaviour_logprobs: list[float]
    # [start, end) of each response in token_ids, one per turn.
    response_spans: list[tuple[int, int]]
    turn_rewards: list[float]
    finish_reasons: list[str]
    env_seed: int
    group_id: int
    collection_step: int
    policy_version: int
    success: bool = False
    # The policy version that generated each response, one per turn (staleness counts from the oldest);
    # empty when not recorded, then every turn is ``policy_version``'s.
    turn_policy_versions: list[int] = field(default_factory=list)
    # The env ended the episode (goal, failure, answer) rather than the turn or context limit.
    terminated: bool = False
    # Response tokens the episode could generate, all turns together (the rollout stops there): L_max of
    # overlong shaping in the "trajectory" scope (algorithms/dapo/overlong.py). None: not recorded.
    response_budget: int | None = None
    # Turns whose response the env could not use (info["action_valid"] False): the invalid-output rate.
    invalid_turns: int = 0
    # The env's canonical key of the state each turn started from (info["state_key"] of reset, then of the
    # previous step; docs/adding_an_env.md), one per turn, None where the env reports none; empty when not
    # recorded. GiGPO's anchor states (algorithms/dapo/gigpo.py).
    turn_state_keys: list[Hashable | None] = field(default_factory=list)
    images: list[np.ndarray] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    # Set by the algorithm: the reward used for advantages (return plus shaping) and the advantage.
    reward: float = 0.0
    advantage: float = 0.0
    # Set by the algorithm when turns get advantages of their own (GiGPO, algorithms/dapo/gigpo.py): one per
    # turn, for that turn's response tokens. Empty: every turn has ``advantage``.
    turn_advantages: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not (len(self.token_ids) == len(self.loss_mask) == len(self.behaviour_logprobs)):
            raise ValueError(
                "token_ids, loss_mask and behaviour_logprobs must have equal lengths, got "
                f"{len(self.token_ids)}, {len(self.loss_mask)}, {len(self.behaviour_logprobs)}"
            )

    @property
    def episode_return(self) -> float:
        """Undiscounted sum of the env's rewards (gamma = 1)."""
        return float(sum(self.turn_rewards))

    @property
    def num_turns(self) -> int:
        return len(self.response_spans)

    @property
    def oldest_policy_version(self) -> int:
        """The version of the oldest policy that produced any of its responses: its staleness is measured
        from it."""
        return min(self.turn_policy_versions, default=self.policy_version)

    @property
    def advantages_by_turn(self) -> list[float]:
        """The advantage of each turn's response tokens: ``turn_advantages``, else ``advantage`` for all."""
        return list(self.turn_advantages) if self.turn_advantages else [self.advantage] * self.num_turns

    @property
    def response_lengths(self) -> list[int]:
        return [end - start for start, end in self.response_spans]

    @property
    def num_response_tokens(self) -> int:
        return int(sum(self.loss_mask))

    @property
    def response_truncated(self) -> bool:
        """Some response hit its generation limit (max tokens) instead of ending by itself."""
        return any(reason == "length" for reason in self.finish_reasons)
