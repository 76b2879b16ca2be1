"""DAPO's learner: mini-batched optimizer steps with split-invariant gradient accumulation.

``update_from_trajectories`` runs one pass of DAPO's update over a batch (the fresh batch, or one replay
batch): the batch is shuffled and cut into mini-batches of ``minibatch_size`` trajectories, one AdamW step
each, ``num_epochs`` times. A mini-batch is processed in micro-batches of ``micro_batch_size`` trajectories
whose gradients accumulate; each micro-batch's loss is divided by the normaliser of the whole mini-batch
(across all learners), so the gradient does not depend on how the step is split (loss.py).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.rl_module.rl_module import RLModule

from algorithms.dapo.collate import collate, turn_token_advantages
from algorithms.dapo.entropy_guard import GuardedTokens, select_tokens
from algorithms.dapo.loss import LossConfig, loss_normalizer, policy_loss
from algorithms.dapo.overlong import is_overlong, overlong_filter_mask
from algorithms.trajectory import Trajectory
from models.lora import adapters_disabled


def micro_batch_order(trajectory: Trajectory) -> tuple[int, int]:
    """The order rows are cut into micro-batches: a group's samples side by side, so that a micro-batch
    shares its prompt (DAPOConfig.share_prefix), shortest first, so that it pads its rows to similar lengths.
    On a SmolLM2 FrozenLake batch (32 rows of 130-337 tokens, micro-batches of 4) this cut the padded
    tokens from 36% of those the model ran to 21% (docs/performance.md, "A SmolLM2 FrozenLake iteration")."""
    return trajectory.group_id, len(trajectory.token_ids)


class DAPOTorchLearner(TorchLearner):
    def build(self) -> None:
        super().build()
        self.optimizer_steps = 0  # steps that ran (skipped empty or non-finite steps are not counted)
        self.iteration = 0  # of the current update (update_from_trajectories)
        self._learner_logp_old: dict[int, torch.Tensor] | None = None
        self._shuffle_rng = np.random.default_rng(self.config.seed)
        # Clip-Cov's draws: a stream of its own, so that the guard leaves the shuffle as it was.
        self._guard_rng = np.random.default_rng(np.random.SeedSequence(self.config.seed).spawn(1)[0])
        self._image_inputs = None
        self._pad_token_id = 0
        policy = self.policy
        if policy.vision:
            from models.chat import ChatRenderer

            self._image_inputs = ChatRenderer(policy.model_path).image_inputs
        self._reference = None
        if self.config.kl_coef > 0 and policy.lora_rank > 0:
            # The reference (the initial policy) is the base model: the policy's own, adapters switched off.
            self._reference = policy.model
        elif self.config.kl_coef > 0:
            from models.policy_module import load_hf_model

            self._reference = load_hf_model(policy.model_path).to(self._device).eval().requires_grad_(False)

    def configure_optimizers_for_module(self, module_id: str, config=None) -> None:
        module = self._module[module_id]
        # With LoRA only the adapters train: AdamW holds (and checkpoints) their state alone.
        params = [p for p in self.get_parameters(module) if p.requires_grad]
        # The fused kernel updates each tensor in one pass; torch's default for CPU tensors is a per-op loop
        # (for the 0.5B benchmark model on 2 cores, a step took 1.8 s of CPU instead of 8-9 s).
        fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params) or None
        optimizer = torch.optim.AdamW(
            params,
            lr=config.lr,
            betas=tuple(config.adam_betas),
            weight_decay=config.weight_decay,
            fused=fused,
        )
        self.register_optimizer(
            module_id=module_id, optimizer=optimizer, params=params, lr_or_lr_schedule=config.lr
        )

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        raise NotImplementedError(
            "DAPOTorchLearner trains through update_from_trajectories(): RLlib's batch update path assumes "
            "fixed-shape columns, not variable-length token trajectories"
        )

    # ------------------------------------------------------------------------------------------------
    def update_from_trajectories(
        self,
        trajectories: Sequence[Trajectory],
        weights: Sequence[float] | None = None,
        *,
        tag: str = "fresh",
        iteration: int = 0,
    ) -> dict[str, Any]:
        """DAPO update on one batch; returns this learner's reduced metrics (``train/...``).

        iteration: the training iteration (rollout step, from 0) the batch belongs to; the learning-rate
        warm-up counts it, so every step of an iteration (fresh or replay) uses the same rate.
        """
        config = self.config
        self.iteration = iteration
        module_id, module = self._single_module()
        optimizer = self.get_optimizer(module_id)
        weights = np.ones(len(trajectories)) if weights is None else np.asarray(weights, dtype=np.float64)
        minibatch_size = min(config.minibatch_size or len(trajectories), len(trajectories))
        loss_cfg = LossConfig.from_config(config)
        # Mismatch correction: pi_old from the learner, once per pass, before its first step (every epoch
        # uses it). Each learner computes it for the whole batch, not only its shards: N x the no-grad cost.
        self._learner_logp_old = (
            self._learner_logprobs(trajectories) if config.resolved_mismatch_correction() else None
        )
        for _ in range(config.num_epochs):
            order = self._shuffle_rng.permutation(len(trajectories))
            for start in range(0, len(order), minibatch_size):
                indices = order[start : start + minibatch_size]
                self._optimizer_step(
                    module, optimizer, [trajectories[i] for i in indices], weights[indices], loss_cfg, tag
                )
        self._learner_logp_old = None
        return self.metrics.reduce()

    def _optimizer_step(self, module, optimizer, minibatch, weights, loss_cfg: LossConfig, tag: str) -> None:
        config = self.config
        masks = [self._effective_mask(t) for t in minibatch]
        if sum(float(m.sum()) for m in masks) == 0:
            # Nothing to learn (e.g. overlong filtering masked every response): no forward pass, and no
            # optimizer step, which would still move the weights through AdamW's decay and momentum.
            self.metrics.log_value("train/skipped_empty_steps", 1, reduce="sum")
            return
        normalizer = loss_normalizer(masks, loss_cfg.loss_agg_mode, self._response_budget(minibatch))
        # Only rows that add to the loss get a forward/backward (the normaliser above still counts them all).
        # If none does, one row runs with its loss times 0, so AdamW steps on zero gradients as before.
        trained = [i for i, t in enumerate(minibatch) if self._contributes(t, masks[i], weights[i])]
        candidates = trained or [0]
        # This learner's shard; with DDP each rank averages gradients, so scale the loss back to a sum.
        world = max(1, config.num_learners)
        positions, stand_in = learner_shard(len(candidates), self._learner_index, world)
        shard, stand_in = [candidates[p] for p in positions], stand_in or not trained
        self.metrics.log_value("train/skipped_rows", len(minibatch) - len(trained), reduce="sum")
        guarded = self._guarded_tokens(minibatch, trained, masks, loss_cfg)
        guard_rows = {i: position for position, i in enumerate(trained)}
        # The order of a minibatch's rows does not change its gradient.
        shard.sort(key=lambda i: micro_batch_order(minibatch[i]))
        micro = [
            shard[i : i + config.micro_batch_size] for i in range(0, len(shard), config.micro_batch_size)
        ]

        self._set_optimizer_lr(optimizer, self._learning_rate())
        optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        for k, rows in enumerate(micro):
            sync = k == len(micro) - 1 or not hasattr(module, "no_sync")
            with contextlib.nullcontext() if sync else module.no_sync():
                batch = collate(
                    [minibatch[i] for i in rows],
                    weights=weights[rows],
                    pad_token_id=self._pad_token_id,
                    image_inputs=self._image_inputs,
                    device=self._device,
                )
                out = module.forward_train(batch)
                keep = self._overlong_keep([minibatch[i] for i in rows])
                mask = batch["loss_mask"] * keep.to(batch["loss_mask"])[:, None]
                logp_ref = self._reference_logprobs(batch) if self._reference is not None else None
                logp_old, logp_sampler = batch["logp_old"], None
                if self._learner_logp_old is not None:
                    logp_sampler = logp_old
                    logp_old = self._padded_learner_logp_old([minibatch[i] for i in rows], logp_sampler)
                guard_tokens = None
                if guarded is not None:
                    guard_tokens = guarded.batch([guard_rows.get(i) for i in rows], like=mask)
                loss, metrics = policy_loss(
                    out["logp"],
                    logp_old,
                    batch["advantages"],
                    mask,
                    normalizer=normalizer,
                    cfg=loss_cfg,
                    weights=batch["weights"],
                    logp_ref=logp_ref,
                    logp_sampler=logp_sampler,
                    guard_tokens=guard_tokens,
                )
                (loss * (0.0 if stand_in else world)).backward()
            if stand_in:
                continue
            tokens = float(metrics["tokens"])
            _accumulate(sums, "tokens", tokens)
            _accumulate(sums, "loss", float(loss.detach()))
            for name in ("clipfrac_low", "clipfrac_high", "dual_clip_frac", "approx_kl", "ratio_mean"):
                _accumulate(sums, name, float(metrics[name]) * tokens)
            if logp_sampler is not None:
                for name in ("mismatch_kl", "tis_clip_frac"):
                    _accumulate(sums, name, float(metrics[name]) * tokens)
                sums["mismatch_ratio_min"] = min(
                    sums.get("mismatch_ratio_min", math.inf), float(metrics["mismatch_ratio_min"])
                )
                sums["mismatch_ratio_max"] = max(
                    sums.get("mismatch_ratio_max", -math.inf), float(metrics["mismatch_ratio_max"])
                )
            if "kl_ref" in metrics:
                _accumulate(sums, "kl_ref", float(metrics["kl_ref"]) * tokens)
            if "entropy_guard_penalty" in metrics:
                guarded_here = float(metrics["entropy_guard_tokens"])
                _accumulate(sums, "guard_tokens", guarded_here)
                _accumulate(sums, "guard_penalty", float(metrics["entropy_guard_penalty"]) * guarded_here)
            valid = mask.bool()
            _accumulate(sums, "entropy", float(out["entropy"].detach()[valid].sum()))
            _accumulate(sums, "mean_token_prob", float(out["logp"].detach()[valid].exp().sum()))
            sums["ratio_min"] = min(sums.get("ratio_min", math.inf), float(metrics["ratio_min"]))
            sums["ratio_max"] = max(sums.get("ratio_max", -math.inf), float(metrics["ratio_max"]))

        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, config.grad_clip or math.inf)
        if torch.isfinite(grad_norm):
            optimizer.step()
            self.optimizer_steps += 1
        else:
            self.metrics.log_value("train/skipped_nonfinite_steps", 1, reduce="sum")
        # Free the gradients now rather than at the next step: they would stay resident (as large as the
        # fp32 weights) through the rollout and the weight sync, whose copy of the weights is the iteration's
        # memory peak otherwise.
        optimizer.zero_grad(set_to_none=True)
        self._log_step(sums, float(grad_norm), optimizer, tag)

    def _log_step(self, sums: dict[str, float], grad_norm: float, optimizer, tag: str) -> None:
        tokens = sums.get("tokens", 0.0)
        log = self.metrics.log_value
        per_token = ("clipfrac_low", "clipfrac_high", "dual_clip_frac", "approx_kl", "ratio_mean", "entropy")
        for name in (*per_token, "mean_token_prob"):
            if tokens > 0:  # this learner's shard may hold no response tokens
                log(f"train/{name}", sums.get(name, 0.0) / tokens, reduce="mean")
        if tokens > 0 and "kl_ref" in sums:  # the k3 KL to the reference, what kl_coef weighs
            log("train/kl_ref", sums["kl_ref"] / tokens, reduce="mean")
        log("train/loss", self._whole_step_loss(sums.get("loss", 0.0)), reduce="mean")
        log("train/ratio_min", sums.get("ratio_min", 1.0), reduce="min")
        log("train/ratio_max", sums.get("ratio_max", 1.0), reduce="max")
        log("train/grad_norm", grad_norm, reduce="mean")
        log("train/lr", self._get_optimizer_lr(optimizer), reduce="mean")
        log("train/tokens", sums.get("tokens", 0.0), reduce="sum")
        log(f"train/optimizer_steps_{tag}", 1, reduce="sum")
        # Per batch kind: on replay batches the ratio is against the collection's logprobs (stale), and with
        # mismatch correction on the "mismatch" there includes that staleness.
        if tokens > 0:
            log(f"train/dual_clip_frac_{tag}", sums.get("dual_clip_frac", 0.0) / tokens, reduce="mean")
            # Without the mismatch correction, a replay batch's KL is its staleness: the collecting policy's
            # against today's (docs/replay.md, "tau in the paper's units").
            log(f"train/approx_kl_{tag}", sums.get("approx_kl", 0.0) / tokens, reduce="mean")
            log(f"train/ratio_max_{tag}", sums.get("ratio_max", 1.0), reduce="max")
            if "mismatch_ratio_max" in sums:
                for name in ("mismatch_kl", "tis_clip_frac"):
                    log(f"train/{name}_{tag}", sums[name] / tokens, reduce="mean")
                log(f"train/mismatch_ratio_min_{tag}", sums["mismatch_ratio_min"], reduce="min")
                log(f"train/mismatch_ratio_max_{tag}", sums["mismatch_ratio_max"], reduce="max")
        if sums.get("guard_tokens", 0.0) > 0:  # KL-Cov: the mean penalty of the tokens it acted on here
            log("entropy_guard/kl_penalty", sums["guard_penalty"] / sums["guard_tokens"], reduce="mean")
        log("train/optimizer_steps_lifetime", 1, reduce="lifetime_sum")

    # ------------------------------------------------------------------------------------------------
    def _learning_rate(self) -> float:
        """Linear warm-up over ``warmup_steps`` rollout iterations, then constant: DAPO section 4.1 ("linear
        warm-up over 20 rollout steps"), as verl, which steps its scheduler once per rollout."""
        warmup = self.config.warmup_steps
        scale = 1.0 if warmup <= 0 else min(1.0, (self.iteration + 1) / warmup)
        return self.config.lr * scale

    def _guarded_tokens(
        self, minibatch: Sequence[Trajectory], trained: Sequence[int], masks: Sequence[torch.Tensor], loss_cfg
    ) -> GuardedTokens | None:
        """The entropy guard's tokens for one optimizer step (entropy_guard.py), from what is known before
        its first micro-batch: the rows it trains on (``trained``, indices into ``minibatch``), their
        effective masks, advantages and pi_old (the learner's recomputed one with the mismatch correction on,
        else the sampler's). Every learner computes it for the whole minibatch, so all draw the same tokens;
        the step's ``entropy_guard/...`` statistics are logged here."""
        if loss_cfg.entropy_guard is None:
            return None
        logp_old, advantages, row_masks = [], [], []
        for i in trained:
            trajectory = minibatch[i]
            if self._learner_logp_old is not None:
                logp_old.append(self._learner_logp_old[id(trajectory)].float().cpu().numpy())
            else:
                logp_old.append(np.asarray(trajectory.behaviour_logprobs[1:], dtype=np.float32))
            advantages.append(turn_token_advantages(trajectory)[1:])
            row_masks.append(masks[i][0].numpy())
        guarded = select_tokens(logp_old, advantages, row_masks, loss_cfg.entropy_guard, self._guard_rng)
        for name, value in guarded.metrics.items():
            self.metrics.log_value(name, value, reduce="mean")
        return guarded

    def _response_budget(self, trajectories: Sequence[Trajectory]) -> int:
        """L of ``seq-mean-token-sum-norm`` (Dr. GRPO): what one trajectory may generate, all turns together,
        fixed for a run (``Trajectory.response_budget``; ``max_response_tokens`` where not recorded)."""
        return max(t.response_budget or self.config.max_response_tokens for t in trajectories)

    def _whole_step_loss(self, share: float) -> float:
        """The optimizer step's loss: each learner's ``share`` is divided by the whole step's normaliser, so
        the step's loss is their sum (a mean over learners would be 1/N of it)."""
        if self.config.num_learners <= 1 or not torch.distributed.is_initialized():
            return share
        total = torch.tensor([share], dtype=torch.float64, device=self._device)
        torch.distributed.all_reduce(total)
        return float(total)

    def _effective_mask(self, trajectory: Trajectory) -> torch.Tensor:
        """The [1, T-1] loss mask the step trains on (the same as in the micro-batches)."""
        mask = torch.tensor(trajectory.loss_mask[1:], dtype=torch.float32)[None]
        return mask * self._overlong_keep([trajectory])[:, None]

    def _contributes(self, trajectory: Trajectory, mask: torch.Tensor, weight: float = 1.0) -> bool:
        """Whether the row can add to the loss or its gradient. It cannot when every token is masked
        (overlong-filtered, or no response), when its weight is 0, or, without a KL term, when every turn's
        advantage is 0: each token's clipped term is then r * 0 (loss.py), exactly 0 with a 0 gradient."""
        if weight == 0 or not bool(mask.any()):
            return False
        return self.config.kl_coef > 0 or any(a != 0 for a in trajectory.advantages_by_turn)

    def _overlong_keep(self, trajectories: Sequence[Trajectory]) -> torch.Tensor:
        """[B] 1.0 for trajectories that are trained on, 0.0 for those overlong filtering masks (DAPO section
        3.4, in ``overlong_scope``)."""
        if not self.config.overlong_filtering:
            return torch.ones(len(trajectories))
        overlong = [is_overlong(t, self.config.overlong_scope) for t in trajectories]
        return torch.from_numpy(overlong_filter_mask(overlong)).float()

    @torch.no_grad()
    def _learner_logprobs(self, trajectories: Sequence[Trajectory]) -> dict[int, torch.Tensor]:
        """pi_old under the current weights, by trajectory object: the training forward (compute_logprobs:
        autocast, temperature, shared prefix) without grad, in micro-batches (:func:`micro_batch_order`).
        Keyed by id(): the pass holds its trajectory objects until it ends; one sampled twice is computed
        once."""
        policy = self.policy
        # Rows that add nothing to the loss never read their pi_old.
        unique = [
            t
            for t in {id(t): t for t in trajectories}.values()
            if self._contributes(t, self._effective_mask(t))
        ]
        unique.sort(key=micro_batch_order)
        size = self.config.micro_batch_size
        logprobs: dict[int, torch.Tensor] = {}
        for start in range(0, len(unique), size):
            rows = unique[start : start + size]
            batch = collate(
                rows, pad_token_id=self._pad_token_id, image_inputs=self._image_inputs, device=self._device
            )
            logp = policy.compute_logprobs(batch, with_entropy=False)["logp"]
            for row, trajectory in enumerate(rows):
                logprobs[id(trajectory)] = logp[row, : len(trajectory.token_ids) - 1]
        return logprobs

    def _padded_learner_logp_old(self, rows: Sequence[Trajectory], like: torch.Tensor) -> torch.Tensor:
        """The recomputed pi_old of a micro-batch's rows, padded like ``like`` (its collated [B, T-1])."""
        padded = like.clone()  # a stand-in row (loss times 0) has none: it keeps the sampler's
        for row, trajectory in enumerate(rows):
            logp = self._learner_logp_old.get(id(trajectory))
            if logp is not None:
                padded[row] = 0.0
                padded[row, : logp.shape[0]] = logp
        return padded

    @torch.no_grad()
    def _reference_logprobs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        from models.logprobs import token_logprobs

        lora = self._reference is self.policy.model
        with adapters_disabled(self._reference) if lora else contextlib.nullcontext():
            logp, _ = token_logprobs(
                self._reference,
                batch["input_ids"],
                batch["attention_mask"],
                pixel_values=batch.get("pixel_values"),
                image_grid_thw=batch.get("image_grid_thw"),
                needed=batch["loss_mask"],
            )
        return logp.float()

    def _single_module(self):
        (module_id,) = list(self.module.keys())
        return module_id, self.module[module_id]

    @property
    def policy(self) -> RLModule:
        """The policy module being trained, unwrapped from DDP when there is more than one learner."""
        _, module = self._single_module()
        return module.unwrapped() if hasattr(module, "unwrapped") else module

    # ------------------------------------------------------------------------------------------------
    def get_state(self, *args, **kwargs):
        state = super().get_state(*args, **kwargs)
        state["dapo"] = {
            "optimizer_steps": self.optimizer_steps,
            "shuffle_rng": self._shuffle_rng.bit_generator.state,
            "guard_rng": self._guard_rng.bit_generator.state,
        }
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        if "dapo" in state:
            self.optimizer_steps = state["dapo"]["optimizer_steps"]
            self._shuffle_rng.bit_generator.state = state["dapo"]["shuffle_rng"]
            if "guard_rng" in state["dapo"]:  # checkpoints written before the entropy guard have none
                self._guard_rng.bit_generator.state = state["dapo"]["guard_rng"]


def learner_shard(num_rows: int, learner_index: int, num_learners: int) -> tuple[list[int], bool]:
    """This learner's rows of a minibatch of ``num_rows`` (round robin over ``num_learners``), and whether
    they are a stand-in. With DDP every learner must run a backward for every step (the gradient all-reduce
    waits for all of them), so a learner whose share is empty (fewer rows than learners) gets row 0 as a
    stand-in, to be run with its loss times 0: it adds nothing to the gradient or the metrics."""
    rows = list(range(learner_index, num_rows, max(1, num_learners)))
    if rows or num_rows == 0:
        return rows, False
    return [0], True


def _accumulate(sums: dict[str, float], key: str, value: float) -> None:
    sums[key] = sums.get(key, 0.0) + value
