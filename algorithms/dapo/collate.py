"""Trajectories -> padded tensors for the learner.

Logprobs are predicted for ``input_ids[:, 1:]``, so every per-token tensor the loss sees is shifted by one:
``loss_mask[:, t]`` and ``logp_old[:, t]`` belong to token ``t + 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from algorithms.trajectory import Trajectory

ImageInputs = Callable[[list[np.ndarray]], dict[str, torch.Tensor]]


def collate(
    trajectories: Sequence[Trajectory],
    *,
    weights: Sequence[float] | None = None,
    pad_token_id: int = 0,
    image_inputs: ImageInputs | None = None,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """Right-pad a micro-batch: input_ids/attention_mask [B, T]; loss_mask/logp_old [B, T-1]; weights [B];
    advantages [B], or [B, T-1] (each response token its turn's advantage, 0 elsewhere) when a trajectory
    has advantages per turn (``Trajectory.turn_advantages``, GiGPO); pixel_values/image_grid_thw when the
    trajectories carry images. A row depends on its own trajectory only, never on the others in the batch."""
    if not trajectories:
        raise ValueError("collate() needs at least one trajectory")
    length = max(len(t.token_ids) for t in trajectories)
    batch_size = len(trajectories)
    input_ids = np.full((batch_size, length), pad_token_id, dtype=np.int64)
    attention_mask = np.zeros((batch_size, length), dtype=np.int64)
    loss_mask = np.zeros((batch_size, length), dtype=np.float32)
    logp_old = np.zeros((batch_size, length), dtype=np.float32)
    per_turn = any(t.turn_advantages for t in trajectories)
    token_advantages = np.zeros((batch_size, length), dtype=np.float32)
    for row, trajectory in enumerate(trajectories):
        n = len(trajectory.token_ids)
        input_ids[row, :n] = trajectory.token_ids
        attention_mask[row, :n] = 1
        loss_mask[row, :n] = trajectory.loss_mask
        logp_old[row, :n] = trajectory.behaviour_logprobs
        if per_turn:
            token_advantages[row, :n] = turn_token_advantages(trajectory)
    advantages = (
        torch.from_numpy(token_advantages[:, 1:].copy())
        if per_turn
        else torch.tensor([t.advantage for t in trajectories], dtype=torch.float32)
    )
    batch = {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention_mask),
        "loss_mask": torch.from_numpy(loss_mask[:, 1:].copy()),
        "logp_old": torch.from_numpy(logp_old[:, 1:].copy()),
        "advantages": advantages,
        "weights": torch.tensor(
            [1.0] * batch_size if weights is None else list(weights), dtype=torch.float32
        ),
    }
    images = [image for t in trajectories for image in t.images]
    if images:
        if image_inputs is None:
            raise ValueError("trajectories carry images but no image processor was given to collate()")
        batch.update(image_inputs(images))
    return {key: value.to(device) for key, value in batch.items()}


def turn_token_advantages(trajectory: Trajectory) -> np.ndarray:
    """[len(token_ids)] each response token its turn's advantage (``advantages_by_turn``), 0 elsewhere: what
    the loss sees on the trajectory's response tokens, indexed by token (the loss's tensors start at token 1,
    so ``[1:]`` lines up with them)."""
    values = np.zeros(len(trajectory.token_ids), dtype=np.float32)
    for (start, end), advantage in zip(trajectory.response_spans, trajectory.advantages_by_turn, strict=True):
        values[start:end] = advantage
    return values
