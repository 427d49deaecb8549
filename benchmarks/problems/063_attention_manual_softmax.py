"""Attention written out by hand: softmax(Q K^T / sqrt(d)) V with matmul, transpose, softmax.

The same computation as scaled_dot_product_attention, as separate ops a compiler can fuse.
"""

import torch
import torch.nn as nn

batch_size = 4
heads = 8
seq_len = 128
head_dim = 64


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = head_dim**-0.5

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    shape = (batch_size, heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [head_dim]
