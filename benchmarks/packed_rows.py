"""The learner's micro-batch with its rows packed into one row (``token_logprobs(pack_rows=True)``) or padded.

Times ``token_logprobs`` forward + backward (or forward alone, ``--no-grad``, as for pi_old and the
reference) of one micro-batch of right-padded rows of ``--rows`` real tokens, the first ``--prefix`` shared
(a group's first prompt; 0: no shared prefix), the loss read at 40% of the positions after the prefix
(``needed``, like a multi-turn episode's responses), with the padded and the packed rows alternating in one
process. Packing runs no padding through the linear layers, but its block-diagonal mask spans all the packed
tokens, which SDPA computes in full. Prints the CPU, each side's median and fastest seconds and the ratios
packed / padded of the medians and of the fastest calls (the least disturbed on a shared machine).

    python -m benchmarks.packed_rows --model smollm2-shape --dtype bfloat16
    python -m benchmarks.packed_rows --model tiny --rows 130,280,320,337 --output /tmp/packed.json
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from typing import Any

import torch
from torch import nn

from benchmarks.measure import alternate, load_average
from benchmarks.requirements import parse_and_check
from experiments.common.results_json import machine, provenance, write_json
from models.logprobs import token_logprobs

PROG = "python -m benchmarks.packed_rows"
REQUIRES: tuple[str, ...] = ()
SIDES = ("padded", "packed")
# A micro-batch of the SmolLM2 FrozenLake batch: 4 rows of 130-337 tokens, 21% of the positions padding.
ROWS = "130,280,320,337"
PREFIX = 110  # the group's first prompt (system prompt and first observation), shorter than the shortest row


def smollm2_shaped() -> nn.Module:
    """SmolLM2-135M's architecture with random weights (the benchmark times shapes, not what is computed)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True, rope_theta=100_000.0,
        max_position_embeddings=8192,
    )  # fmt: skip
    torch.manual_seed(0)
    return LlamaForCausalLM(config).float()


def build_model(name: str) -> nn.Module:
    if name == "tiny":
        from transformers import AutoModelForCausalLM

        from models.tiny import tiny_lm_path

        return AutoModelForCausalLM.from_pretrained(tiny_lm_path(), dtype=torch.float32)
    return smollm2_shaped()


def micro_batch(lengths: list[int], prefix: int, vocab: int) -> dict[str, torch.Tensor]:
    """Right-padded rows of ``lengths`` random tokens sharing the first ``prefix``, and the loss positions."""
    generator = torch.Generator().manual_seed(0)
    width = max(lengths)
    ids = torch.randint(7, vocab, (len(lengths), width), generator=generator)
    ids[:, :prefix] = ids[0, :prefix]
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    ids = ids * mask
    after = torch.arange(width - 1)[None, :] >= max(prefix - 1, 0)
    needed = after & ((torch.arange(width - 1) // 10) % 5 < 2)[None, :] & mask[:, 1:].bool()
    return {"input_ids": ids, "attention_mask": mask, "needed": needed}


def timed(
    model: nn.Module, batch: dict[str, torch.Tensor], args: argparse.Namespace, side: str, _: int
) -> float:
    """Seconds of one forward (+ backward of a weighted sum of logprobs and entropies) of ``side``."""
    model.zero_grad(set_to_none=True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bfloat16")
    grad = torch.no_grad() if args.no_grad else torch.enable_grad()
    start = time.perf_counter()
    with grad, autocast:
        logp, entropy = token_logprobs(
            model, batch["input_ids"], batch["attention_mask"], with_entropy=True, needed=batch["needed"],
            share_prefix=args.prefix > 0, checkpoint_layers=args.checkpoint_layers,
            pack_rows=side == "packed",
        )  # fmt: skip
    if not args.no_grad:
        (logp.sum() + 0.01 * entropy.sum()).backward()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "smollm2-shape"), default="smollm2-shape")
    parser.add_argument("--rows", default=ROWS, help="real tokens of each row, comma-separated (%(default)s)")
    parser.add_argument("--prefix", type=int, default=PREFIX, help="tokens all rows share (0: none)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="bf16: autocast")
    parser.add_argument("--checkpoint-layers", action="store_true", help="recompute layers in the backward")
    parser.add_argument("--no-grad", action="store_true", help="time the forward alone, without gradients")
    parser.add_argument("--repeats", type=int, default=5, help="alternating timed calls of each side")
    parser.add_argument("--output", help="also write the results as JSON to this file")
    args = parse_and_check(parser, argv, REQUIRES)
    lengths = [int(length) for length in args.rows.split(",")]
    if not 0 <= args.prefix < min(lengths):
        parser.error(f"--prefix must be >= 0 and shorter than the shortest row ({min(lengths)})")

    model = build_model(args.model)
    batch = micro_batch(lengths, args.prefix, model.config.vocab_size)
    sides = {side: functools.partial(timed, model, batch, args, side) for side in SIDES}
    alternate(sides, 1)  # first calls pay one-off costs (allocations, kernel selection)
    runs = alternate(sides, args.repeats)
    medians = {side: statistics.median(runs[side]) for side in SIDES}
    ratio = medians["packed"] / medians["padded"]
    # On a shared machine a neighbour's load inflates some calls: the fastest calls are the least disturbed.
    fastest_ratio = min(runs["packed"]) / min(runs["padded"])

    cpu = machine()
    own = sum(lengths) - len(lengths) * args.prefix
    padded_positions = len(lengths) * (max(lengths) - args.prefix)
    print(f"CPU: {cpu['cpu_model']}, {cpu['cores']} cores, flags {' '.join(cpu['cpu_flags'])}")
    print(f"torch threads {torch.get_num_threads()}, load {load_average()}")
    print(
        f"{args.model} {args.dtype}{' checkpointed' if args.checkpoint_layers else ''}, "
        f"{'forward' if args.no_grad else 'forward + backward'}; rows {lengths}, prefix {args.prefix}: "
        f"{padded_positions} positions padded after the prefix, {own} packed "
        f"({1 - own / padded_positions:.0%} padding)"
    )
    for side in SIDES:
        print(f"{side}: median {medians[side]:.3f} s, fastest {min(runs[side]):.3f} s over {args.repeats}")
    print(f"packed / padded: {ratio:.3f} (medians), {fastest_ratio:.3f} (fastest)")
    if args.output:
        results: dict[str, Any] = {
            "provenance": provenance(PROG, argv),
            "model": args.model,
            "dtype": args.dtype,
            "checkpoint_layers": args.checkpoint_layers,
            "grad": not args.no_grad,
            "rows": lengths,
            "prefix": args.prefix,
            "torch_threads": torch.get_num_threads(),
            "median_s": medians,
            "runs_s": runs,
            "packed_over_padded": ratio,
            "packed_over_padded_fastest": fastest_ratio,
        }
        write_json(args.output, results)


if __name__ == "__main__":
    main()
