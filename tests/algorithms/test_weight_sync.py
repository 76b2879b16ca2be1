"""After every update the in-process engine samples from the learner's new weights. With no remote
EnvRunner DAPO hands the learner's state to the local runner directly (no copy through Ray's object store:
a second copy of the weights would stay mapped); this checks the weights arrive: the engine's behaviour
logprobs of a fresh rollout equal the learner's logprobs of the same tokens (fp32 on both sides), while the
weights before the update give other values. The engine's own copy of the weights is dropped for the
update and rebuilt by the sync.

With LoRA (models/lora.py) the same holds for the merged weights: only the adapters moved, the optimizer holds
them alone, and an engine left on the base weights is caught."""

from __future__ import annotations

import copy

import torch
from transformers import AutoModelForCausalLM

from algorithms.dapo.collate import collate
from envs.seeds import SPLITS
from models.logprobs import token_logprobs

TOLERANCE = 1e-3  # fp32 engine vs fp32 learner: ~1e-6 (docs/design.md, section 7)


def max_logprob_gap(model, trajectory) -> float:
    batch = collate([trajectory])
    with torch.no_grad():
        logp, _ = token_logprobs(model, batch["input_ids"], batch["attention_mask"], with_entropy=False)
    mask = batch["loss_mask"].bool()
    return float((logp[mask] - batch["logp_old"][mask]).abs().max())


def test_local_engine_samples_from_the_updated_weights(small_dapo_config, ray_session):
    config = small_dapo_config(
        lr=1e-2,  # a step large enough to move every logprob well past the tolerance
        warmup_steps=0,
        kl_coef=1e-3,  # keeps zero-advantage rows in the update (the random model's groups are mostly such)
        dynamic_sampling=False,
        overlong_filtering=False,
        model_dtype="float32",
        engine_dtype="float32",
    )
    algo = config.build_algo()
    try:
        assert algo.env_runner_group.num_remote_env_runners() == 0
        runner = algo.env_runner_group.local_env_runner
        learner_model = algo.learner_group._learner.module["default_policy"].model
        before = copy.deepcopy(learner_model)
        released = []
        release = runner.release_engine_weights
        runner.release_engine_weights = lambda: released.append(release()) or released[-1]
        algo.train()
        assert algo.counters.policy_version == 1
        # The update ran with the engine's weights dropped (RolloutEngine.release_weights), and the sync
        # loaded the new ones.
        assert len(released) == 1 and released[0] > 0
        assert not runner.module.engine.weights_released
        (group,) = runner.sample_groups([int(SPLITS["validation"][0])], log_metrics=False)
        for trajectory in group:
            assert max_logprob_gap(learner_model, trajectory) < TOLERANCE
        assert max(max_logprob_gap(before, trajectory) for trajectory in group) > 10 * TOLERANCE
    finally:
        algo.stop()


def test_lora_update_reaches_the_engine(small_dapo_config, ray_session):
    config = small_dapo_config(
        lr=5e-2,  # the adapters start at B = 0; one step must move the merged weights past the tolerance
        warmup_steps=0,
        kl_coef=1e-3,  # as above; the reference is the policy with its adapters off
        dynamic_sampling=False,
        overlong_filtering=False,
        model_dtype="float32",
        engine_dtype="float32",
        lora_rank=4,
    )
    algo = config.build_algo()
    try:
        runner = algo.env_runner_group.local_env_runner
        learner = algo.learner_group._learner
        learner_model = learner.module["default_policy"].model
        before = {name: tensor.clone() for name, tensor in learner_model.state_dict().items()}
        adapters = {name for name, p in learner_model.named_parameters() if p.requires_grad}
        assert adapters and all(".lora_" in name for name in adapters)
        algo.train()
        assert algo.counters.policy_version == 1
        # Gradients reached the adapters only: the base is as loaded, B moved off zero, and AdamW holds (and
        # keeps state for) the adapters alone.
        after = learner_model.state_dict()
        for name, tensor in before.items():
            assert torch.equal(tensor, after[name]) == (name not in adapters), name
        optimizer = learner.get_optimizer("default_policy")
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        assert held == {id(p) for name, p in learner_model.named_parameters() if name in adapters}
        assert {id(p) for p in optimizer.state} == held

        (group,) = runner.sample_groups([int(SPLITS["validation"][0])], log_metrics=False)
        for trajectory in group:
            assert max_logprob_gap(learner_model, trajectory) < TOLERANCE
        base = AutoModelForCausalLM.from_pretrained(
            learner.module["default_policy"].model_path, dtype=torch.float32
        )
        assert max(max_logprob_gap(base, trajectory) for trajectory in group) > 10 * TOLERANCE

        # The check above catches an update that never arrives: an engine left on the base weights.
        runner.module.engine.load_weights(base.state_dict())
        (stale,) = runner.sample_groups([int(SPLITS["validation"][0])], log_metrics=False)
        assert max(max_logprob_gap(learner_model, trajectory) for trajectory in stale) > 10 * TOLERANCE
    finally:
        algo.stop()
