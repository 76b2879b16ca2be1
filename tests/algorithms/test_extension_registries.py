"""The registries of the five extension points (algorithms/registry.py; docs/design.md, "Adding an
extension"): lookup by name, a user's own entries named "module:name" (registered by the decorator or defined
as an attribute), DAPOConfig's validation of the names, and a user's entries at work, down to a training run.

The user's module is written to a folder outside the repository and imported by name, as a user's would be.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

from algorithms.dapo import DAPOConfig
from algorithms.dapo.advantage_estimators import ADVANTAGE_ESTIMATOR_REGISTRY
from algorithms.dapo.dynamic_sampling import DynamicSampler
from algorithms.dapo.dynamic_sampling_metrics import DYNAMIC_SAMPLING_METRIC_REGISTRY
from algorithms.dapo.entropy_guard import ENTROPY_GUARD_REGISTRY, select_tokens
from algorithms.dapo.groups import shape_and_score_group
from algorithms.dapo.loss import LossConfig, loss_normalizer, policy_loss
from algorithms.registry import Registry
from algorithms.replay import (
    PRIORITY_DECAY_REGISTRY,
    REPLAY_MODE_REGISTRY,
    REPLAY_MODES,
    ExponentialDecay,
    PrioritizedReplayBuffer,
    make_reference_buffer,
)
from algorithms.trajectory import Trajectory

# One extension of each kind, as a user writes them (docs/design.md, "Adding an extension").
USER_MODULE = "freshrl_user_extensions"
USER_SOURCE = '''
from dataclasses import dataclass

import numpy as np
import torch

from algorithms.dapo.advantage_estimators import (
    ADVANTAGE_ESTIMATOR_REGISTRY,
    AdvantageEstimator,
    GroupAdvantages,
)
from algorithms.dapo.dynamic_sampling_metrics import DYNAMIC_SAMPLING_METRIC_REGISTRY
from algorithms.dapo.entropy_guard import ENTROPY_GUARD_REGISTRY, EntropyGuard
from algorithms.replay import PRIORITY_DECAY_REGISTRY, REPLAY_MODE_REGISTRY, prioritized_buffer


@dataclass(frozen=True)
class LeaveOneOut(AdvantageEstimator):
    """RLOO: each reward minus the mean of the group's other rewards."""

    def advantages(self, group, rewards):
        baseline = (rewards.sum() - rewards) / (len(rewards) - 1)
        return GroupAdvantages(episode=rewards - baseline, turns=None)

    def training_batch_metrics(self, groups):
        return {"user/rloo_groups": float(len(groups))}


@ADVANTAGE_ESTIMATOR_REGISTRY.register("user_rloo")
def user_rloo(config):
    return LeaveOneOut()


@dataclass(frozen=True)
class EveryRowTrains(AdvantageEstimator):
    """Advantage 1 on every trajectory, so that every row reaches the loss whatever the rewards."""

    def advantages(self, group, rewards):
        return GroupAdvantages(episode=np.ones(len(rewards)), turns=None)

    def training_batch_metrics(self, groups):
        return {"user/groups": float(len(groups))}


def every_row_trains(config):  # not registered: found as the module's attribute
    return EveryRowTrains()


@DYNAMIC_SAMPLING_METRIC_REGISTRY.register("user_turns")
def user_turns(group):
    return [float(t.num_turns) for t in group]


def response_lengths(group):  # not registered: found as the module's attribute
    return [float(t.num_response_tokens) for t in group]


NOT_A_FUNCTION = 3


@dataclass(frozen=True)
class TopCovDetach(EntropyGuard):
    """Detaches the `count` tokens of largest covariance."""

    count: int

    def select(self, cov, rng):
        return np.argsort(-cov, kind="stable")[: self.count], {"user/guard_count": float(self.count)}

    def token_losses(self, pg_losses, log_ratio, selected):
        return torch.where(selected, torch.zeros_like(pg_losses), pg_losses), None


@ENTROPY_GUARD_REGISTRY.register("user_top_cov")
def user_top_cov(config):
    return TopCovDetach(count=1)


@dataclass(frozen=True)
class StepDecay:
    """d(age) = 0.5 ** floor(age / tau), which the compiled kernels do not know."""

    tau: float
    shift_invariant = False
    kernel_params = None

    def factor(self, ages):
        return 0.5 ** np.floor(np.asarray(ages, dtype=np.float64) / self.tau)

    def log_weight(self, collection_steps, reference_step):
        return np.log(self.factor(reference_step - np.asarray(collection_steps, dtype=np.float64)))


@PRIORITY_DECAY_REGISTRY.register("user_step")
def user_step(settings):
    return StepDecay(tau=settings.tau)


@REPLAY_MODE_REGISTRY.register("user_freshper_step")
def user_freshper_step(settings):
    return prioritized_buffer(settings, decay="user_step")
'''


@pytest.fixture(scope="module")
def user_module(tmp_path_factory) -> str:
    """The user's module, importable by name for this file's tests (its entries stay registered after)."""
    folder = tmp_path_factory.mktemp("user_code")
    (folder / f"{USER_MODULE}.py").write_text(USER_SOURCE)
    (folder / "freshrl_broken_extension.py").write_text("raise RuntimeError('a bug in the user module')\n")
    sys.path.insert(0, str(folder))
    yield USER_MODULE
    sys.path.remove(str(folder))


def registry() -> Registry:
    return Registry("widget", key="widget_kind", home="some.package:WIDGET_REGISTRY")


def test_a_registry_registers_lists_and_gets_by_name():
    widgets = registry()

    @widgets.register("b")
    def b() -> str:
        return "b"

    @widgets.register("a")
    def a() -> str:
        return "a"

    assert widgets.names() == ("b", "a")  # in registration order
    assert "a" in widgets and "c" not in widgets and 3 not in widgets
    assert widgets.get("a") is a and widgets.get("a")() == "a"


def test_an_unknown_name_says_what_is_registered_and_how_to_add_one():
    widgets = registry()
    widgets.register("gigpo")(lambda: None)
    with pytest.raises(ValueError) as raised:
        widgets.get("gipgo")
    message = str(raised.value)
    assert message.startswith(
        "widget_kind must be one of ('gigpo',) or a 'module:name' of your own, got 'gipgo'"
    )
    assert "did you mean 'gigpo'?" in message
    assert '@WIDGET_REGISTRY.register("name") (from some.package import WIDGET_REGISTRY)' in message
    assert 'widget_kind="your_module:name"' in message and "Adding an extension" in message
    with pytest.raises(ValueError, match="got None"):
        widgets.get(None)


def test_a_name_is_taken_once():
    widgets = registry()

    def entry() -> None:
        pass

    widgets.register("x")(entry)
    widgets.register("x")(entry)  # the same definition again (its module imported twice) replaces itself

    def other() -> None:
        pass

    with pytest.raises(ValueError, match="widget 'x' is already registered .* choose another name"):
        widgets.register("x")(other)
    for bad in ("", "mod:name", None):
        with pytest.raises(ValueError, match="non-empty string without ':'"):
            widgets.register(bad)


def test_module_name_finds_a_decorated_entry_or_an_attribute(user_module):
    estimator = ADVANTAGE_ESTIMATOR_REGISTRY.get(f"{user_module}:user_rloo")
    assert "user_rloo" in ADVANTAGE_ESTIMATOR_REGISTRY  # the import registered it under its own name
    assert ADVANTAGE_ESTIMATOR_REGISTRY.get("user_rloo") is estimator
    metric = DYNAMIC_SAMPLING_METRIC_REGISTRY.get(f"{user_module}:response_lengths")
    assert metric.__name__ == "response_lengths"
    assert "response_lengths" not in DYNAMIC_SAMPLING_METRIC_REGISTRY  # found, not registered
    # A built-in by its module's path is the built-in.
    episode = ADVANTAGE_ESTIMATOR_REGISTRY.get("algorithms.dapo.advantage_estimators.episode:episode")
    assert episode is ADVANTAGE_ESTIMATOR_REGISTRY.get("episode")


def test_a_module_name_that_does_not_resolve_is_a_clear_error(user_module):
    cases = {
        "no_such_module_here:x": "cannot import module 'no_such_module_here' \\(ModuleNotFoundError",
        "freshrl_broken_extension:x": "cannot import module .* \\(RuntimeError: a bug in the user module\\)",
        f"{user_module}:missing": f"module '{user_module}' registers no entropy guard 'missing', and "
        "'missing' is not defined there",
        f"{user_module}:NOT_A_FUNCTION": "module .*, and 'NOT_A_FUNCTION' is not a function or class",
    }
    for name, message in cases.items():
        with pytest.raises(ValueError, match=f"entropy_guard='{name}': {message}"):
            ENTROPY_GUARD_REGISTRY.get(name)


def test_the_registries_hold_the_built_ins_in_order():
    built_ins = {
        ADVANTAGE_ESTIMATOR_REGISTRY: ("episode", "gigpo"),
        DYNAMIC_SAMPLING_METRIC_REGISTRY: ("success", "reward"),
        ENTROPY_GUARD_REGISTRY: ("none", "clip_cov", "kl_cov"),
        PRIORITY_DECAY_REGISTRY: ("none", "exponential", "polynomial"),
        REPLAY_MODE_REGISTRY: ("on_policy", "per", "freshper", "freshper_poly"),
    }
    for extension_point, names in built_ins.items():
        assert extension_point.names()[: len(names)] == names  # a user's entries come after
    # What experiments/ offers as replay modes: the built-ins, a plain tuple whatever else is registered.
    assert REPLAY_MODES == ("on_policy", "per", "freshper", "freshper_poly") and type(REPLAY_MODES) is tuple


@pytest.mark.parametrize(
    ("key", "entry"),
    [
        ("advantage_estimator", "user_rloo"),
        ("dynamic_sampling_metric", "response_lengths"),
        ("entropy_guard", "user_top_cov"),
        ("replay_mode", "user_freshper_step"),
    ],
)
def test_dapo_config_accepts_a_users_name_that_resolves_and_rejects_one_that_does_not(
    user_module, key, entry
):
    def config(name: str) -> DAPOConfig:
        base = DAPOConfig().environment("freshrl/FrozenLake-v0")
        return base.replay(mode=name) if key == "replay_mode" else base.training(**{key: name})

    config(f"{user_module}:{entry}").validate()
    with pytest.raises(ValueError, match=f"^DAPOConfig: {key}='{user_module}:nothing': module"):
        config(f"{user_module}:nothing").validate()
    with pytest.raises(ValueError, match=f"^DAPOConfig: {key} must be one of"):
        config("nothing").validate()


def trajectory(reward: float, turns: int = 1) -> Trajectory:
    return Trajectory(
        token_ids=[1] + [2, 3] * turns,
        loss_mask=[0] + [1, 0] * turns,
        behaviour_logprobs=[0.0] * (1 + 2 * turns),
        response_spans=[(1 + 2 * t, 2 + 2 * t) for t in range(turns)],
        turn_rewards=[0.0] * (turns - 1) + [reward],
        finish_reasons=["stop"] * turns,
        env_seed=0,
        group_id=0,
        collection_step=0,
        policy_version=0,
    )


def test_a_users_estimator_metric_and_guard_do_their_part(user_module):
    config = DAPOConfig().training(
        advantage_estimator=f"{user_module}:user_rloo",
        dynamic_sampling_metric=f"{user_module}:user_turns",
        entropy_guard=f"{user_module}:user_top_cov",
    )
    group = [trajectory(1.0), trajectory(0.0), trajectory(0.0, turns=2)]
    estimator = ADVANTAGE_ESTIMATOR_REGISTRY.get(config.advantage_estimator)(config)
    shape_and_score_group(
        group,
        overlong_punishment=False,
        overlong_scope="trajectory",
        max_response_tokens=4,
        overlong_cache_len=2,
        estimator=estimator,
    )
    assert [t.advantage for t in group] == [1.0, -0.5, -0.5]  # R_i - the mean of the other two
    assert estimator.training_batch_metrics([group]) == {"user/rloo_groups": 1.0}
    metric = DYNAMIC_SAMPLING_METRIC_REGISTRY.get(config.dynamic_sampling_metric)
    sampler = DynamicSampler(1, 1, filter_groups=True, metric=metric, also_keep=estimator.also_keep)
    assert sampler.is_informative(group) and not sampler.is_informative(group[:2])  # turns 1, 2 / 1, 1

    guard = LossConfig.from_config(config).entropy_guard
    mask = torch.ones(1, 3, dtype=torch.bool)
    logp_old = torch.tensor([[-1.0, -2.0, -3.0]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    tokens = select_tokens([logp_old[0].numpy()], [adv[0].numpy()], [mask[0].numpy()], guard, None)
    # Cov_i = (logp_i + 2)(A_i - 0): 1, 0, 1; the first of the largest is detached.
    assert tokens.selected[0].tolist() == [True, False, False]
    assert tokens.metrics["user/guard_count"] == 1.0  # the guard's own metrics beside the step's
    assert tokens.metrics["entropy_guard/selected_frac"] == 1 / 3
    logp = (logp_old + 0.1).requires_grad_(True)
    cfg = LossConfig.from_config(config)
    loss, metrics = policy_loss(
        logp, logp_old, adv, mask, normalizer=loss_normalizer([mask], "token-mean"), cfg=cfg,
        guard_tokens=tokens.batch([0], like=mask),
    )  # fmt: skip
    loss.backward()
    assert logp.grad[0, 0] == 0.0 and logp.grad[0, 2] != 0.0
    assert int(metrics["entropy_guard_tokens"]) == 1 and "entropy_guard_penalty" not in metrics


def exercise(buffer: PrioritizedReplayBuffer, steps: int = 6) -> dict[int, tuple[float, float]]:
    """Adds, draws and priority updates over ``steps`` steps (no eviction); returns id -> (p_base, t_i)."""
    rng = np.random.default_rng(0)
    items: dict[int, tuple[float, float]] = {}
    for t in range(steps):
        signals = rng.uniform(0.1, 2.0, 2)
        ids = buffer.add(["item"] * 2, signals, t=float(t))
        items.update({i: (s + buffer.eps, float(t)) for i, s in zip(ids.tolist(), signals, strict=True)})
        sample = buffer.sample(3, t=float(t))
        new = rng.uniform(0.1, 2.0, 3)
        buffer.update_priorities(sample.indices, new)
        for i, s in zip(sample.indices.tolist(), new, strict=True):  # the last write wins
            items[i] = (s + buffer.eps, items[i][1])
    return items


def test_a_decay_without_a_kernel_is_computed_exactly(user_module):
    """A user's decay (no ``kernel_params``: the compiled kernels do not know it) gives the probabilities and
    IS weights of its formula after adds, priority updates and new steps."""
    buffer = make_reference_buffer(f"{user_module}:user_freshper_step", capacity=64, alpha=0.7, tau=2.0)
    assert type(buffer.decay).__name__ == "StepDecay" and buffer.decay.kernel_params is None
    items = exercise(buffer)
    t = 7.0
    ids, probs = buffer.probabilities(t)
    base, steps = (np.array([items[i][k] for i in ids.tolist()]) for k in (0, 1))
    keys = (base * buffer.decay.factor(t - steps)) ** 0.7  # P(i) ~ (p_base_i d(t - t_i))^alpha
    want = keys / keys.sum()
    np.testing.assert_allclose(probs, want, rtol=1e-12)
    drawn = buffer.sample(5, t=t)
    position = {i: k for k, i in enumerate(ids.tolist())}
    drawn_probs = want[[position[i] for i in drawn.indices.tolist()]]
    np.testing.assert_allclose(drawn.probabilities, drawn_probs, rtol=1e-12)
    # w_i = (P(i) / min_j P(j))^-beta, the min over the whole buffer.
    np.testing.assert_allclose(drawn.is_weights, (drawn_probs / want.min()) ** -drawn.beta, rtol=1e-12)


@dataclass(frozen=True)
class UncompiledExponential:
    """FreshPER's decay declared as a user's would be: no kernel of its own."""

    tau: float
    shift_invariant: ClassVar[bool] = True
    kernel_params: ClassVar[None] = None

    def factor(self, ages: np.ndarray) -> np.ndarray:
        return ExponentialDecay(self.tau).factor(ages)

    def log_weight(self, collection_steps: np.ndarray, reference_step: float) -> np.ndarray:
        return ExponentialDecay(self.tau).log_weight(collection_steps, reference_step)


def test_a_decay_without_a_kernel_matches_its_compiled_twin():
    def buffer(decay) -> PrioritizedReplayBuffer:
        return PrioritizedReplayBuffer(
            64,
            decay,
            alpha=0.6,
            beta_0=0.4,
            beta_horizon=10.0,
            eps=1e-6,
            seed=0,
            insert_at_max_priority=False,
        )

    compiled, uncompiled = buffer(ExponentialDecay(tau=3.0)), buffer(UncompiledExponential(tau=3.0))
    exercise(compiled), exercise(uncompiled)
    ids, probs = compiled.probabilities(9.0)
    np.testing.assert_array_equal(uncompiled.probabilities(9.0)[0], ids)
    np.testing.assert_allclose(uncompiled.probabilities(9.0)[1], probs, rtol=1e-12)
    a, b = compiled.sample(50, t=9.0), uncompiled.sample(50, t=9.0)
    np.testing.assert_array_equal(a.indices, b.indices)  # the same stream, the same draws
    np.testing.assert_allclose(b.is_weights, a.is_weights, rtol=1e-12)


def test_a_run_trains_with_a_users_extensions_named_module_name(user_module, small_dapo_config):
    """A real iteration (tiny LM on FrozenLake) with all four names a user's: the estimator's metric is
    logged, the guard acts in the learner, the user's replay mode built the buffer that stores the batch."""
    config = small_dapo_config(
        "freshrl/FrozenLake-v0",
        advantage_estimator=f"{user_module}:every_row_trains",
        dynamic_sampling=False,  # the random tiny model fails every episode: keep its groups
        dynamic_sampling_metric=f"{user_module}:user_turns",
        entropy_guard=f"{user_module}:user_top_cov",
        overlong_filtering=False,
    ).replay(mode=f"{user_module}:user_freshper_step")
    algo = config.build_algo()
    try:
        result = algo.train()
        buffer = algo.replay_buffer
    finally:
        algo.stop()
    assert result["user/groups"] == config.prompts_per_iteration
    assert result["learners"]["user/guard_count"] == 1.0
    assert type(buffer.decay).__name__ == "StepDecay"
    assert len(buffer) == config.prompts_per_iteration * config.group_size
