"""Engine demo: offline tiny models, token-in/token-out rollouts with vLLM, learner -> engine weight sync.

Steps, all offline and on CPU:

1. Build (or load from the cache) the tiny Qwen2 LM and the tiny Qwen2.5-VL model (``models.tiny``).
2. Start the rollout engine on the LM, render a FrozenLake-like prompt (``models.chat.ChatRenderer``) and
   sample a few responses: token ids, per-token logprobs, finish reasons; then the same with a stop string.
3. Perturb the weights of the transformers copy of the model, load them into the running engine
   (``RolloutEngine.load_weights``), sample again with the same seed, and check the engine's logprobs against
   the perturbed transformers model (``models.logprobs.token_logprobs``).
4. Start an engine on the VLM and sample from an image prompt (a 112x112 drawing of the lake).

The models are random, so the text is gibberish; what matters is the plumbing. It takes no options.

    python -m experiments.demo
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from experiments.common.quiet_logs import command_log_file, install
from models.chat import ChatRenderer
from models.engine import Completion, Prompt, RolloutEngine, SamplingConfig
from models.logprobs import token_logprobs
from models.tiny import tiny_lm_path, tiny_vlm_path

LAKE = ["SFFF", "FHFH", "FFFH", "HFFG"]
OBSERVATION = (
    "You are on a frozen lake. S start, F frozen, H hole, G goal; you are at S.\n"
    + "\n".join(LAKE)
    + "\nReply with one move: <answer>Up</answer>, Down, Left or Right."
)
COLOURS = {"S": (80, 160, 80), "F": (200, 230, 255), "H": (20, 40, 90), "G": (240, 200, 40)}


def lake_image(cell: int = 28) -> np.ndarray:
    """The lake drawn as a 112x112 RGB image, one colour per cell kind."""
    image = np.zeros((len(LAKE) * cell, len(LAKE[0]) * cell, 3), dtype=np.uint8)
    for r, row in enumerate(LAKE):
        for c, kind in enumerate(row):
            image[r * cell : (r + 1) * cell, c * cell : (c + 1) * cell] = COLOURS[kind]
    return image


def show(renderer: ChatRenderer, completions: list[Completion], tokens_shown: int = 6) -> None:
    for i, c in enumerate(completions):
        pieces = " ".join(
            f"{renderer.tokenizer.decode([t])!r}:{lp:.2f}"
            for t, lp in zip(c.token_ids[:tokens_shown], c.logprobs[:tokens_shown], strict=True)
        )
        print(f"  sample {i}: finish={c.finish_reason:<6} {len(c.token_ids):>2} tokens  text={c.text[:40]!r}")
        print(f"            first (token:logprob): {pieces}")


def max_logprob_gap(model, prompt: Prompt, completions: list[Completion]) -> float:
    gaps = []
    for c in completions:
        with torch.no_grad():
            logp, _ = token_logprobs(model, torch.tensor([prompt.token_ids + c.token_ids]))
        gaps.append((logp[0, len(prompt.token_ids) - 1 :] - torch.tensor(c.logprobs)).abs().max().item())
    return max(gaps)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.demo", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    hf_logging.disable_progress_bar()
    print(f"freshrl: full log in {install(command_log_file('demo'))}")
    start = time.perf_counter()
    lm_path, vlm_path = tiny_lm_path(), tiny_vlm_path()
    print(f"[1] tiny models ready in {time.perf_counter() - start:.1f}s:\n    {lm_path}\n    {vlm_path}")

    start = time.perf_counter()
    engine = RolloutEngine(lm_path, dtype="float32", max_model_len=2048, seed=0)
    renderer = ChatRenderer(lm_path, system_prompt="You are a careful agent.")
    prompt = Prompt(renderer.prompt(OBSERVATION).token_ids)
    started = time.perf_counter() - start
    print(f"\n[2] engine started in {started:.1f}s; prompt of {len(prompt.token_ids)} tokens")
    sampling = SamplingConfig(n=3, temperature=1.0, max_tokens=16, seed=1)
    (before,) = engine.generate([prompt], sampling)
    show(renderer, before)
    (stopped,) = engine.generate([prompt], SamplingConfig(n=2, max_tokens=24, stop=("e",), seed=2))
    print("  with stop=('e',): the ids keep the token that made the stop string; the text is cut before it")
    show(renderer, stopped)

    model = AutoModelForCausalLM.from_pretrained(lm_path, dtype=torch.float32).eval()
    print(f"    max |logp_vLLM - logp_HF| = {max_logprob_gap(model, prompt, before):.1e}")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    start = time.perf_counter()
    engine.load_weights(model.state_dict())
    print(f"\n[3] perturbed weights loaded into the running engine in {time.perf_counter() - start:.2f}s")
    (after,) = engine.generate([prompt], sampling)
    show(renderer, after)
    changed = sum(a.token_ids != b.token_ids for a, b in zip(before, after, strict=True))
    print(f"    same seed, {changed}/{len(after)} samples changed; against the perturbed HF model:")
    print(f"    max |logp_vLLM - logp_HF| = {max_logprob_gap(model, prompt, after):.1e}")

    start = time.perf_counter()
    vision_engine = RolloutEngine(vlm_path, dtype="float32", max_model_len=2048, seed=0)
    vision_renderer = ChatRenderer(vlm_path)
    segment = vision_renderer.prompt({"text": "Where is the goal?", "image": lake_image()})
    image_tokens = segment.token_ids.count(vision_renderer.tokenizer.convert_tokens_to_ids("<|image_pad|>"))
    print(
        f"\n[4] VLM engine started in {time.perf_counter() - start:.1f}s; image prompt of "
        f"{len(segment.token_ids)} tokens ({image_tokens} image tokens for a 112x112 image)"
    )
    vision_prompt = Prompt(segment.token_ids, segment.images)
    (vision,) = vision_engine.generate([vision_prompt], SamplingConfig(n=2, max_tokens=12, seed=3))
    show(vision_renderer, vision)


if __name__ == "__main__":
    main()
