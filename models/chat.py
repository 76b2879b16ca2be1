"""Token-in, token-out rendering of multi-turn ChatML conversations (Qwen2 / Qwen2.5-VL / SmolLM2 templates).

A rollout never decodes and re-tokenizes what the policy sampled. It keeps the conversation as a list of
token ids built from three kinds of pieces::

    prompt(o_1)            [<|im_start|>system\\n{system}<|im_end|>\\n]
                           <|im_start|>user\\n{o_1}<|im_end|>\\n<|im_start|>assistant\\n
    response_1             the token ids exactly as sampled (usually ending with <|im_end|>)
    continuation(o_2, e)   [<|im_end|> unless e]\\n
                           <|im_start|>user\\n{o_2}<|im_end|>\\n<|im_start|>assistant\\n
    response_2 ...

The renderer produces the non-response pieces; the caller appends the sampled ids between them. The loss mask
is 1 on the response pieces and 0 on the rendered ones. When every response is what the tokenizer makes of
the response text (plus <|im_end|>), the concatenation equals ``apply_chat_template`` of the conversation with
``add_generation_prompt=True``; the tests check this.

An env with tools (``envs.base.MultiTurnEnv.tools``) gets them in the prompt's system message, and its reply
to a call is a ``tool`` message: both rendered by the chat template (``apply_chat_template(tools=...)`` and a
``{"role": "tool", "tool_call_id": ...}`` message, cut out of a rendered conversation). A template that
ignores ``tools=`` (the tiny models', SmolLM2's) is replaced, for both, by the Hermes format of Qwen2.5
(``models/hermes_tools.py``), never dropped: the model always sees the schemas. The model's calls are its
sampled tokens, kept as generated; the env parses them (``envs.tool_calls``).

An observation is a string, or ``{"text": str, "image": HxWx3 uint8 array}`` for vision models. The image
goes before the text, as ``<|vision_start|>`` + ``<|image_pad|>`` x N + ``<|vision_end|>``, where N is the
number of image tokens the HF processor produces for that image (its size after the processor's resizing,
divided by the merged patch area). The ids are therefore final: they are the ids vLLM computes on (the
engine hands it one placeholder per image and checks that vLLM's expansion gives back these ids) and the ids
the HF model is trained on (with ``image_inputs``'s pixel values).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import AutoConfig, AutoProcessor, AutoTokenizer, PreTrainedTokenizerBase, ProcessorMixin

from envs.tool_calls import TOOL_CALL_OPEN
from models.hermes_tools import HERMES_TOOLS_TEMPLATE
from models.tiny_tokenizer import IM_END, IM_START, IMAGE_PAD, VISION_END, VISION_START

# Stands for a message's content while a template renders it, then replaced by the content itself (the
# rendering of a message does not depend on its text in these templates).
CONTENT_MARKER = "\x00freshrl-content\x00"
# A tool the renderer shows the template to learn whether it renders tools at all.
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "freshrl_probe_tool",
        "description": "probe",
        "parameters": {"type": "object", "properties": {}},
    },
}


@dataclass
class Segment:
    """A rendered piece of a conversation: its token ids and the images its placeholders stand for."""

    token_ids: list[int]
    images: list[np.ndarray] = field(default_factory=list)


class ChatRenderer:
    """Renders ChatML conversations to token ids, turn by turn.

    Args:
        model_path_or_processor: a model directory (its tokenizer, and its processor when the model has a
            vision config, are loaded from it), a tokenizer, or a multimodal processor.
        system_prompt: text of a system message placed before the first user message; None for the chat
            template's default: the system message its template adds to a conversation that has none
            (SmolLM2's "You are a helpful AI assistant named SmolLM, ...", Qwen2.5's "You are Qwen, ..."),
            or no system message where it adds none (the tiny models). So the ids equal
            ``apply_chat_template`` of the same messages, which is what the model was tuned on and what any
            other tool (vLLM's chat API, TRL) gives it.

    Attributes:
        is_vision: whether observations may carry images.
        eos_token_id: the id of ``<|im_end|>``, the token that ends an assistant turn (and generation).
        tokenizer: the tokenizer.
        processor: the multimodal processor (vision models only, else None).
    """

    def __init__(
        self,
        model_path_or_processor: str | Path | PreTrainedTokenizerBase | ProcessorMixin,
        system_prompt: str | None = None,
    ):
        source = model_path_or_processor
        self.processor: ProcessorMixin | None = None
        if isinstance(source, str | Path):
            if hasattr(AutoConfig.from_pretrained(source), "vision_config"):
                self.processor = AutoProcessor.from_pretrained(source)
                self.tokenizer = self.processor.tokenizer
            else:
                self.tokenizer = AutoTokenizer.from_pretrained(source)
        elif isinstance(source, ProcessorMixin):
            self.processor = source
            self.tokenizer = source.tokenizer
        elif isinstance(source, PreTrainedTokenizerBase):
            self.tokenizer = source
        else:
            raise TypeError(f"expected a model path, a tokenizer or a processor, got {type(source).__name__}")
        self.is_vision = self.processor is not None
        self.system_prompt = default_system_prompt(self.tokenizer) if system_prompt is None else system_prompt
        # Chosen on the first tools rendered: the tokenizer's template (None) or the Hermes fallback.
        self._tools_template: str | None = None
        self._tools_template_chosen = False
        self._system_with_tools: dict[str, str] = {}
        self.eos_token_id = self._special_id(IM_END)
        self._special_id(IM_START)
        if self.is_vision:
            for token in (VISION_START, VISION_END, IMAGE_PAD):
                self._special_id(token)

    def prompt(self, observation: str | dict[str, Any], tools: Sequence[dict[str, Any]] = ()) -> Segment:
        """The opening: optional system message (with ``tools``, OpenAI function schemas, when there are
        any), the first user message, the assistant header."""
        text, images = self._user_content(observation)
        if tools:
            system = self._system_message_with_tools(tools)
        else:
            system = "" if self.system_prompt is None else f"{IM_START}system\n{self.system_prompt}{IM_END}\n"
        return Segment(self._encode(f"{system}{IM_START}user\n{text}{IM_END}\n{IM_START}assistant\n"), images)

    def continuation(
        self,
        observation: str | dict[str, Any],
        response_ended_with_eos: bool,
        tool_call: dict[str, Any] | None = None,
    ) -> Segment:
        """The glue after a sampled response, up to the next assistant header.

        ``response_ended_with_eos``: the response's last token is ``eos_token_id``. If not (it was cut by
        ``max_tokens`` or a stop string), ``<|im_end|>`` is added first to close the assistant turn.
        ``tool_call``: the call (``{"id", "name", "arguments"}``, an env's ``info["tool_call"]``) the
        observation answers; it is then rendered as that call's ``tool`` message, else as a user message.
        """
        text, images = self._user_content(observation)
        close = "" if response_ended_with_eos else IM_END
        if tool_call is None:
            message = f"{IM_START}user\n{text}{IM_END}\n{IM_START}assistant\n"
        else:
            message = self._tool_message(tool_call).replace(CONTENT_MARKER, text)
        return Segment(self._encode(f"{close}\n{message}"), images)

    def image_token_count(self, image: np.ndarray) -> int:
        """How many ``<|image_pad|>`` tokens the processor expands this image to."""
        processor = self._require_processor()
        height, width = _check_image(image).shape[:2]
        patches = processor.image_processor.get_number_of_image_patches(height, width, {})
        return patches // processor.image_processor.merge_size**2

    def image_inputs(self, images: list[np.ndarray]) -> dict[str, torch.Tensor]:
        """``pixel_values`` and ``image_grid_thw`` of ``images`` for the HF model ({} for no images)."""
        processor = self._require_processor()
        if not images:
            return {}
        batch = processor.image_processor(images=[to_pil(image) for image in images], return_tensors="pt")
        return {"pixel_values": batch["pixel_values"], "image_grid_thw": batch["image_grid_thw"]}

    def _user_content(self, observation: str | dict[str, Any]) -> tuple[str, list[np.ndarray]]:
        if isinstance(observation, str):
            return observation, []
        if not isinstance(observation, dict) or "text" not in observation:
            raise TypeError(
                f"an observation is a str or a dict with 'text' (and 'image'), got {observation!r:.80}"
            )
        image = observation.get("image")
        if image is None:
            return observation["text"], []
        self._require_processor()
        image = _check_image(image)
        placeholder = f"{VISION_START}{IMAGE_PAD * self.image_token_count(image)}{VISION_END}"
        return placeholder + observation["text"], [image]

    def _template_for_tools(self) -> str | None:
        """The tokenizer's template (None) when it renders ``tools=``, else the Hermes fallback."""
        if not self._tools_template_chosen:
            renders_tools = False
            if self.tokenizer.chat_template is not None:
                text = self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": "?"}],
                    tools=[PROBE_TOOL],
                    tokenize=False,
                    add_generation_prompt=True,
                )
                if PROBE_TOOL["function"]["name"] in text:
                    if TOOL_CALL_OPEN not in text:
                        raise ValueError(
                            "this chat template renders tools but does not ask for calls as "
                            "<tool_call>{json}</tool_call>, the Hermes format freshrl's envs parse "
                            "(envs/tool_calls.py); use a model whose template does (Qwen2.5, Hermes), or one "
                            "that ignores tools"
                        )
                    renders_tools = True
            self._tools_template = None if renders_tools else HERMES_TOOLS_TEMPLATE
            self._tools_template_chosen = True
        return self._tools_template

    def _render(self, messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]], generate: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages,
            tools=list(tools) or None,
            chat_template=self._template_for_tools(),
            tokenize=False,
            add_generation_prompt=generate,
        )

    def _system_message_with_tools(self, tools: Sequence[dict[str, Any]]) -> str:
        """The rendered turns before the first user message when the conversation has ``tools``."""
        key = json.dumps(list(tools), sort_keys=True)
        if key not in self._system_with_tools:
            system = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
            text = self._render([*system, {"role": "user", "content": CONTENT_MARKER}], tools, True)
            user_turn = text.find(f"{IM_START}user\n{CONTENT_MARKER}")
            if user_turn < 0:
                raise ValueError(
                    f"ChatRenderer renders ChatML; with tools this chat template renders {text!r:.160}, no "
                    "<|im_start|>user turn"
                )
            self._system_with_tools[key] = text[:user_turn]
        return self._system_with_tools[key]

    def _tool_message(self, tool_call: dict[str, Any]) -> str:
        """The template's ``tool`` message answering ``tool_call`` up to the next assistant header, its
        content :data:`CONTENT_MARKER`: the difference between a conversation rendered with and without it.
        The call's arguments stay out: the assistant's turn is not part of the difference, and the model's
        text is never fed to the template."""
        function = {"name": tool_call["name"], "arguments": {}}
        call = {"id": tool_call["id"], "type": "function", "function": function}
        history = [
            {"role": "user", "content": "?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
        ]
        reply = {
            "role": "tool",
            "tool_call_id": tool_call["id"],
            "name": tool_call["name"],
            "content": CONTENT_MARKER,
        }
        before = self._render(history, (), False)
        after = self._render([*history, reply], (), True)
        if not (after.startswith(before) and before.endswith(f"{IM_END}\n")) or CONTENT_MARKER not in after:
            raise ValueError(
                "ChatRenderer appends a tool message after the assistant's <|im_end|>; this chat template "
                f"renders it as {after[len(before) :]!r:.160}"
            )
        return after[len(before) :]

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _special_id(self, token: str) -> int:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise ValueError(
                f"ChatRenderer renders ChatML (Qwen) conversations; the tokenizer has no {token}"
            )
        return token_id

    def _require_processor(self) -> ProcessorMixin:
        if self.processor is None:
            raise ValueError("this model has no vision processor; observations must be text")
        return self.processor


def default_system_prompt(tokenizer: PreTrainedTokenizerBase) -> str | None:
    """The system message the tokenizer's chat template adds when a conversation has none (None if it adds
    none, or has no template): read off the template's rendering of a one-message conversation."""
    if tokenizer.chat_template is None:
        return None
    marker = "\x00freshrl-user-turn\x00"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True
    )
    user_turn = text.find(f"{IM_START}user\n{marker}")
    before_user = text[:user_turn]
    opening, closing = f"{IM_START}system\n", f"{IM_END}\n"
    if user_turn == 0:
        return None
    if user_turn < 0 or not (before_user.startswith(opening) and before_user.endswith(closing)):
        raise ValueError(
            "ChatRenderer renders ChatML conversations; this chat template renders a user message as "
            f"{text!r:.160}, not as <|im_start|>user after an optional ChatML system message. Pass "
            "system_prompt= explicitly to use it anyway."
        )
    return before_user[len(opening) : -len(closing)]


def to_pil(image: np.ndarray) -> Image.Image:
    """An HxWx3 uint8 array as an RGB PIL image (what both vLLM and the HF processor are given)."""
    return Image.fromarray(_check_image(image))


def _check_image(image: np.ndarray) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"an image is an HxWx3 uint8 array, got shape {image.shape} dtype {image.dtype}")
    return image
