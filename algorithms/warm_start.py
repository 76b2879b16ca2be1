"""Supervised warm start: a short fine-tune of a base model on an environment's oracle demonstrations.

RL needs a starting policy that succeeds sometimes but not always: GRPO's group advantages are zero when
every sample of a group gets the same reward (DAPO's dynamic sampling drops such groups). The tiny models
(``models.tiny``) start from random weights and never succeed, so before RL they are fine-tuned for a few
hundred steps on episodes an oracle plays (``env.unwrapped.oracle_responses()``), and stopped early enough
that they still fail often. A pretrained base (``smollm2``, or any model directory) is warm-started the same
way with a fine-tune's learning rate and far fewer steps (:func:`recipe_for`).

A demonstration is recorded in exactly the token format of the RL rollout (``algorithms/rollout.py``)::

    renderer.prompt(o_1, tools)                                    loss mask 0
    tokenizer.encode(response_1, add_special_tokens=False) + eos  loss mask 1 (the response ended on eos)
    renderer.continuation(o_2, True, tool_call)                    loss mask 0
    response_2 + eos ...                                           loss mask 1

from ``reset(seed=s)`` for seeds of the train split (``envs/seeds.py``); vision observations contribute their
images. The loss is the mean cross-entropy over masked tokens (``models.logprobs.token_logprobs``), AdamW,
with a fixed seed and a fixed data order, so a warm start is deterministic on a given machine.

``warm_started_path(env_id)`` returns the directory of the warm-started model, training it if it is not
cached. It sits beside the tiny models (``models.tiny.cache_root``), in a directory named for a hash of
(builder version, base weights digest, env id, steps, seed, learning rate, batch size, demonstration count,
and the first demonstrations' tokens, so a change to the env's text or oracle trains a new model),
holds the base model's tokenizer / processor files, and loads in transformers and vLLM like the tiny models.
It is written in a temporary directory and renamed into place, so a crash never leaves a half-built model.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, PreTrainedModel

import envs  # noqa: F401  (registers the freshrl/... ids)
from algorithms.rollout import env_tools
from envs.seeds import seeds as split_seeds
from models.chat import ChatRenderer
from models.logprobs import token_logprobs
from models.names import resolve_model_path
from models.progress import Progress
from models.tiny import BUILD_INFO_FILE, cached_build, tiny_lm_path, tiny_vlm_path, weights_digest

# Bump when a change to this module changes what a warm start writes, so caches are rebuilt.
BUILDER_VERSION = 1

DEFAULT_LR = 1e-3
DEFAULT_BATCH_SIZE = 8
DEFAULT_DEMOS = 1024
DEFAULT_STEPS = 200
FINGERPRINT_DEMOS = 16
# Optimizer steps per env, chosen so the warm-started model succeeds sometimes but not always, within a few
# CPU minutes. Success of the base tiny model -> the warm start on 32 validation seeds x 4 samples at
# temperature 1.0 with TINY_SCALE's 48-token turns (``python -m experiments.warm_start``, 95% Wilson
# intervals), and the build's CPU seconds (Sokoban, NQSearch, FrozenLakeVision: on a loaded machine,
# which inflates CPU time). Only the FrozenLakes reach a useful rate: in a few hundred steps the tiny models
# learn the answer format and, on FrozenLake, start to read the map (400 steps: 26.6%; 600: 29.7%); they do
# not learn Sokoban's pushes, arithmetic or copying an answer from a search result, and more steps barely
# helped there (--calibrate up to 600).
WARM_START_STEPS: dict[str, int] = {
    "freshrl/FrozenLake-v0": 400,  # 0% -> 26.6% (19.7-34.8%), 227 CPU s
    "freshrl/FrozenLakeVision-v0": 300,  # 0% -> 10.9% (6.6-17.5%), 580 CPU s
    "freshrl/Sokoban-v0": 400,  # 0% -> 1.6% (0.4-5.5%), 925 CPU s: below target
    "freshrl/Math-v0": 200,  # 0% -> 3.1% (1.2-7.8%), 64 CPU s: below target
    "freshrl/NQSearch-v0": 300,  # 0% -> 2.3% (0.8-6.7%), 772 CPU s: below target
}


@dataclass(frozen=True)
class WarmStartRecipe:
    """A base model's warm start: AdamW learning rate, demonstrations per step, and optimizer steps (per env
    id, else ``default_steps``)."""

    lr: float
    batch_size: int
    default_steps: int
    steps: dict[str, int] = field(default_factory=dict)

    def steps_for(self, env_id: str) -> int:
        return self.steps.get(env_id, self.default_steps)


# The tiny models start from random weights: a high learning rate and a few hundred steps.
TINY_RECIPE = WarmStartRecipe(DEFAULT_LR, DEFAULT_BATCH_SIZE, DEFAULT_STEPS, WARM_START_STEPS)
# A pretrained base (any model but the tiny ones; measured on SmolLM2-135M-Instruct): a fine-tune's learning
# rate (the tiny models' 1e-3 would wreck it) and far fewer steps. 60 steps of 4 demonstrations took SmolLM2
# from 0/32 to 21.9% (13.5-33.4%) on 64 Math-v0 validation tasks: it succeeds sometimes, not always.
PRETRAINED_RECIPE = WarmStartRecipe(lr=5e-5, batch_size=4, default_steps=60)


def recipe_for(base: str | Path) -> WarmStartRecipe:
    """TINY_RECIPE for the tiny models (their build info says so), PRETRAINED_RECIPE for any other base."""
    info = Path(base) / BUILD_INFO_FILE
    kind = json.loads(info.read_text()).get("kind", "") if info.is_file() else ""
    return TINY_RECIPE if kind.startswith("tiny-") else PRETRAINED_RECIPE


ImageInputs = Callable[[list[np.ndarray]], dict[str, torch.Tensor]]

ORACLE_CONTRACT = (
    "oracle_responses() -> list[str]: the responses an oracle gives from the current state. The warm start "
    "calls it after reset() and again after every step, sends only the first response, ends the "
    "demonstration on an empty list, and trains only on the episodes it solves (info['success']); it "
    "must solve at least half of the train tasks (docs/adding_an_env.md, 'The oracle')."
)


class MissingOracleError(ValueError):
    """The env has no ``oracle_responses()``, so there are no demonstrations to warm-start on."""


def require_oracle(env: gym.Env, env_id: str) -> None:
    """Raise :class:`MissingOracleError`, naming the contract and the ways around it, unless ``env`` has an
    oracle."""
    if getattr(env.unwrapped, "oracle_responses", None) is None:
        raise MissingOracleError(
            f"{env_id}: the warm start needs demonstrations from env.unwrapped.oracle_responses(), which "
            f"{type(env.unwrapped).__name__} does not have.\n  Contract: {ORACLE_CONTRACT}\n  Ways around "
            "it: implement oracle_responses(); or train from the untrained tiny model with --no-warm-start "
            "(it rarely succeeds, so most groups carry no signal and nothing is trained); or start from a "
            "model of your own with --model <local dir or hub id>."
        )


@dataclass
class Demonstration:
    """One oracle episode as the rollout would record it: token ids, loss mask, images, outcome."""

    token_ids: list[int]
    loss_mask: list[int]
    seed: int
    success: bool
    images: list[np.ndarray] = field(default_factory=list)


def record_demonstration(env: gym.Env, renderer: ChatRenderer, seed: int) -> Demonstration:
    """Reset ``env`` with ``seed`` and play the oracle's responses, one per turn, until the episode ends.

    The oracle is asked again after every step (it replans, e.g. after a slip). Each response is tokenized
    with ``add_special_tokens=False`` and closed with ``renderer.eos_token_id``.
    """
    require_oracle(env, env.spec.id if env.spec else str(env))
    oracle = env.unwrapped.oracle_responses
    observation, info = env.reset(seed=int(seed))
    demo = Demonstration(token_ids=[], loss_mask=[], seed=int(seed), success=False)
    segment = renderer.prompt(observation, tools=env_tools(env))
    _append(demo, segment.token_ids, 0, segment.images)
    while responses := oracle():
        response = responses[0]
        ids = renderer.tokenizer.encode(response, add_special_tokens=False) + [renderer.eos_token_id]
        _append(demo, ids, 1)
        observation, _, terminated, truncated, info = env.step(response)
        demo.success = demo.success or bool(info.get("success", False))
        if terminated or truncated:
            break
        segment = renderer.continuation(observation, True, tool_call=info.get("tool_call"))
        _append(demo, segment.token_ids, 0, segment.images)
    return demo


def _append(demo: Demonstration, ids: list[int], mask: int, images: Sequence[np.ndarray] = ()) -> None:
    demo.token_ids += ids
    demo.loss_mask += [mask] * len(ids)
    demo.images += list(images)


def demonstrations(
    env_id: str, renderer: ChatRenderer, count: int, env_config: dict[str, Any] | None = None
) -> list[Demonstration]:
    """``count`` successful oracle episodes of ``env_id`` (made with ``env_config``, the run's
    ``gymnasium.make`` kwargs) on the first train seeds (unsolved ones skipped)."""
    env = gym.make(env_id, **(env_config or {}))
    try:
        demos: list[Demonstration] = []
        # An oracle that fails on more than every other task is broken; stop looking rather than loop.
        for seed in split_seeds("train", 2 * count + 16):
            demo = record_demonstration(env, renderer, seed)
            if demo.success:
                demos.append(demo)
                if len(demos) == count:
                    return demos
    finally:
        env.close()
    raise RuntimeError(f"{env_id}: the oracle solved only {len(demos)} of {2 * count + 16} train tasks")


def demonstrations_digest(demos: Sequence[Demonstration]) -> str:
    """SHA-256 over the token ids, loss masks and images of ``demos``, in order."""
    digest = hashlib.sha256()
    for demo in demos:
        digest.update(np.asarray(demo.token_ids, dtype=np.int64).tobytes())
        digest.update(np.asarray(demo.loss_mask, dtype=np.int8).tobytes())
        for image in demo.images:
            digest.update(np.ascontiguousarray(image).tobytes())
    return digest.hexdigest()


def pad_id(renderer: ChatRenderer) -> int:
    """The id that pads a batch of demonstrations: the tokenizer's pad token, else the end of a turn."""
    pad = renderer.tokenizer.pad_token_id
    return renderer.eos_token_id if pad is None else pad


def demonstration_logprobs(
    model: PreTrainedModel,
    demos: Sequence[Demonstration],
    *,
    pad_token_id: int,
    image_inputs: ImageInputs | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(logprobs, targets, mask)``, each [B, T-1]: the log-probability of every next token of ``demos``
    (right-padded into one batch), that token's id, and 1 where it is a response token (the loss mask)."""
    length = max(len(d.token_ids) for d in demos)
    input_ids = torch.full((len(demos), length), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(demos), length), dtype=torch.long)
    mask = torch.zeros((len(demos), length), dtype=torch.float32)
    for row, demo in enumerate(demos):
        n = len(demo.token_ids)
        input_ids[row, :n] = torch.tensor(demo.token_ids)
        attention[row, :n] = 1
        mask[row, :n] = torch.tensor(demo.loss_mask, dtype=torch.float32)
    images = [image for demo in demos for image in demo.images]
    if images and image_inputs is None:
        raise ValueError("the demonstrations carry images but no image_inputs was given")
    vision = image_inputs(images) if images else {}
    logprobs, _ = token_logprobs(model, input_ids, attention, **vision)
    # logprobs[:, t] belongs to token t + 1.
    return logprobs, input_ids[:, 1:], mask[:, 1:]


def demonstration_loss(
    model: PreTrainedModel,
    demos: Sequence[Demonstration],
    *,
    pad_token_id: int,
    image_inputs: ImageInputs | None = None,
) -> torch.Tensor:
    """Mean cross-entropy (nats per token) of the response tokens of ``demos`` under ``model``."""
    logprobs, _, mask = demonstration_logprobs(
        model, demos, pad_token_id=pad_token_id, image_inputs=image_inputs
    )
    return -(logprobs * mask).sum() / mask.sum().clamp(min=1.0)


def fine_tune(
    model: PreTrainedModel,
    demos: Sequence[Demonstration],
    *,
    steps: int,
    lr: float = DEFAULT_LR,
    batch_size: int = DEFAULT_BATCH_SIZE,
    seed: int = 0,
    pad_token_id: int,
    image_inputs: ImageInputs | None = None,
    progress: bool = True,
    on_step: Callable[[int, PreTrainedModel], None] | None = None,
) -> list[float]:
    """Train ``model`` in place for ``steps`` AdamW steps on ``demos``; returns the loss of every step.

    Batches are ``batch_size`` demonstrations in an order drawn from ``seed`` (a fresh permutation per pass
    over the data). Constant learning rate, gradient norm clipped to 1, no weight decay: the model after
    step k is the model a ``steps=k`` run ends with, so ``on_step(k, model)`` (called after every step, the
    model in eval mode) can evaluate several step counts in one run.
    """
    if steps < 0 or batch_size < 1 or not demos:
        raise ValueError(f"need steps >= 0, batch_size >= 1 and demonstrations, got {steps}, {batch_size}")
    rng = np.random.default_rng(seed)
    order: list[int] = []
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses: list[float] = []
    with (
        torch.random.fork_rng(devices=[]),
        Progress(total=steps, desc="warm start", unit="step", disable=not progress) as bar,
    ):
        torch.manual_seed(seed)
        for step in range(1, steps + 1):
            while len(order) < batch_size:
                order += rng.permutation(len(demos)).tolist()
            batch, order = [demos[i] for i in order[:batch_size]], order[batch_size:]
            loss = demonstration_loss(model, batch, pad_token_id=pad_token_id, image_inputs=image_inputs)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            bar.update()
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
            if on_step is not None:
                model.eval()
                on_step(step, model)
                model.train()
    model.eval()
    return losses


def is_vision_env(env_id: str) -> bool:
    """Whether ``env_id``'s observations carry images (it then needs the vision model)."""
    env = gym.make(env_id)
    try:
        return getattr(env.unwrapped, "image_shape", None) is not None
    finally:
        env.close()


def tiny_base_path(env_id: str, *, seed: int = 0, cache_dir: str | Path | None = None) -> Path:
    """The offline tiny model for ``env_id`` (built if not cached): the VLM for envs with image
    observations, else the LM. What the warm start starts from, and what ``--no-warm-start`` trains."""
    builder = tiny_vlm_path if is_vision_env(env_id) else tiny_lm_path
    return builder(seed=seed, cache_dir=cache_dir)


def load_model(path: str | Path) -> PreTrainedModel:
    """The HF model at ``path`` in float32: image-text class when its config has a vision part."""
    if hasattr(AutoConfig.from_pretrained(path), "vision_config"):
        return AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)


def warm_started_path(
    env_id: str,
    *,
    base: str | Path | None = None,
    steps: int | None = None,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    lr: float | None = None,
    batch_size: int | None = None,
    demos: int = DEFAULT_DEMOS,
    env_config: dict[str, Any] | None = None,
) -> Path:
    """Directory of ``base`` fine-tuned on ``env_id``'s oracle demonstrations, trained if not cached.

    Args:
        env_id: a registered env whose unwrapped env has ``oracle_responses()``.
        base: the model to start from (a model name such as ``"smollm2"``, a directory: ``models.names``);
            None: the tiny VLM (``tiny_vlm_path(seed)``) for envs with image
            observations, else the tiny LM (``tiny_lm_path(seed)``), both from ``cache_dir``.
        steps, lr, batch_size: optimizer steps, AdamW learning rate, demonstrations per step; None: the
            base's recipe (:func:`recipe_for`: the tiny models' ``WARM_START_STEPS[env_id]`` or
            ``DEFAULT_STEPS`` at 1e-3 x 8, a pretrained model's 60 steps at 5e-5 x 4).
        seed: seed of the tiny base model (when ``base`` is None) and of the data order.
        cache_dir: where models are cached (``models.tiny.cache_root``).
        demos: distinct demonstrations (the first successful train seeds).
        env_config: the env's ``gymnasium.make`` kwargs (a run's ``env_config``), so that the demonstrations
            are episodes of the task the run trains on (an easier Sokoban, a larger lake). It is not a cache
            key of its own: the first demonstrations' tokens are, and a setting that changes the task
            changes them, while one equal to the env's defaults reuses the same model.
    """
    probe = gym.make(env_id, **(env_config or {}))
    try:
        require_oracle(probe, env_id)  # before building anything
    finally:
        probe.close()
    base = Path(
        tiny_base_path(env_id, seed=seed, cache_dir=cache_dir)
        if base is None
        else resolve_model_path(base, seed=seed, cache_dir=cache_dir)
    )
    recipe = recipe_for(base)
    steps = recipe.steps_for(env_id) if steps is None else steps
    lr = recipe.lr if lr is None else lr
    batch_size = recipe.batch_size if batch_size is None else batch_size
    renderer = ChatRenderer(base)
    info = {
        "builder_version": BUILDER_VERSION,
        "base_weights_sha256": weights_digest(base),
        "env_id": env_id,
        "steps": steps,
        "seed": seed,
        "lr": lr,
        "batch_size": batch_size,
        "demos": demos,
        # A change to the env's text or oracle (or the chat format) changes the first demonstrations.
        "first_demos_sha256": demonstrations_digest(
            demonstrations(env_id, renderer, min(demos, FINGERPRINT_DEMOS), env_config)
        ),
    }

    def build(directory: Path) -> dict[str, Any]:
        settings = {"steps": steps, "seed": seed, "lr": lr, "batch_size": batch_size, "count": demos}
        settings["env_config"] = env_config
        return {"base": str(base), "result": _build(directory, base, renderer, env_id, **settings)}

    return cached_build(f"warm-{env_id.split('/')[-1]}-steps{steps}-seed{seed}", info, build, cache_dir)


def step_seconds(
    model: PreTrainedModel,
    batch: Sequence[Demonstration],
    *,
    pad_token_id: int,
    image_inputs: ImageInputs | None = None,
) -> float:
    """Seconds of one warm-start step (loss, backward, AdamW update) on ``batch``, timed on a throwaway
    copy of ``model`` so the warm start itself is unchanged. Two steps run and the faster counts: the first
    pays one-off costs (memory allocation, the optimizer's state)."""
    probe = copy.deepcopy(model)
    probe.train()
    optimizer = torch.optim.AdamW(probe.parameters(), lr=DEFAULT_LR, weight_decay=0.0)
    times = []
    with torch.random.fork_rng(devices=[]):
        for _ in range(2):
            started = time.perf_counter()
            loss = demonstration_loss(probe, batch, pad_token_id=pad_token_id, image_inputs=image_inputs)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - started)
    return min(times)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _build(
    directory: Path,
    base: Path,
    renderer: ChatRenderer,
    env_id: str,
    *,
    steps: int,
    seed: int,
    lr: float,
    batch_size: int,
    count: int,
    env_config: dict[str, Any] | None,
) -> dict[str, Any]:
    start, start_cpu = time.perf_counter(), time.process_time()
    print(
        f"warm start: {env_id} is not cached; collecting {count} oracle demonstrations, then {steps} AdamW "
        "steps (--warm-start-steps N shortens it, --no-warm-start skips it)",
        flush=True,
    )
    demos = demonstrations(env_id, renderer, count, env_config)
    model = load_model(base)
    pad = pad_id(renderer)
    image_inputs = renderer.image_inputs if renderer.is_vision else None
    per_step = step_seconds(model, demos[:batch_size], pad_token_id=pad, image_inputs=image_inputs)
    print(
        f"warm start: projected {_duration(per_step * steps)} for {steps} steps ({per_step:.2f} s a step, "
        f"measured on one batch here; demonstrations took {time.perf_counter() - start:.0f} s); then cached",
        flush=True,
    )
    losses = fine_tune(
        model,
        demos,
        steps=steps,
        lr=lr,
        batch_size=batch_size,
        seed=seed,
        pad_token_id=pad,
        image_inputs=image_inputs,
    )
    # The tokenizer / processor / chat template files of the base, then the new weights and config.
    for file in base.iterdir():
        if (
            file.is_file()
            and file.suffix != ".safetensors"
            and file.name not in (BUILD_INFO_FILE, "model.safetensors.index.json")
        ):
            shutil.copy2(file, directory / file.name)
    model.save_pretrained(directory)
    tail = losses[-10:]
    return {
        "first_loss": losses[0] if losses else None,
        "final_loss_mean_last_10": float(np.mean(tail)) if tail else None,
        "seconds": round(time.perf_counter() - start, 1),
        "cpu_seconds": round(time.process_time() - start_cpu, 1),
    }
