"""A Mamba-2 style state-space chunk: decays from a cumulative sum, a segment-sum matrix
made with triangular masks (-inf above the diagonal), and einsums over the chunk."""

import torch
import torch.nn as nn

batch_size = 2
chunks, length, heads, head_dim, state = 4, 32, 4, 16, 16


def segment_sums(a):
    steps = a.size(-1)
    a = a.unsqueeze(-1).expand(*a.shape, steps)
    below = torch.tril(torch.ones(steps, steps, dtype=torch.bool), diagonal=-1)
    a = a.masked_fill(~below, 0)
    sums = torch.cumsum(a, dim=-2)
    keep = torch.tril(torch.ones(steps, steps, dtype=torch.bool), diagonal=0)
    return sums.masked_fill(~keep, -torch.inf)


class Model(nn.Module):
    def forward(self, x, a, b, c):
        a = a.permute(0, 3, 1, 2)  # [batch, heads, chunks, length]
        decay = torch.exp(segment_sums(a))
        y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", c, b, decay, x)
        totals = torch.cumsum(a, dim=-1)
        to_end = torch.exp(totals[:, :, :, -1:] - totals)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", b, to_end, x)
        return y_diag, states


def get_inputs():
    x = torch.randn(batch_size, chunks, length, heads, head_dim)
    a = -torch.rand(batch_size, chunks, length, heads) * 0.1
    b = torch.randn(batch_size, chunks, length, heads, state)
    c = torch.randn(batch_size, chunks, length, heads, state)
    return [x, a, b, c]


def get_init_inputs():
    return []
