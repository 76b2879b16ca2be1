"""A renderer for rollout tests without a tokenizer: each character of a message is one token (its code
point), so the token ids of a conversation can be read back as its text."""

from __future__ import annotations

from models.chat import Segment


class CharacterRenderer:
    eos_token_id = 0

    def prompt(self, observation, tools=()) -> Segment:
        return Segment([ord(c) for c in str(observation)])

    def continuation(self, observation, ended_with_eos: bool, tool_call=None) -> Segment:
        return Segment([ord(c) for c in str(observation)])
