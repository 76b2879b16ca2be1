"""Right-padded rows packed into one row without padding, for ``token_logprobs(pack_rows=True)``.

The tokens of the B rows after their shared prefix (all of them when none is shared) are laid end to end in a
row of batch 1. Each token keeps its position in its own row as position id (prefix length + offset), and
attends causally to its own row's tokens and to the whole shared prefix, whose keys and values come first;
tokens of other rows are masked out. The mask is the 4D boolean [1, 1, queries, keys] that transformers'
SDPA attention passes to ``scaled_dot_product_attention`` unchanged (``masking_utils`` returns a 4D mask
as given; transformers 5.19), so each row is computed as in its own padded row, without the padding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PackedRows:
    """Where each packed token comes from, and who it may attend to.

    Attributes:
        rows: [N] the padded row of each packed token.
        times: [N] its position in that row, which is also its position id.
        attention_mask: [1, 1, N, prefix + N] bool, True where a query may attend to a key (the keys are the
            shared prefix's, then the packed tokens').
        predicts: [N] bool, True for the tokens followed by another of their row (whose hidden state
            predicts it): all but each row's last.
    """

    rows: torch.Tensor
    times: torch.Tensor
    attention_mask: torch.Tensor
    predicts: torch.Tensor


def pack(lengths: torch.Tensor, prefix: int) -> PackedRows:
    """The packing of rows of ``lengths`` real tokens each (right-padded) whose first ``prefix`` tokens are
    shared and run apart (0: none); every row must be longer than ``prefix`` unless it is empty."""
    device = lengths.device
    own = (lengths - prefix).clamp(min=0)
    rows = torch.repeat_interleave(torch.arange(len(lengths), device=device), own)
    starts = torch.cumsum(own, dim=0) - own
    times = prefix + torch.arange(len(rows), device=device) - starts[rows]
    causal_within_row = (rows[:, None] == rows[None, :]) & (times[None, :] <= times[:, None])
    sees_prefix = causal_within_row.new_ones(len(rows), prefix)
    attention_mask = torch.cat([sees_prefix, causal_within_row], dim=1)[None, None]
    return PackedRows(rows, times, attention_mask, times < lengths[rows] - 1)


def right_padded_lengths(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each row's number of real tokens; a ValueError unless every row's real tokens come first (a hole or
    left padding would be packed as if it were not there)."""
    lengths = attention_mask.sum(dim=1)
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    if not torch.equal(attention_mask.bool(), positions[None, :] < lengths[:, None]):
        raise ValueError("pack_rows needs right-padded rows: attention_mask must be 1s then 0s in every row")
    return lengths
