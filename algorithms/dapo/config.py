"""DAPOConfig: every hyper-parameter of DAPO + FreshPER in one place, with the paper defaults.

Defaults cite their source: "DAPO" = Yu et al., 2025, arXiv 2503.14476 (section 4.1 training details unless
noted), "FreshPER" = the FreshPER paper (Freshness-Aware Prioritized Experience Replay for LLM/VLM RL) and
its reference repository's settings; docs/design.md (section 7) says what they mean in numbers. The CPU
scales that differ live in ``algorithms/dapo/scales.py`` and say so.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import math
import warnings
from collections.abc import Mapping
from typing import Any

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY
from algorithms.dapo.dynamic_sampling_metrics import DYNAMIC_SAMPLING_METRIC_REGISTRY
from algorithms.dapo.entropy_guard import ENTROPY_GUARD_REGISTRY
from algorithms.dapo.loss import LOSS_AGG_MODES
from algorithms.dapo.overlong import OVERLONG_SCOPES
from algorithms.registry import Registry
from algorithms.replay import (
    REPLAY_MODE_REGISTRY,
    PrioritizedReplayBuffer,
    ReplaySettings,
    make_replay_buffer,
)
from envs.seeds import SPLITS
from models.dtype import DTYPES, resolve_dtype

AGE_UNITS = ("optimizer_steps", "iterations")
ROLLOUT_MODES = ("sync", "async")
PRIORITY_SIGNALS = ("reward", "advantage")
REPLAY_DUAL_CLIP_C = 3.0  # verl's actor default clip_ratio_c (its DAPO scripts use 10)
DAPO_OVERLONG_CACHE_LEN = 4096  # L_cache, DAPO section 4.1
# Former names of DAPOConfig keys -> their names now. The old ones are read for one release (settings files,
# --set, records, checkpoints' configs, DAPOConfig.training keywords and attributes), each time with a
# DeprecatedKeyWarning naming the new one.
RENAMED_KEYS = {"tau": "replay_tau", "advantage": "advantage_estimator"}


# The attribute each .replay() keyword sets: the keyword is short inside replay(), the attribute (the name in
# settings files, --set and records) says it is replay's.
REPLAY_ATTRIBUTES = {
    "mode": "replay_mode",
    "tau": "replay_tau",
    "alpha": "replay_alpha",
    "beta_0": "replay_beta_0",
    "beta_horizon": "replay_beta_horizon",
    "capacity": "replay_capacity",
    "num_batches": "replay_batches",
    "priority": "replay_priority",
    "eps": "replay_eps",
    "poly_k": "replay_poly_k",
    "age_unit": "replay_age_unit",
    "insert_at_max_priority": "replay_insert_at_max_priority",
    "backfill": "replay_backfill",
}


SEARCH_SPACE = "<a Tune search space>"  # what set_keys records for a swept value


class DeprecatedKeyWarning(DeprecationWarning, FutureWarning):
    """A key spelt as it was before a rename; the message names the new spelling. A DeprecationWarning for
    filters and ``pytest.warns``, shown by default like a FutureWarning: those who see it write settings
    files and command lines, not only code."""


warnings.filterwarnings("default", category=DeprecatedKeyWarning)


def current_key(key: str, where: str = "") -> str:
    """``key`` as DAPOConfig spells it now: a former name (:data:`RENAMED_KEYS`) warns and is translated,
    any other key is returned as it is. ``where`` names the place it was read (a file, ``--set``)."""
    if key not in RENAMED_KEYS:
        return key
    new = RENAMED_KEYS[key]
    place = f"{where}: " if where else ""
    warnings.warn(
        f"{place}{key!r} is now {new!r}; write {new} (the old name is read until the next release)",
        DeprecatedKeyWarning,
        stacklevel=3,
    )
    return new


def current_keys(values: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``values`` with every former key name translated (:func:`current_key`), in order."""
    return {current_key(key, where): value for key, value in values.items()}


@functools.cache
def config_keys() -> dict[str, tuple[str, str]]:
    """The keys of DAPOConfig that presets, settings files and ``--set`` set -> (the method that sets it,
    its keyword there). A key is the attribute's name, as ``config.to_dict()``, Tune and records show it:
    every keyword of ``training()`` and the ``evaluation_*`` ones of ``evaluation()`` (DAPO's and RLlib's,
    but RLlib's deprecated ones), the attribute of each ``replay()`` keyword (:data:`REPLAY_ATTRIBUTES`),
    and ``seed`` (``debugging()``)."""
    from ray._common.deprecation import DEPRECATED_VALUE

    keys: dict[str, tuple[str, str]] = {}
    for method in ("training", "evaluation"):
        for cls in (DAPOConfig, AlgorithmConfig):
            for name, parameter in inspect.signature(getattr(cls, method)).parameters.items():
                keyword = parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)
                wanted = method == "training" or name.startswith("evaluation_")  # not offline evaluation
                # RLlib's old-stack ``model`` dict: the name is the run's model (model_path here).
                wanted = wanted and name != "model"
                if keyword and wanted and name != "self" and parameter.default is not DEPRECATED_VALUE:
                    keys.setdefault(name, (method, name))
    keys.update({attribute: ("replay", keyword) for keyword, attribute in REPLAY_ATTRIBUTES.items()})
    keys["seed"] = ("debugging", "seed")
    return keys


def unknown_key_message(key: str) -> str:
    """Why ``key`` is not a DAPOConfig key, with the closest ones."""
    matches = difflib.get_close_matches(key, list(config_keys()), n=4, cutoff=0.6)
    close = f" (did you mean {', '.join(matches)}?)" if matches else ""
    return (
        f"unknown DAPOConfig key {key!r}{close}. Keys: the keywords of DAPOConfig.training(), the "
        "evaluation_* ones of .evaluation(), the replay attributes (replay_<keyword> of .replay()) and seed; "
        "see algorithms.dapo.config.config_keys()"
    )


def split_check(split: str, key: str) -> tuple[bool, str]:
    """(ok, message): ``split`` (set as ``key``) names one of envs/seeds.py's splits."""
    return split in SPLITS, f"{key} must be one of {tuple(SPLITS)}, got {split!r}"


def evaluation_task_checks(
    num_tasks: int, samples_per_task: int, split: str, prefix: str = ""
) -> list[tuple[bool, str]]:
    """(ok, message) of the evaluation's task settings; ``prefix`` names them as the caller spells them
    ("evaluation_" for the config keys, "" for ``DAPO.evaluate_policy``'s arguments)."""
    split_size = len(SPLITS.get(split, ()))
    return [
        split_check(split, f"{prefix}split"),
        (
            isinstance(num_tasks, int) and 1 <= num_tasks <= max(split_size, 1),
            f"{prefix}num_tasks must be an integer in [1, {split_size}] (the {split} split's size), got "
            f"{num_tasks!r}",
        ),
        (
            isinstance(samples_per_task, int) and samples_per_task >= 1,
            f"{prefix}samples_per_task must be an integer >= 1, got {samples_per_task!r}",
        ),
    ]


class DAPOConfig(AlgorithmConfig):
    """Configuration of :class:`algorithms.dapo.DAPO`.

    Example::

        config = (
            DAPOConfig()
            .environment("freshrl/FrozenLake-v0")
            .training(model_path=None, group_size=8, prompts_per_iteration=4, eps_high=0.28)
            .replay(mode="freshper", tau=500)
        )
        algo = config.build_algo()
        algo.train()
    """

    def __init__(self, algo_class=None):
        from algorithms.dapo.dapo import DAPO

        super().__init__(algo_class=algo_class or DAPO)

        # Model. None selects the offline tiny model (models/tiny.py), built on first use.
        self.model_path: str | None = None
        # Learner compute dtype ("bfloat16": autocast over float32 weights) and vLLM's dtype: "auto",
        # "float32" or "bfloat16". "auto" is bf16 where the hardware computes it natively (a CUDA GPU of
        # compute capability >= 8.0, a CPU with AVX512_BF16 or AMX) and float32 elsewhere, where bf16 is
        # emulated: ~25x slower than float32 for the learner and ~4x for vLLM on an AVX2-only CPU
        # (models/dtype.py). Resolved once, in the driver, by validate(); runs that request GPUs resolve for
        # the GPU. An explicit value always wins.
        self.model_dtype = "auto"
        self.engine_dtype = "auto"
        # Key -> (the layer that set it, the value it set): set by set_keys(), read by key_sources().
        self._key_sources: dict[str, tuple[str, Any]] = {}
        # (what was resolved, the result): set by validate(), read by resolved_dtypes().
        self._resolved_dtypes: tuple[tuple[str, str, bool], dict[str, str]] | None = None
        # The whole conversation (must exceed max_response_tokens); a turn beyond it ends the episode.
        self.max_context_tokens = 32768
        self.engine_kv_cache_gib: float | None = None  # None: the engine's own default for the device
        self.system_prompt: str | None = None

        # Sampling (rollouts). DAPO: temperature 1.0; top-p 1.0 in training (0.7 only for evaluation).
        self.group_size = 16  # G, DAPO section 4.1
        self.prompts_per_iteration = 512  # P, DAPO section 4.1 ("512 prompts")
        self.temperature = 1.0
        self.top_p = 1.0  # must stay 1 in training: validate() says why
        self.max_response_tokens = 20480  # per turn (DAPO section 4.1: 16384 expected + 4096 cache)
        # Response tokens of a whole episode (all turns); the rollout stops an episode there. None: the most
        # an episode can generate, max_response_tokens x the env's max_turns. L_max of overlong shaping in
        # the "trajectory" scope (see overlong_scope).
        self.max_trajectory_response_tokens: int | None = None
        self.stop_strings: tuple[str, ...] = ()
        self.task_split = "train"  # envs/seeds.py split the task seeds come from
        # Position in task_split of the first task trained on (the task cursor counts from it). A warm start
        # fine-tunes on oracle episodes of the split's first seeds (algorithms/warm_start.py); an offset past
        # them trains RL on tasks the policy has not been shown the answers to. 0: from the first seed.
        self.task_offset = 0
        # "sync": roll out, learn, sync weights, in turn. "async": the remote EnvRunners generate the next
        # batch while the learner trains on this one (algorithms/dapo/remote_rollouts.py has the schedule), so
        # fresh batches are one policy version old; needs num_env_runners >= 1.
        self.rollout_mode = "sync"
        # The oldest a group may be when trained on, in policy versions (weight syncs) since the policy that
        # generated it; older groups are dropped (rollout/groups_dropped_stale), never trained on fresh. 1
        # keeps the sync mode as it was (its surplus groups are exactly 1 version old) and admits async's
        # batches; AReaL (Fu et al., 2025) and verl's one-step-off trainer run at staleness 1 too.
        self.max_staleness = 1

        # Evaluation (DAPO.evaluate_policy; inside train() every evaluation_interval iterations, RLlib's key,
        # None by default = never). Tasks: the first evaluation_num_tasks seeds of evaluation_split. 128 tasks
        # give a 95% Wilson interval of about +-0.085 at success 0.5; DAPO reports avg@32 (32 samples a task)
        # on AIME's 30 problems (section 4.1), so 1 sample a task here is the cheap default.
        self.evaluation_num_tasks = 128
        self.evaluation_samples_per_task = 1
        self.evaluation_split = "validation"
        # None = training's sampling settings. DAPO evaluates at top-p 0.7 (section 4.1), temperature 1.0.
        self.evaluation_temperature: float | None = None
        self.evaluation_top_p: float | None = None

        # Loss (DAPO Eq. 8-12).
        self.eps_low = 0.2  # DAPO section 3.1
        self.eps_high = 0.28  # DAPO section 3.1 (Clip-Higher)
        # Dual clip c (Ye et al., 2020): bounds the loss of A < 0 tokens at -c * A. "auto" (unset) = 3.0,
        # verl's actor default (clip_ratio_c), whenever replay is on (replay_mode != "on_policy"): a replayed
        # trajectory's ratio is against the logprobs of its collection and is unbounded above otherwise;
        # off (None) on-policy. An explicit float or None always wins.
        self.dual_clip_c: float | str | None = "auto"
        # Engine/learner mismatch correction (truncated importance sampling, module docstring of loss.py):
        # recompute pi_old with the learner before each update pass (one no-grad forward per trajectory),
        # take the PPO ratio against it and weight each token by min(pi_old_learner / pi_vllm, tis_cap).
        # "auto" = on when the resolved engine_dtype != model_dtype (the learner's compute dtype): peers ship
        # it for exactly that case (bf16 engine vs fp32 learner); with equal dtypes the logprobs agree to
        # ~1e-6 here (docs/design.md, section 7), so the extra forward would buy nothing. "auto" is also on
        # in async mode: the batch is a version old, and the trust region belongs around the current policy
        # with the staleness in the truncated weight (AReaL's decoupled PPO objective). True / False force it.
        # With it on, a replay batch's ratio starts at 1 and its staleness sits in the truncated weight (the
        # decoupled objective of AReaL, Fu et al. 2025, truncated as TIS).
        self.mismatch_correction: bool | str = "auto"
        self.tis_cap = 2.0  # C; verl's rollout_is_threshold example and the TIS post (Yao et al., 2025)
        self.loss_agg_mode = "token-mean"  # DAPO section 3.3, Eq. 12
        self.kl_coef = 0.0  # DAPO section 2.3 removes the KL term
        # Entropy guard (docs/entropy_guard.md, algorithms/dapo/entropy_guard.py): "clip_cov" or "kl_cov" hold
        # back the few tokens whose log-probability covaries most with their advantage, which drive the
        # entropy collapse (Cui et al., 2025, arXiv 2505.22617, section 4); "none", the default, leaves the
        # loss as DAPO's until a measurement says otherwise. Or a guard of your own, "module:name"
        # (docs/design.md, "Adding an extension").
        self.entropy_guard = "none"
        # Clip-Cov: r, the fraction of the step's response tokens detached, drawn among those whose covariance
        # lies in (omega_low, omega_high) = (clip_cov_low, clip_cov_high). 2e-4, 1 and 5: verl's defaults
        # (policy_loss.clip_cov_ratio, clip_cov_lb, clip_cov_ub) and its recipe/entropy scripts, which the
        # paper's authors wrote (docs/entropy_guard.md says how these were sourced).
        self.clip_cov_ratio = 2e-4
        self.clip_cov_low = 1.0
        self.clip_cov_high = 5.0
        # KL-Cov: k, the fraction of the step's response tokens of largest covariance, and beta, the weight of
        # their penalty |logp - logp_old|. k = 2e-3 and beta = 1: verl's recipe/entropy scripts for
        # Qwen2.5-7B (kl_cov_ratio=0.002, ppo_kl_coef=1; 2e-4 for 32B), which the paper's authors wrote.
        # verl's config defaults (kl_cov_ratio 2e-4, ppo_kl_coef 0.1) come with no source; the smaller
        # model's k is the nearer to the models here.
        self.kl_cov_ratio = 2e-3
        self.kl_cov_coef = 1.0
        self.advantage_eps = 1e-6
        # (R - mean) / (std + eps), DAPO Eq. 9; False: Dr. GRPO's R - mean (Liu et al., 2025, section 3.1),
        # which with loss_agg_mode="seq-mean-token-sum-norm" is the whole of Dr. GRPO's objective.
        self.advantage_std_normalize = True
        # Credit assignment (docs/credit_assignment.md): "episode" gives every turn of an episode its group
        # advantage (DAPO Eq. 9); "gigpo" adds omega x each turn's step advantage within the turns that start
        # from the same state (GiGPO, Feng et al., 2025, arXiv 2505.10978, Eq. 5-8; algorithms/dapo/gigpo.py),
        # from the env's info["state_key"]; envs without state keys keep episode advantages. The step
        # advantage is normalised as the episode's (advantage_std_normalize, advantage_eps). Or an estimator
        # of your own, "module:name" (docs/design.md, "Adding an extension").
        self.advantage_estimator = "episode"
        # gamma of the step return R_t = sum_k gamma^(k-t) r_k (GiGPO Eq. 5) and omega (Eq. 8): verl-agent's
        # GiGPO settings (algorithm.gamma=0.95, algorithm.gigpo.step_advantage_w=1.0 in its example scripts).
        self.gigpo_gamma = 0.95
        self.gigpo_step_weight = 1.0

        # Dynamic sampling (DAPO section 3.2): keep groups with 0 < #correct < G.
        self.dynamic_sampling = True
        # What must differ within a kept group: "success" (accuracy, info["success"]: DAPO Eq. 11, as verl's
        # acc), or "reward" (the shaped rewards, for envs whose success is not binary), or a metric of your
        # own, "module:name" (docs/design.md, "Adding an extension").
        self.dynamic_sampling_metric = "success"
        self.max_generation_batches = 4  # verl's DAPO recipe uses max_num_gen_batches; we warn, never raise

        # Overlong reward shaping (DAPO section 3.4).
        self.overlong_filtering = True  # DAPO Table 1 keeps it on in every row after the first
        self.overlong_punishment = True
        # L_cache, the band below the limit where the soft punishment ramps (DAPO Eq. 13). "auto" (the
        # default): resolved_overlong_cache_len(), a third of max_response_tokens capped at DAPO's 4096
        # (section 4.1: 4096 of 20480), so it follows the response limit wherever that is set. An integer
        # always wins.
        self.overlong_cache_len: int | str = "auto"
        # What |y| and L_max of DAPO Eq. 13 (section 3.4) are for a multi-turn episode, for both shaping and
        # filtering: "trajectory" (all its response tokens against max_trajectory_response_tokens; the
        # default: DAPO's y is the whole generated answer) or "turn" (its longest response against
        # max_response_tokens). Single-turn envs: the same. algorithms/dapo/overlong.py.
        self.overlong_scope = "trajectory"

        # Optimisation. DAPO: AdamW, lr 1e-6 constant after a linear warm-up over 20 rollout steps, 16
        # gradient steps per rollout (512 prompts, mini-batches of 32 prompts x 16 samples).
        self.lr = 1e-6
        # Warm-up length in training iterations (rollout steps, as DAPO section 4.1 and verl count it; every
        # optimizer step of iteration i, fresh or replay, uses lr * (i + 1) / warmup_steps).
        self.warmup_steps = 20
        self.weight_decay = 0.1  # verl's actor default
        self.adam_betas = (0.9, 0.999)
        self.grad_clip = 1.0  # verl's actor default
        self.minibatch_size = 512  # trajectories per optimizer step (32 prompts x 16)
        self.num_epochs = 1
        self.micro_batch_size = 8  # trajectories per forward/backward; does not change the gradient
        # Micro-batches hold one group's samples where they fit, and the prompt they share runs through the
        # model once (models/logprobs.py); same values and gradient as without. Text models only.
        self.share_prefix = True
        # Packed rows: a micro-batch's rows (after the shared prefix) run as one row without padding, under a
        # block-diagonal causal mask (models/packed_rows.py); same values and gradient as padded. Off: on a
        # 2-core AVX-512/AMX CPU, SmolLM2 FrozenLake micro-batches ran 16% faster packed in float32 but
        # unchanged in bf16, and slower with <15% padding or no shared prefix, because SDPA computes every
        # masked block (docs/performance.md, "Packed rows").
        self.pack_rows = False
        # Gradient checkpointing: each decoder layer's activations are recomputed in the backward pass
        # instead of kept (models/logprobs.py), for a lower peak at a longer update. Off: the scales here fit
        # in memory without it; verl's DAPO recipe and TRL's GRPOConfig turn it on, for models that would not.
        self.gradient_checkpointing = False

        # LoRA (Hu et al., 2021, arXiv 2106.09685; models/lora.py): rank r of the adapters, 0 = full
        # fine-tuning (the default). Only the adapters train and the optimizer holds them alone; every weight
        # sync hands the engine the merged weights W + (alpha / r) B A; checkpoints hold the adapters.
        self.lora_rank = 0
        # alpha; None = 2 x lora_rank: scaling alpha / r = 2, the common pairing of peft's and TRL's examples
        # (r 8 / alpha 16, r 16 / alpha 32), kept when the rank changes.
        self.lora_alpha: float | None = None
        # On the adapters' input in the loss's forward pass only (never in the pi_old or reference passes,
        # whose logprobs must be the engine's); peft's default 0: dropout in a PPO ratio is noise in it.
        self.lora_dropout = 0.0
        # "all-linear" (every linear layer but the output head: QLoRA, Dettmers et al. 2023, arXiv 2305.14314,
        # section 4, finds all layers needed to match full fine-tuning; verl's and TRL's LoRA examples) or a
        # list of module names as peft matches them, e.g. ["q_proj", "k_proj", "v_proj", "o_proj"].
        self.lora_target_modules: str | list[str] = "all-linear"

        # Replay (FreshPER). mode: on_policy (no buffer) | per | freshper | freshper_poly, or a mode of your
        # own, "module:name" (docs/design.md, "Adding an extension"). The tiny scale sets its own tau,
        # capacity and beta horizon (scales.TINY_REPLAY).
        self.replay_mode = "on_policy"
        # Unit of ages, tau and replay_beta_horizon: "iterations" (training iterations), the FreshPER
        # reference code's, in which its tau is given; "optimizer_steps" (steps the learner ran) the option.
        self.replay_age_unit = "iterations"
        # FreshPER Eq. 14, p_i = p_base_i * exp(-age_i / tau): 500 iterations, the reference repository's
        # (1000 for FrozenLake). At DAPO's 8192 trajectories an iteration a 50k buffer spans ~6 iterations,
        # where exp(-6 / 500) ~ 0.99 makes FreshPER ~ PER: for the decay to act, tau must be of the order of
        # the buffer's span in iterations (the tiny scale's is). inf: no decay (PER's priorities, the limit).
        self.replay_tau = 500.0
        self.replay_alpha = 0.6  # FreshPER reference repository
        self.replay_beta_0 = 0.4  # FreshPER reference repository; annealed to 1 (FreshPER section 2)
        # Age units over which beta reaches 1. The reference keeps beta at 0.4 (annealing is described, not
        # implemented), so no source: about a reference-scale run (tau = 500-1000 iterations).
        self.replay_beta_horizon: float | None = 1000.0
        self.replay_capacity = 50_000  # FreshPER reference repository
        self.replay_batches = 1  # K replay batches per iteration, each the size of the fresh batch
        # Base priority, FreshPER Eq. 15: "advantage" = |A_i| + eps (A the GRPO group advantage: large for
        # the rare outcome of its group, a success or a failure alike), the default; "reward" = |R_i| + eps,
        # Eq. 15's choice for critic-free methods, the option. With 0/1 rewards and the reference's
        # eps = 1e-6, |R| gives failures ~4e-4 of the sampling mass: replay batches were all successes.
        self.replay_priority = "advantage"
        # eps, in the signal's units. Advantages are in group-std units; the least informative trajectory of
        # a binary group of G has |A| = 1/sqrt(G - 1) (0.38 at G = 8, 0.26 at 16), so 0.1 keeps every
        # informative one ranked by |A|. It is the floor of |A| ~ 0 (all-equal groups, kept when dynamic
        # sampling is off; a shaped reward at its group's mean). The IS weights are normalised by the
        # buffer's rarest item, max w = (N P_min)^-beta, so one item at the reference's 1e-6 scales every
        # weight by ~(1e-6 / |A|)^(alpha beta) (~2e-4 at beta 1); at 0.1 its key is >= (0.1 / 2.75)^0.6
        # ~ 0.14 of the largest (G = 8). Measured on a simulated FrozenLake stream at the tiny scale
        # (tests/algorithms/replay/test_replay_defaults.py; ~33% successes): replay batches ~44% successes,
        # mean IS weight ~0.56 (0.025 and 100% successes with the reference's |R| + 1e-6).
        self.replay_eps = 0.1
        self.replay_poly_k = 1.0  # exponent of the polynomial decay (1 + age/tau)^-k
        # The reference inserts new items at the current max priority; we know p_base at insertion, so off.
        self.replay_insert_at_max_priority = False
        # Backfill: when dynamic sampling ends short of prompts_per_iteration groups (max_generation_batches
        # spent), train on as many trajectories from the buffer (FreshPER priorities and IS weights, a
        # "backfill" pass) instead of a short batch; rollout/groups_backfilled counts them. Off: DAPO trains
        # on what it collected.
        self.replay_backfill = False

        # RLlib settings: long multi-turn rollouts, restart crashed runners (docs/design.md, section 6).
        self.sample_timeout_s = None
        self.restart_failed_env_runners = True
        self.num_env_runners = 0
        self.env_runner_cls = _env_runner_cls()
        self.seed = 0

    # ----------------------------------------------------------------------------------------------------
    def training(
        self,
        *,
        model_path: str | None = NotProvided,
        model_dtype: str = NotProvided,
        engine_dtype: str = NotProvided,
        max_context_tokens: int = NotProvided,
        engine_kv_cache_gib: float | None = NotProvided,
        system_prompt: str | None = NotProvided,
        group_size: int = NotProvided,
        prompts_per_iteration: int = NotProvided,
        temperature: float = NotProvided,
        top_p: float = NotProvided,
        max_response_tokens: int = NotProvided,
        max_trajectory_response_tokens: int | None = NotProvided,
        stop_strings: tuple[str, ...] = NotProvided,
        task_split: str = NotProvided,
        task_offset: int = NotProvided,
        rollout_mode: str = NotProvided,
        max_staleness: int = NotProvided,
        eps_low: float = NotProvided,
        eps_high: float = NotProvided,
        dual_clip_c: float | str | None = NotProvided,
        mismatch_correction: bool | str = NotProvided,
        tis_cap: float = NotProvided,
        loss_agg_mode: str = NotProvided,
        kl_coef: float = NotProvided,
        entropy_guard: str = NotProvided,
        clip_cov_ratio: float = NotProvided,
        clip_cov_low: float = NotProvided,
        clip_cov_high: float = NotProvided,
        kl_cov_ratio: float = NotProvided,
        kl_cov_coef: float = NotProvided,
        advantage_eps: float = NotProvided,
        advantage_std_normalize: bool = NotProvided,
        advantage_estimator: str = NotProvided,
        gigpo_gamma: float = NotProvided,
        gigpo_step_weight: float = NotProvided,
        dynamic_sampling: bool = NotProvided,
        dynamic_sampling_metric: str = NotProvided,
        max_generation_batches: int = NotProvided,
        overlong_filtering: bool = NotProvided,
        overlong_punishment: bool = NotProvided,
        overlong_cache_len: int | str = NotProvided,
        overlong_scope: str = NotProvided,
        warmup_steps: int = NotProvided,
        weight_decay: float = NotProvided,
        adam_betas: tuple[float, float] = NotProvided,
        micro_batch_size: int = NotProvided,
        share_prefix: bool = NotProvided,
        pack_rows: bool = NotProvided,
        gradient_checkpointing: bool = NotProvided,
        lora_rank: int = NotProvided,
        lora_alpha: float | None = NotProvided,
        lora_dropout: float = NotProvided,
        lora_target_modules: str | list[str] = NotProvided,
        **kwargs: Any,
    ) -> DAPOConfig:
        """DAPO settings (see the attribute comments in ``__init__``) plus RLlib's own ``training`` keys
        (``lr``, ``grad_clip``, ``minibatch_size``, ``num_epochs``, ...)."""
        if "advantage" in kwargs:  # advantage_estimator's former name (RENAMED_KEYS)
            current_key("advantage", "DAPOConfig.training")
            advantage_estimator = kwargs.pop("advantage")
        super().training(**kwargs)
        for name, value in locals().items():
            if name not in ("self", "kwargs", "__class__") and value is not NotProvided:
                setattr(self, name, value)
        return self

    def replay(
        self,
        *,
        mode: str = NotProvided,
        tau: float = NotProvided,
        alpha: float = NotProvided,
        beta_0: float = NotProvided,
        beta_horizon: float | None = NotProvided,
        capacity: int = NotProvided,
        num_batches: int = NotProvided,
        priority: str = NotProvided,
        eps: float = NotProvided,
        poly_k: float = NotProvided,
        age_unit: str = NotProvided,
        insert_at_max_priority: bool = NotProvided,
        backfill: bool = NotProvided,
    ) -> DAPOConfig:
        """FreshPER replay: ``mode`` = on_policy | per | freshper | freshper_poly (FreshPER section 3), or a
        ``module:name`` of your own. Each keyword sets the attribute :data:`REPLAY_ATTRIBUTES` names (``tau``
        sets ``replay_tau``)."""
        given = locals()
        for keyword, attribute in REPLAY_ATTRIBUTES.items():
            if given[keyword] is not NotProvided:
                setattr(self, attribute, given[keyword])
        return self

    def evaluation(
        self,
        *,
        evaluation_num_tasks: int = NotProvided,
        evaluation_samples_per_task: int = NotProvided,
        evaluation_split: str = NotProvided,
        evaluation_temperature: float | None = NotProvided,
        evaluation_top_p: float | None = NotProvided,
        **kwargs: Any,
    ) -> DAPOConfig:
        """Evaluation of the policy (``DAPO.evaluate_policy``; attribute comments in ``__init__``) plus
        RLlib's own ``evaluation`` keys, of which ``evaluation_interval`` is the one DAPO uses: evaluate
        inside ``train()`` every that many iterations (None or 0: never). Evaluation runs on the training
        EnvRunners."""
        super().evaluation(**kwargs)
        for name, value in locals().items():
            if name not in ("self", "kwargs", "__class__") and value is not NotProvided:
                setattr(self, name, value)
        return self

    def set_keys(self, values: Mapping[str, Any], where: str = "") -> DAPOConfig:
        """Set DAPOConfig keys by name (:func:`config_keys`: a preset's, a settings file's, ``--set``'s),
        each through the method that owns it; a former name warns (:func:`current_key`), an unknown one is a
        ``ValueError`` naming close matches. Lists become tuples where the config holds a
        tuple (adam_betas)."""
        keys = config_keys()
        calls: dict[str, dict[str, Any]] = {}
        for given, value in values.items():
            key = current_key(given, where)
            if key not in keys:
                raise ValueError(f"{where + ': ' if where else ''}{unknown_key_message(key)}")
            method, keyword = keys[key]
            if isinstance(value, list) and isinstance(getattr(self, key, None), tuple):
                value = tuple(value)
            calls.setdefault(method, {})[keyword] = value
            # A search space is recorded as such: Tune would read one nested here as another grid axis.
            recorded = SEARCH_SPACE if _is_search_space(value) else value
            self._key_sources[key] = (where or "code", recorded)
        for method, kwargs in calls.items():
            getattr(self, method)(**kwargs)
        return self

    def key_sources(self) -> dict[str, str]:
        """Every key of :func:`config_keys` -> the layer that set its value: the ``where`` of the last
        :meth:`set_keys` that set it (``scale tiny``, ``settings file ...``, ``command line``), "defaults"
        for DAPOConfig's own value, and "code" for a value set since by other means (a method call, Tune's
        update of a trial's config outside a search space it was given)."""
        defaults = DAPOConfig()
        sources = {}
        for key in config_keys():
            value = getattr(self, key, None)
            layer, recorded = self._key_sources.get(key, ("defaults", getattr(defaults, key, None)))
            sources[key] = layer if _same_value(recorded, value) else "code"
        return sources

    # The former attribute names (RENAMED_KEYS), read and set for one release with a warning.
    @property
    def tau(self) -> float:
        return getattr(self, current_key("tau", "DAPOConfig"))

    @tau.setter
    def tau(self, value: float) -> None:
        setattr(self, current_key("tau", "DAPOConfig"), value)

    @property
    def advantage(self) -> str:
        return getattr(self, current_key("advantage", "DAPOConfig"))

    @advantage.setter
    def advantage(self, value: str) -> None:
        setattr(self, current_key("advantage", "DAPOConfig"), value)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DAPOConfig:
        """RLlib's ``from_state`` (which updates ``__dict__`` directly), with former key names translated,
        so a config saved before a rename keeps its values."""
        return super().from_state(current_keys(state, "a saved DAPOConfig"))

    def build_replay_buffer(self) -> PrioritizedReplayBuffer | None:
        """The replay buffer these settings describe (None on-policy); steps are in ``replay_age_unit``."""
        settings = ReplaySettings(
            capacity=self.replay_capacity,
            alpha=self.replay_alpha,
            beta_0=self.replay_beta_0,
            beta_horizon=self.replay_beta_horizon,
            tau=self.replay_tau,
            poly_k=self.replay_poly_k,
            eps=self.replay_eps,
            seed=self.seed or 0,
            insert_at_max_priority=self.replay_insert_at_max_priority,
        )
        return make_replay_buffer(self.replay_mode, settings)

    # ----------------------------------------------------------------------------------------------------
    def validate(self) -> None:
        super().validate()
        cache_len_ok = self.overlong_cache_len == "auto" or (
            isinstance(self.overlong_cache_len, int) and not isinstance(self.overlong_cache_len, bool)
        )
        sizes_ok = cache_len_ok and isinstance(self.max_response_tokens, int)
        cache_len = self.resolved_overlong_cache_len() if sizes_ok else None
        checks = [
            (self.group_size >= 2, f"group_size must be >= 2 for group advantages, got {self.group_size}"),
            (self.prompts_per_iteration >= 1, "prompts_per_iteration must be >= 1"),
            (0 <= self.eps_low < 1, f"eps_low must be in [0, 1), got {self.eps_low}"),
            (self.eps_high >= 0, f"eps_high must be >= 0, got {self.eps_high}"),
            (self.kl_coef >= 0, f"kl_coef must be >= 0 (0: no KL term, as DAPO), got {self.kl_coef}"),
            (
                isinstance(self.max_response_tokens, int) and self.max_response_tokens >= 1,
                f"max_response_tokens must be an integer >= 1, got {self.max_response_tokens!r}",
            ),
            (
                self.dual_clip_c in (None, "auto")
                or (isinstance(self.dual_clip_c, int | float) and self.dual_clip_c > 1),
                f"dual_clip_c must be a number > 1, None (off) or 'auto', got {self.dual_clip_c!r}",
            ),
            (
                self.mismatch_correction in (True, False, "auto"),
                f"mismatch_correction must be True, False or 'auto', got {self.mismatch_correction!r}",
            ),
            (self.tis_cap >= 1, f"tis_cap must be >= 1 (1 = no up-weighting), got {self.tis_cap}"),
            (
                self.top_p == 1.0,
                f"top_p must be 1.0 in training, got {self.top_p}: vLLM's logprobs are renormalised over the "
                "top-p nucleus and the learner's are not, so the ratio pi_theta / pi_old is biased (tokens "
                "outside the nucleus are never sampled, those inside look likelier to the sampler). Sample "
                "with top_p=1.0; evaluation may use top-p through its own settings (the EnvRunner's "
                "sample_groups(top_p=...)), as DAPO evaluates with top-p 0.7",
            ),
            (self.loss_agg_mode in LOSS_AGG_MODES, f"loss_agg_mode must be one of {LOSS_AGG_MODES}"),
            (
                isinstance(self.advantage_std_normalize, bool),
                f"advantage_std_normalize must be True or False, got {self.advantage_std_normalize!r}",
            ),
            _resolves(ADVANTAGE_ESTIMATOR_REGISTRY, self.advantage_estimator),
            (
                _is_number(self.gigpo_gamma) and 0 <= self.gigpo_gamma <= 1,
                f"gigpo_gamma (GiGPO's discount of the step return) must be in [0, 1], got "
                f"{self.gigpo_gamma!r}",
            ),
            (
                _is_number(self.gigpo_step_weight) and 0 <= self.gigpo_step_weight < math.inf,
                "gigpo_step_weight (GiGPO's omega, the step advantage's weight) must be a finite number "
                f">= 0, got {self.gigpo_step_weight!r}",
            ),
            _resolves(REPLAY_MODE_REGISTRY, self.replay_mode),
            (self.replay_priority in PRIORITY_SIGNALS, f"replay priority must be one of {PRIORITY_SIGNALS}"),
            (self.replay_age_unit in AGE_UNITS, f"replay age_unit must be one of {AGE_UNITS}"),
            (self.replay_tau > 0, f"replay_tau must be > 0 (inf: no decay), got {self.replay_tau}"),
            (self.replay_batches >= 0, "replay num_batches must be >= 0"),
            (
                self.replay_eps > 0,
                f"replay eps must be > 0 (zero-advantage and zero-reward items need a priority), got "
                f"{self.replay_eps}",
            ),
            (
                int(self.replay_capacity) == self.replay_capacity and self.replay_capacity >= 1,
                f"replay capacity must be an integer >= 1, got {self.replay_capacity}",
            ),
            (self.replay_alpha >= 0, f"replay alpha must be >= 0 (0 = uniform), got {self.replay_alpha}"),
            (0 <= self.replay_beta_0 <= 1, f"replay beta_0 must be in [0, 1], got {self.replay_beta_0}"),
            (
                self.replay_beta_horizon is None or self.replay_beta_horizon > 0,
                f"replay beta_horizon must be > 0 (age units) or None (constant beta_0), got "
                f"{self.replay_beta_horizon}",
            ),
            (self.max_generation_batches >= 1, "max_generation_batches must be >= 1"),
            (
                self.rollout_mode in ROLLOUT_MODES,
                f"rollout_mode must be one of {ROLLOUT_MODES}, got {self.rollout_mode!r}",
            ),
            (
                isinstance(self.max_staleness, int) and self.max_staleness >= 0,
                f"max_staleness must be an integer >= 0 (policy versions), got {self.max_staleness!r}",
            ),
            (
                # RLlib's copy for evaluation has no runners of its own (DAPO evaluates on the training ones).
                self.rollout_mode != "async" or self.num_env_runners >= 1 or self.in_evaluation,
                "rollout_mode='async' needs remote EnvRunners to generate while the learner trains, got "
                "num_env_runners=0 (the rollout would run in the learner's process): set "
                ".env_runners(num_env_runners=1) or more, or rollout_mode='sync'",
            ),
            (
                self.rollout_mode != "async" or self.max_staleness >= 1,
                "rollout_mode='async' trains on batches generated during the previous update (1 version "
                f"old), so max_staleness must be >= 1, got {self.max_staleness}: set max_staleness=1 or "
                "rollout_mode='sync'",
            ),
            (
                not self.replay_backfill or self.replay_mode != "on_policy",
                "replay backfill draws from the replay buffer, which replay mode 'on_policy' does not have: "
                "set .replay(mode='freshper') (or per, freshper_poly), or backfill=False",
            ),
            (
                cache_len_ok,
                f"overlong_cache_len must be an integer (tokens) or 'auto', got {self.overlong_cache_len!r}",
            ),
            (
                not self.overlong_punishment
                or cache_len is None
                or 0 < cache_len <= self.max_response_tokens,
                f"overlong_cache_len must be in (0, max_response_tokens={self.max_response_tokens}] when "
                f"overlong_punishment is on, got {self.overlong_cache_len!r}: lower it, or set it to 'auto' "
                "(a third of max_response_tokens)",
            ),
            (
                self.max_trajectory_response_tokens is None or self.max_trajectory_response_tokens >= 1,
                "max_trajectory_response_tokens must be >= 1, or None for max_response_tokens x the env's "
                f"max_turns; got {self.max_trajectory_response_tokens}",
            ),
            (
                not self.overlong_punishment
                or self.max_trajectory_response_tokens is None
                or cache_len is None
                or cache_len <= self.max_trajectory_response_tokens,
                "overlong_cache_len must be <= max_trajectory_response_tokens when overlong_punishment is on",
            ),
            (
                self.overlong_scope in OVERLONG_SCOPES,
                f"overlong_scope must be one of {OVERLONG_SCOPES}, got {self.overlong_scope!r}",
            ),
            _resolves(DYNAMIC_SAMPLING_METRIC_REGISTRY, self.dynamic_sampling_metric),
            (self.warmup_steps >= 0, f"warmup_steps (iterations) must be >= 0, got {self.warmup_steps}"),
            (self.micro_batch_size >= 1, "micro_batch_size must be >= 1"),
            (self.minibatch_size is None or self.minibatch_size >= 1, "minibatch_size must be >= 1"),
            (self.model_dtype in DTYPES, f"model_dtype must be one of {DTYPES}, got {self.model_dtype!r}"),
            (
                self.engine_dtype in DTYPES,
                f"engine_dtype must be one of {DTYPES} (the engine's dtype; 'auto' is resolved for the "
                f"hardware, not vLLM's checkpoint dtype), got {self.engine_dtype!r}",
            ),
            (
                self.max_response_tokens < self.max_context_tokens,
                "max_response_tokens must be < max_context_tokens",
            ),
        ]
        more = self._task_checks() + self._evaluation_checks() + self._lora_checks() + self._guard_checks()
        for ok, message in checks + more:
            if not ok:
                raise ValueError(f"DAPOConfig: {message}")
        # Resolved here, in the driver, before any learner or EnvRunner exists: they get copies of this
        # config with the concrete dtypes, so every process computes in the same dtype whatever its CPU.
        # A frozen config was resolved before it was frozen.
        if not self._is_frozen:
            self._resolved_dtypes = (self._dtype_request(), self._resolve_dtypes())

    def _task_checks(self) -> list[tuple[bool, str]]:
        split_size = len(SPLITS.get(self.task_split, ()))
        return [
            split_check(self.task_split, "task_split"),
            (
                isinstance(self.task_offset, int)
                and not isinstance(self.task_offset, bool)
                and 0 <= self.task_offset < max(split_size, 1),
                f"task_offset must be an integer in [0, {split_size}) (the {self.task_split} split's size), "
                f"got {self.task_offset!r}",
            ),
        ]

    def _evaluation_checks(self) -> list[tuple[bool, str]]:
        tasks = evaluation_task_checks(
            self.evaluation_num_tasks, self.evaluation_samples_per_task, self.evaluation_split, "evaluation_"
        )
        return tasks + [
            (
                self.evaluation_temperature is None or self.evaluation_temperature >= 0,
                "evaluation_temperature must be >= 0 (0: greedy) or None (training's), got "
                f"{self.evaluation_temperature}",
            ),
            (
                self.evaluation_top_p is None or 0 < self.evaluation_top_p <= 1,
                f"evaluation_top_p must be in (0, 1] or None (training's), got {self.evaluation_top_p}",
            ),
            (
                self.evaluation_interval is None or self.evaluation_interval >= 0,
                "evaluation_interval must be an integer >= 1 (iterations), or None or 0 (never inside "
                f"train()), got {self.evaluation_interval}",
            ),
            (
                self.evaluation_num_env_runners == 0 and not self.evaluation_parallel_to_training,
                "evaluation runs on the training EnvRunners (no second vLLM engine): set "
                "evaluation_num_env_runners=0 and evaluation_parallel_to_training=False, got "
                f"{self.evaluation_num_env_runners} and {self.evaluation_parallel_to_training}",
            ),
        ]

    def _guard_checks(self) -> list[tuple[bool, str]]:
        low, high = self.clip_cov_low, self.clip_cov_high
        return [
            _resolves(ENTROPY_GUARD_REGISTRY, self.entropy_guard),
            (
                _is_number(self.clip_cov_ratio) and 0 < self.clip_cov_ratio <= 1,
                "clip_cov_ratio (Clip-Cov's r, the fraction of the step's response tokens detached) must be "
                f"in (0, 1], got {self.clip_cov_ratio!r}",
            ),
            (
                _is_number(low) and _is_number(high) and -math.inf < low < high < math.inf,
                "clip_cov_low < clip_cov_high must be finite numbers (Clip-Cov's covariance band "
                f"(omega_low, omega_high)), got {low!r} and {high!r}: swap them or widen the band",
            ),
            (
                _is_number(self.kl_cov_ratio) and 0 < self.kl_cov_ratio <= 1,
                "kl_cov_ratio (KL-Cov's k, the fraction of the step's response tokens penalised) must be in "
                f"(0, 1], got {self.kl_cov_ratio!r}",
            ),
            (
                _is_number(self.kl_cov_coef) and 0 < self.kl_cov_coef < math.inf,
                f"kl_cov_coef (KL-Cov's beta) must be a finite number > 0, got {self.kl_cov_coef!r} (for no "
                "guard, set entropy_guard='none')",
            ),
        ]

    def _lora_checks(self) -> list[tuple[bool, str]]:
        targets = self.lora_target_modules
        return [
            (
                isinstance(self.lora_rank, int)
                and not isinstance(self.lora_rank, bool)
                and self.lora_rank >= 0,
                f"lora_rank must be an integer >= 0 (0 = full fine-tuning), got {self.lora_rank!r}",
            ),
            (
                self.lora_alpha is None
                or (isinstance(self.lora_alpha, int | float) and not isinstance(self.lora_alpha, bool))
                and self.lora_alpha > 0,
                f"lora_alpha must be a number > 0, or None for 2 x lora_rank, got {self.lora_alpha!r}",
            ),
            (
                isinstance(self.lora_dropout, int | float) and 0 <= self.lora_dropout < 1,
                f"lora_dropout must be in [0, 1), got {self.lora_dropout!r}",
            ),
            (
                targets == "all-linear"
                or (
                    isinstance(targets, list | tuple)
                    and len(targets) > 0
                    and all(isinstance(name, str) and name for name in targets)
                ),
                "lora_target_modules must be 'all-linear' or a non-empty list of module names (e.g. "
                f"['q_proj', 'v_proj']), got {targets!r}",
            ),
        ]

    def resolved_lora_alpha(self) -> float:
        """LoRA's alpha: ``lora_alpha``, or 2 x ``lora_rank`` where it is None."""
        return 2.0 * self.lora_rank if self.lora_alpha is None else float(self.lora_alpha)

    def resolved_overlong_cache_len(self) -> int:
        """L_cache of the soft overlong punishment: ``overlong_cache_len``, with "auto" = a third of
        ``max_response_tokens`` (at least 1), at most DAPO's 4096 (section 4.1)."""
        if self.overlong_cache_len == "auto":
            return min(DAPO_OVERLONG_CACHE_LEN, max(1, self.max_response_tokens // 3))
        return int(self.overlong_cache_len)

    def resolved_dual_clip_c(self) -> float | None:
        """The dual clip the loss uses: ``dual_clip_c``, with "auto" = 3.0 when replay is on, else off."""
        if self.dual_clip_c == "auto":
            return REPLAY_DUAL_CLIP_C if self.replay_mode != "on_policy" else None
        return None if self.dual_clip_c is None else float(self.dual_clip_c)

    def resolved_dtypes(self) -> dict[str, str]:
        """The concrete learner and engine dtypes and why: keys ``model_dtype``, ``model_dtype_reason``,
        ``engine_dtype``, ``engine_dtype_reason`` (``models.dtype.resolve_dtype``). Those validate() fixed
        in the driver, unless the dtypes or GPUs were set since: then, as for a config never validated,
        resolved on this machine."""
        if self._resolved_dtypes is not None and self._resolved_dtypes[0] == self._dtype_request():
            return dict(self._resolved_dtypes[1])
        return self._resolve_dtypes()

    def _dtype_request(self) -> tuple[str, str, bool]:
        # Learners and EnvRunners that request GPUs compute there; with GPUs the whole run is resolved for
        # the GPU (an in-process engine shares the learner's GPU).
        gpu = (self.num_gpus_per_learner or 0) > 0 or (self.num_gpus_per_env_runner or 0) > 0
        return self.model_dtype, self.engine_dtype, gpu

    def _resolve_dtypes(self) -> dict[str, str]:
        model_dtype, engine_dtype, gpu = self._dtype_request()
        model = resolve_dtype(model_dtype, gpu=gpu)
        engine = resolve_dtype(engine_dtype, gpu=gpu)
        return {
            "model_dtype": model.dtype,
            "model_dtype_reason": model.reason,
            "engine_dtype": engine.dtype,
            "engine_dtype_reason": engine.reason,
        }

    def resolved_mismatch_correction(self) -> bool:
        """Whether the learner recomputes pi_old and applies the TIS weight ("auto": the resolved dtypes
        differ, or the rollouts are asynchronous)."""
        if self.mismatch_correction == "auto":
            dtypes = self.resolved_dtypes()
            return dtypes["engine_dtype"] != dtypes["model_dtype"] or self.rollout_mode == "async"
        return bool(self.mismatch_correction)

    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from models.policy_module import LLMPolicyModule

        return RLModuleSpec(module_class=LLMPolicyModule, model_config=self.policy_model_config())

    def get_default_learner_class(self):
        from algorithms.dapo.learner import DAPOTorchLearner

        return DAPOTorchLearner

    def policy_model_config(self) -> dict[str, Any]:
        """What the policy module needs to build the HF model (learner) or the vLLM engine (runners); the
        dtypes are the resolved ones, never "auto"."""
        dtypes = self.resolved_dtypes()
        return {
            "model_path": self.model_path,
            "model_dtype": dtypes["model_dtype"],
            "engine_dtype": dtypes["engine_dtype"],
            "max_context_tokens": self.max_context_tokens,
            "engine_kv_cache_gib": self.engine_kv_cache_gib,
            "system_prompt": self.system_prompt,
            "temperature": self.temperature,  # learner logprobs must match the sampler's (logits / T)
            "share_prefix": self.share_prefix,
            "pack_rows": self.pack_rows,
            "gradient_checkpointing": self.gradient_checkpointing,
            "seed": self.seed or 0,
            "lora_rank": self.lora_rank,
            "lora_alpha": self.resolved_lora_alpha(),
            "lora_dropout": self.lora_dropout,
            "lora_target_modules": self.lora_target_modules,
        }

    @property
    def _model_config_auto_includes(self) -> dict[str, Any]:
        return {}


def _is_search_space(value: Any) -> bool:
    """A Tune grid (``{"grid_search": [...]}``) or domain (``tune.choice``): a sweep's value, which each
    trial's config holds one value of."""
    grid = isinstance(value, dict) and set(value) == {"grid_search"}
    return grid or type(value).__module__.startswith("ray.tune.search")


def _same_value(recorded: Any, value: Any) -> bool:
    """``value`` is what was recorded, or anything where a search space was (a trial's value of it)."""
    if isinstance(recorded, str) and recorded == SEARCH_SPACE:
        return True
    try:
        return bool(recorded == value) or (isinstance(recorded, list) and tuple(recorded) == value)
    except (TypeError, ValueError):  # arrays and other values without a plain ==
        return recorded is value


def _resolves(registry: Registry, name: Any) -> tuple[bool, str]:
    """(ok, message) of an extension's name: registered, or a "module:name" whose module, imported here,
    registers or defines it (``Registry.get`` says what went wrong)."""
    try:
        registry.get(name)
    except ValueError as error:
        return False, str(error)
    return True, ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _env_runner_cls():
    from algorithms.env_runner import MultiTurnEnvRunner

    return MultiTurnEnvRunner
