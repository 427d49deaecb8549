"""Causal masking of attention scores: masked_fill with -inf above the diagonal, then softmax.

The triangular mask is built at forward time from torch.ones(...).tril() == 0.
"""

import torch
import torch.nn as nn

batch_size = 8
heads = 8
seq_len = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores):
        n = scores.shape[-1]
        mask = torch.ones(n, n, dtype=scores.dtype, device=scores.device).tril() == 0
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)


def get_inputs():
    return [torch.randn(batch_size, heads, seq_len, seq_len)]


def get_init_inputs():
    return []
