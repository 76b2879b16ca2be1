"""ChatRenderer: incremental token-in/token-out rendering equals the chat template's tokenization."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoProcessor, AutoTokenizer

from models.chat import ChatRenderer, Segment

OBSERVATIONS = [
    "You are on a frozen lake.\nSFFH\nFHFG\nMove with <answer>Up</answer>.",
    "Invalid move. Legal moves: Up, Down, Left, Right.",
    "  leading spaces and a trailing newline\n",
]
RESPONSES = ["<answer>Up</answer>", "I think the goal is right.\n<answer>Right</answer>", "x = \\frac{1}{2}"]


def render(renderer: ChatRenderer, observations, responses, ended_with_eos):
    """Render the conversation turn by turn; returns (ids, mask, images)."""
    encode = renderer.tokenizer
    pieces: list[tuple[Segment, int]] = [(renderer.prompt(observations[0]), 0)]
    for turn, response in enumerate(responses):
        ids = encode(response, add_special_tokens=False)["input_ids"]
        if ended_with_eos[turn]:
            ids = ids + [renderer.eos_token_id]
        pieces.append((Segment(ids), 1))
        if turn + 1 < len(observations):
            pieces.append((renderer.continuation(observations[turn + 1], ended_with_eos[turn]), 0))
    ids = [t for segment, _ in pieces for t in segment.token_ids]
    mask = [m for segment, m in pieces for _ in segment.token_ids]
    images = [image for segment, _ in pieces for image in segment.images]
    return ids, mask, images


def template_ids(tokenizer, system, observations, responses) -> list[int]:
    messages = [] if system is None else [{"role": "system", "content": system}]
    for turn, observation in enumerate(observations):
        messages.append({"role": "user", "content": observation})
        if turn < len(responses):
            messages.append({"role": "assistant", "content": responses[turn]})
    ends_with_user = len(observations) > len(responses)
    return tokenizer.apply_chat_template(messages, add_generation_prompt=ends_with_user, return_dict=False)


@pytest.mark.parametrize("system", [None, "You are a helpful assistant."])
@pytest.mark.parametrize("ended_with_eos", [(True, True), (False, True), (False, False)])
def test_rendering_matches_the_chat_template(lm_path: Path, system, ended_with_eos):
    renderer = ChatRenderer(lm_path, system_prompt=system)
    ids, _, _ = render(renderer, OBSERVATIONS, RESPONSES[:2], ended_with_eos)
    assert ids == template_ids(renderer.tokenizer, system, OBSERVATIONS, RESPONSES[:2])


def test_masks_mark_exactly_the_response_tokens(lm_path: Path):
    renderer = ChatRenderer(lm_path)
    ids, mask, _ = render(renderer, OBSERVATIONS, RESPONSES, (True, False, True))
    responses = [t for t, m in zip(ids, mask, strict=True) if m]
    expected = []
    for response, eos in zip(RESPONSES, (True, False, True), strict=True):
        expected += renderer.tokenizer(response, add_special_tokens=False)["input_ids"]
        expected += [renderer.eos_token_id] if eos else []
    assert responses == expected
    # Context pieces are never trained on: every <|im_start|> lies outside the mask.
    im_start = renderer.tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert all(m == 0 for t, m in zip(ids, mask, strict=True) if t == im_start)
    # The last response ended with eos, so the conversation ends in a masked <|im_end|>.
    assert ids[-1] == renderer.eos_token_id and mask[-1] == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    observations=st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"])), min_size=2, max_size=3
    ),
    responses=st.lists(
        st.from_regex(r"[A-Za-z<(\[0-9][ -~\n]{0,40}", fullmatch=True), min_size=1, max_size=2
    ),
)
def test_rendering_matches_the_template_for_arbitrary_text(lm_path: Path, observations, responses):
    # Responses start with a non-space: the template's "assistant\n" + response then splits at the same place.
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(lm_path))
    responses = responses[: len(observations) - 1]
    observations = observations[: len(responses) + 1]
    ids, _, _ = render(renderer, observations, responses, [True] * len(responses))
    assert ids == template_ids(renderer.tokenizer, None, observations, responses)


# SmolLM2-135M-Instruct's template: a default system message when the conversation has none.
DEFAULT_SYSTEM_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@pytest.mark.parametrize("system", [None, "Be brief."])
def test_a_template_default_system_prompt_is_rendered_as_the_template_does(lm_path: Path, system):
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    tokenizer.chat_template = DEFAULT_SYSTEM_TEMPLATE
    renderer = ChatRenderer(tokenizer, system_prompt=system)
    expected_system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert renderer.system_prompt == (expected_system if system is None else system)
    ids, _, _ = render(renderer, OBSERVATIONS, RESPONSES[:2], (True, False))
    assert ids == template_ids(tokenizer, system, OBSERVATIONS, RESPONSES[:2])


def test_a_template_without_a_default_system_prompt_gets_none(lm_path: Path):
    assert ChatRenderer(lm_path).system_prompt is None
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    tokenizer.chat_template = None
    assert ChatRenderer(tokenizer).system_prompt is None


def test_a_template_that_is_not_chatml_before_the_user_turn_is_a_clear_error(lm_path: Path):
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    tokenizer.chat_template = (
        "[INST]{{ messages[0]['content'] }}<|im_start|>user\n{{ messages[0]['content'] }}"
    )
    with pytest.raises(ValueError, match="system_prompt="):
        ChatRenderer(tokenizer)
    assert ChatRenderer(tokenizer, system_prompt="given").system_prompt == "given"


def test_vision_rendering_expands_images_like_the_processor(vlm_path: Path):
    processor = AutoProcessor.from_pretrained(vlm_path)
    renderer = ChatRenderer(processor, system_prompt="Find the goal.")
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in [(112, 112, 3), (200, 150, 3)]]
    observations = [
        {"text": "Where is the goal?", "image": images[0]},
        {"text": "And now?", "image": images[1]},
    ]
    ids, mask, rendered_images = render(renderer, observations, ["<answer>Up</answer>"], [True])
    messages = [
        {"role": "system", "content": "Find the goal."},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where is the goal?"}]},
        {"role": "assistant", "content": "<answer>Up</answer>"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "And now?"}]},
    ]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    expected = processor(text=[text], images=images, return_tensors="pt")
    assert ids == expected["input_ids"][0].tolist()
    assert [image is original for image, original in zip(rendered_images, images, strict=True)] == [
        True,
        True,
    ]
    image_token = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert ids.count(image_token) == 16 + renderer.image_token_count(images[1])
    inputs = renderer.image_inputs(rendered_images)
    assert inputs["image_grid_thw"].tolist() == expected["image_grid_thw"].tolist()
    assert (inputs["pixel_values"] == expected["pixel_values"]).all()
    assert renderer.image_inputs([]) == {}


def test_attributes_and_errors(lm_path: Path, vlm_path: Path):
    text_renderer = ChatRenderer(lm_path)
    assert not text_renderer.is_vision and text_renderer.processor is None
    assert text_renderer.eos_token_id == text_renderer.tokenizer.convert_tokens_to_ids("<|im_end|>")
    with pytest.raises(ValueError, match="no vision processor"):
        text_renderer.prompt({"text": "x", "image": np.zeros((28, 28, 3), np.uint8)})
    assert text_renderer.prompt({"text": "plain"}).token_ids == text_renderer.prompt("plain").token_ids
    vision_renderer = ChatRenderer(vlm_path)
    assert vision_renderer.is_vision
    with pytest.raises(ValueError, match="HxWx3 uint8"):
        vision_renderer.prompt({"text": "x", "image": np.zeros((28, 28), np.uint8)})
    with pytest.raises(TypeError):
        vision_renderer.prompt(42)
