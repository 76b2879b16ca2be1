"""Can a vision-language model read an env's observation image? ``python -m experiments.vision_reading``.

A vision env's warm start (``algorithms.warm_start``) can fail because the policy cannot act or because the
model cannot see what the image shows; this separates the two. The model (the env's tiny VLM unless
``--model``) is fine-tuned to transcribe observation images into the env's text rendering
(``render_mode="ansi"``; FrozenLakeVision's map as the text env shows it), and a blind control is fine-tuned
from the same weights, with the same seed and data order, on the same examples with every image blank
(the same size, so the same placeholder tokens). Both are scored at intervals on held-out images of the
validation split: the mean cross-entropy per transcribed token. The blind control can learn only the text's
prior (how many holes a map has, where the start and the goal tend to be); a model that reads the image ends
below it. The examples are the images an oracle episode shows (the start and every state after an oracle
turn), so the agent is seen in many cells.

    python -m experiments.vision_reading                                    # FrozenLakeVision, tiny VLM
    python -m experiments.vision_reading --steps 2000 --every 250 --output docs/results/vision_reading

``--output DIR`` writes ``DIR/<env>.json`` (command, commit, CPU, settings and both arms' curves), rewritten
after every measurement. docs/learning_lab.md reads the FrozenLakeVision result.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import envs  # noqa: F401  (registers the freshrl/... ids)
from algorithms.warm_start import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_LR,
    Demonstration,
    demonstration_logprobs,
    fine_tune,
    load_model,
    pad_id,
    tiny_base_path,
)
from envs.seeds import seeds as split_seeds
from experiments.common.results_json import cpu_name, provenance, write_json
from models.chat import ChatRenderer
from models.names import resolve_model_path

INSTRUCTION = "Write what the image shows, as text."
SCORE_BATCH = 16


def transcriptions(
    env_id: str,
    renderer: ChatRenderer,
    split: str,
    count: int,
    env_config: dict[str, Any] | None = None,
    *,
    blank: bool = False,
) -> list[Demonstration]:
    """``count`` examples of (observation image -> ``env.render()`` text) from the oracle's episodes on the
    first tasks of ``split``; with ``blank``, every image is replaced by a mid-grey one of its size."""
    env = gym.make(env_id, render_mode="ansi", **(env_config or {}))
    oracle = getattr(env.unwrapped, "oracle_responses", None)
    examples: list[Demonstration] = []
    try:
        for seed in split_seeds(split, count):
            observation, _ = env.reset(seed=int(seed))
            while len(examples) < count:
                examples.append(_example(renderer, observation, str(env.render()), int(seed), blank))
                responses = oracle() if oracle is not None else []
                if not responses:
                    break
                observation, _, terminated, truncated, _ = env.step(responses[0])
                if terminated or truncated:
                    break
            if len(examples) == count:
                return examples
    finally:
        env.close()
    return examples


def _example(renderer: ChatRenderer, observation: Any, text: str, seed: int, blank: bool) -> Demonstration:
    if not isinstance(observation, dict) or observation.get("image") is None:
        raise ValueError("vision_reading needs an env whose observations carry an image")
    image = np.full_like(observation["image"], 128) if blank else observation["image"]
    prompt = renderer.prompt({"text": INSTRUCTION, "image": image})
    answer = renderer.tokenizer.encode(text, add_special_tokens=False) + [renderer.eos_token_id]
    return Demonstration(
        token_ids=prompt.token_ids + answer,
        loss_mask=[0] * len(prompt.token_ids) + [1] * len(answer),
        seed=seed,
        success=True,
        images=list(prompt.images),
    )


def held_out_loss(
    model: torch.nn.Module, examples: Sequence[Demonstration], renderer: ChatRenderer
) -> tuple[float, dict[str, float]]:
    """Mean cross-entropy per transcribed token over ``examples``, and the same by the token's text
    (stripped of whitespace; ``"(space)"`` for a token that is only whitespace, ``"(end)"`` for the end of the
    answer): which parts of the text the model gets from the image."""
    pad = pad_id(renderer)
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    with torch.no_grad():
        for start in range(0, len(examples), SCORE_BATCH):
            batch = examples[start : start + SCORE_BATCH]
            logprobs, targets, mask = demonstration_logprobs(
                model, batch, pad_token_id=pad, image_inputs=renderer.image_inputs
            )
            kept = mask.bool()
            for token, logprob in zip(targets[kept].tolist(), logprobs[kept].tolist(), strict=True):
                key = _token_key(renderer, token)
                sums[key] = sums.get(key, 0.0) - logprob
                counts[key] = counts.get(key, 0) + 1
    by_token = {key: round(sums[key] / counts[key], 4) for key in sorted(sums)}
    return sum(sums.values()) / sum(counts.values()), by_token


def _token_key(renderer: ChatRenderer, token: int) -> str:
    if token == renderer.eos_token_id:
        return "(end)"
    return renderer.tokenizer.decode([token]).strip() or "(space)"


def train_arm(
    base: Path,
    renderer: ChatRenderer,
    train: Sequence[Demonstration],
    validation: Sequence[Demonstration],
    *,
    steps: int,
    every: int,
    lr: float,
    batch_size: int,
    seed: int,
    on_point: Any = None,
) -> list[dict[str, float]]:
    """Fine-tune a fresh copy of ``base`` on ``train`` for ``steps``; the held-out loss at step 0 and every
    ``every`` steps (and the last), each passed to ``on_point`` as it is measured."""
    model = load_model(base)
    started = time.perf_counter()
    curve: list[dict[str, float]] = []

    def measure(step: int, current: torch.nn.Module) -> None:
        if step % every == 0 or step == steps:
            loss, by_token = held_out_loss(current, validation, renderer)
            point = {
                "step": step,
                "loss": round(loss, 4),
                "by_token": by_token,
                "seconds": round(time.perf_counter() - started, 1),
            }
            curve.append(point)
            if on_point is not None:
                on_point(point)

    model.eval()
    measure(0, model)
    fine_tune(
        model,
        train,
        steps=steps,
        lr=lr,
        batch_size=batch_size,
        seed=seed,
        pad_token_id=pad_id(renderer),
        image_inputs=renderer.image_inputs,
        on_step=measure,
    )
    return curve


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.vision_reading", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--env", default="freshrl/FrozenLakeVision-v0", help="a vision env with render_mode 'ansi'"
    )
    parser.add_argument("--env-config", default=None, help="JSON kwargs of gymnasium.make")
    parser.add_argument("--model", default=None, help="base model (default: the env's tiny VLM)")
    parser.add_argument("--steps", type=int, default=1000, help="AdamW steps per arm (default 1000)")
    parser.add_argument("--every", type=int, default=250, help="held-out measurement interval in steps")
    parser.add_argument(
        "--lr", type=float, default=DEFAULT_LR, help="learning rate (default: the tiny recipe's)"
    )
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--train", type=int, default=2048, help="training examples (images)")
    parser.add_argument("--validation", type=int, default=256, help="held-out examples (images)")
    parser.add_argument("--seed", type=int, default=0, help="tiny model and data-order seed")
    parser.add_argument("--output", default=None, help="folder for the record, DIR/<env>.json")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.every < 1:
        parser.error(f"--steps and --every must be >= 1, got {args.steps} and {args.every}")
    env_config = json.loads(args.env_config) if args.env_config else None
    base = Path(
        tiny_base_path(args.env, seed=args.seed)
        if args.model is None
        else resolve_model_path(args.model, seed=args.seed)
    )
    renderer = ChatRenderer(base)
    if not renderer.is_vision:
        parser.error(f"{base} has no vision part: vision_reading needs a vision-language model")
    record: dict[str, Any] = {
        "provenance": provenance("python -m experiments.vision_reading", argv),
        "env": args.env,
        "env_config": env_config,
        "model": str(base),
        "settings": {
            key: getattr(args, key) for key in ("steps", "lr", "batch_size", "train", "validation", "seed")
        },
        "arms": {},
    }
    path = None
    if args.output is not None:
        path = Path(args.output) / f"{args.env.split('/')[-1]}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
    print(f"vision_reading: {args.env}, {base.name}, {cpu_name(record['provenance']['machine'])}", flush=True)
    for arm, blank in (("image", False), ("blind", True)):
        train = transcriptions(args.env, renderer, "train", args.train, env_config, blank=blank)
        validation = transcriptions(
            args.env, renderer, "validation", args.validation, env_config, blank=blank
        )
        record["arms"][arm] = []

        def on_point(point: dict[str, float], arm: str = arm) -> None:
            record["arms"][arm].append(point)
            tokens = ", ".join(f"{key} {value:.3f}" for key, value in point["by_token"].items())
            print(
                f"  {arm:5s} step {point['step']:5d}: held-out loss {point['loss']:.4f} ({tokens})",
                flush=True,
            )
            if path is not None:
                write_json(path, record)

        train_arm(
            base,
            renderer,
            train,
            validation,
            steps=args.steps,
            every=args.every,
            lr=args.lr,
            batch_size=args.batch_size,
            seed=args.seed,
            on_point=on_point,
        )
    image, blind = record["arms"]["image"][-1], record["arms"]["blind"][-1]
    record["reads_the_image"] = {
        "image_loss": image["loss"],
        "blind_loss": blind["loss"],
        "difference": round(image["loss"] - blind["loss"], 4),
        "by_token": {
            key: {"image": image["by_token"][key], "blind": blind["by_token"].get(key)}
            for key in image["by_token"]
        },
    }
    image, blind = image["loss"], blind["loss"]
    print(
        f"after {args.steps} steps: with the image {image:.4f}, blind {blind:.4f} nats per token", flush=True
    )
    if path is not None:
        write_json(path, record)
    return record


if __name__ == "__main__":
    main()
