"""The offline model builders: deterministic, cached, atomic, loadable by transformers, ChatML template."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
    GenerationConfig,
)

import models.tiny as tiny
from models.corpus import corpus_texts
from models.tiny import BUILD_INFO_FILE, cache_root, tiny_lm_path, weights_digest


def test_same_seed_builds_the_same_model_and_tokenizer(lm_path: Path, tmp_path: Path):
    again = tiny_lm_path(seed=0, cache_dir=tmp_path)
    assert again.name == lm_path.name
    assert weights_digest(again) == weights_digest(lm_path)
    assert (again / "tokenizer.json").read_bytes() == (lm_path / "tokenizer.json").read_bytes()


def test_other_seed_gives_other_weights_and_the_same_tokenizer(lm_path: Path, model_cache: Path):
    other = tiny_lm_path(seed=1, cache_dir=model_cache)
    assert other != lm_path
    assert weights_digest(other) != weights_digest(lm_path)
    assert (other / "tokenizer.json").read_bytes() == (lm_path / "tokenizer.json").read_bytes()


def test_cached_model_is_reused_not_rebuilt(
    lm_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
):
    def fail(*args, **kwargs):
        raise AssertionError("rebuilt a cached model")

    monkeypatch.setattr(tiny, "train_tokenizer", fail)
    assert tiny_lm_path(seed=0, cache_dir=model_cache) == lm_path


def test_build_is_atomic_and_leaves_no_staging_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(tiny.Qwen2ForCausalLM, "save_pretrained", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        tiny_lm_path(seed=0, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_extra_corpus_changes_the_cache_key(lm_path: Path, model_cache: Path):
    texts = corpus_texts(["A new environment prompt."])
    assert texts[-1] == "A new environment prompt." and texts[:-1] == corpus_texts()
    other = tiny_lm_path(seed=0, cache_dir=model_cache, extra_corpus=["A new environment prompt."])
    assert other != lm_path


def test_cache_dir_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FRESHRL_CACHE_DIR", str(tmp_path))
    assert cache_root() == tmp_path
    assert cache_root(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("FRESHRL_CACHE_DIR")
    assert cache_root() == Path("~/.cache/freshrl/models").expanduser()


def test_lm_loads_in_transformers_with_the_specified_shape(lm_path: Path):
    model = AutoModelForCausalLM.from_pretrained(lm_path)
    config = model.config
    assert (config.num_hidden_layers, config.hidden_size) == (4, 256)
    assert config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    assert config.max_position_embeddings >= 4096
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    assert config.vocab_size == len(tokenizer)
    assert 2000 <= len(tokenizer) <= 4096
    generation = GenerationConfig.from_pretrained(lm_path)
    assert generation.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>") == tokenizer.eos_token_id
    info = json.loads((lm_path / BUILD_INFO_FILE).read_text())
    assert info["seed"] == 0 and info["builder_version"] == tiny.BUILDER_VERSION


def test_chat_template_renders_chatml_with_a_generation_prompt(lm_path: Path):
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go Up?"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nGo Up?<|im_end|>\n<|im_start|>assistant\n"
    )
    no_system = tokenizer.apply_chat_template(messages[1:], tokenize=False)
    assert no_system == "<|im_start|>user\nGo Up?<|im_end|>\n"


@pytest.mark.parametrize(
    "word", ["<answer>", "</answer>", "<search>", "<information>", "<think>", "\\boxed", "\\frac", "Answer:"]
)
def test_tokenizer_knows_the_environment_vocabulary(lm_path: Path, word: str):
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    ids = tokenizer(word, add_special_tokens=False)["input_ids"]
    assert len(ids) <= 3, (word, tokenizer.convert_ids_to_tokens(ids))
    assert tokenizer.decode(ids) == word


def test_tokenizer_round_trips_grids_and_directions(lm_path: Path):
    tokenizer = AutoTokenizer.from_pretrained(lm_path)
    text = "#_OXP\nS.FH\nFFFG\n<answer>Up, Down, Left, Right</answer> 12 + 7 = 19"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert len(ids) < len(text) / 2


def test_vlm_loads_in_transformers_and_makes_16_tokens_of_a_112px_image(vlm_path: Path):
    model = AutoModelForImageTextToText.from_pretrained(vlm_path)
    processor = AutoProcessor.from_pretrained(vlm_path)
    tokenizer = processor.tokenizer
    assert model.config.image_token_id == tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert model.config.vision_start_token_id == tokenizer.convert_tokens_to_ids("<|vision_start|>")
    image = np.zeros((112, 112, 3), dtype=np.uint8)
    batch = processor(
        text=["<|vision_start|><|image_pad|><|vision_end|>Hi"], images=[image], return_tensors="pt"
    )
    assert int((batch["input_ids"] == model.config.image_token_id).sum()) == 16
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (1, batch["input_ids"].shape[1], model.config.text_config.vocab_size)
