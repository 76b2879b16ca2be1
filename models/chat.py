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

An observation is a string, or ``{"text": str, "image": HxWx3 uint8 array}`` for vision models. The image
goes before the text, as ``<|vision_start|>`` + ``<|image_pad|>`` x N + ``<|vision_end|>``, where N is the
number of image tokens the HF processor produces for that image (its size after the processor's resizing,
divided by the merged patch area). The ids are therefore final: they are the ids vLLM computes on (the
engine hands it one placeholder per image and checks that vLLM's expansion gives back these ids) and the ids
the HF model is trained on (with ``image_inputs``'s pixel values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import AutoConfig, AutoProcessor, AutoTokenizer, PreTrainedTokenizerBase, ProcessorMixin

from models.tiny_tokenizer import IM_END, IM_START, IMAGE_PAD, VISION_END, VISION_START


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
        self.eos_token_id = self._special_id(IM_END)
        self._special_id(IM_START)
        if self.is_vision:
            for token in (VISION_START, VISION_END, IMAGE_PAD):
                self._special_id(token)

    def prompt(self, observation: str | dict[str, Any]) -> Segment:
        """The opening: optional system message, the first user message, the assistant header."""
        text, images = self._user_content(observation)
        system = "" if self.system_prompt is None else f"{IM_START}system\n{self.system_prompt}{IM_END}\n"
        return Segment(self._encode(f"{system}{IM_START}user\n{text}{IM_END}\n{IM_START}assistant\n"), images)

    def continuation(self, observation: str | dict[str, Any], response_ended_with_eos: bool) -> Segment:
        """The glue after a sampled response, up to the next assistant header.

        ``response_ended_with_eos``: the response's last token is ``eos_token_id``. If not (it was cut by
        ``max_tokens`` or a stop string), ``<|im_end|>`` is added first to close the assistant turn.
        """
        text, images = self._user_content(observation)
        close = "" if response_ended_with_eos else IM_END
        return Segment(
            self._encode(f"{close}\n{IM_START}user\n{text}{IM_END}\n{IM_START}assistant\n"), images
        )

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
